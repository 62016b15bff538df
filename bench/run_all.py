"""`make bench`: every benchmark in turn, each printing medians and ratios against its baseline.

    python bench/run_all.py [NAME ...]     # e.g. startup task; default: all

Figures on a loaded machine are inflated; compare the ratios, and run on an idle machine for
absolute numbers. Bytecode caching is left on (a user's installed hub has .pyc files).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

BENCHES = (
    "startup",
    "phases",
    "bridge",
    "rules",
    "mcp",
    "task",
    "edits",
    "budget",
    "sandbox",
    "security",
    "git_objects",
    "bounds",
    "backlog",
    "clean_folders",
    "overhead",
    "tool_calls",
    "repomap",
    "board",
)


def main() -> int:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    chosen = sys.argv[1:] or list(BENCHES)
    unknown = [name for name in chosen if name not in BENCHES]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHES)}", file=sys.stderr
        )
        return 2
    for name in chosen:
        print(f"\n=== bench_{name} ===", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"bench_{name}").main([])
        print(f"(bench_{name}: {time.perf_counter() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
