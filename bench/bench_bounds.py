"""Bounded input: the local review's syntax check and rules scan on a reply of many comment lines.

    .venv/bin/python bench/bench_bounds.py [--runs N]

tree-sitter-python parses a run of whole-line comments in quadratic time (issue 11: 2,000 lines 2 s,
8,000 lines 28 s; a 50 MB reply held run-local-review for 1,069 s). `hub.review.code` blanks them first. The
median time of `syntax_errors` on 2,000 and 32,000 comment lines, and their ratio: linear is ~16. The same
for the ast-grep scan (`scan_paths`), which parses with the same grammar: issue 28 measured 16,000 lines at
15 s and a 380,000-character reply over 245 s; the scanned copy blanks long comment runs since. Goal: a reply
at the cap (limits.max_reply_chars, ~60,000 short lines) reviewed in under 10 s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from hub.review.code import syntax_errors


def median_ms(lines: int, runs: int) -> float:
    source = "def f(:\n    pass\n" + "# a comment line\n" * lines
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        syntax_errors("reply.py", source)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def scan_median_ms(lines: int, runs: int) -> float:
    import subprocess
    import tempfile
    from pathlib import Path

    from hub.review.scan import scan_paths

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / "reply.py").write_text(
            "import subprocess\n" + "".join(f"#{i:x}\n" for i in range(lines)) + "x = 1\n", encoding="utf-8"
        )
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            scan_paths(root, ["reply.py"])
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    small, large = median_ms(2_000, args.runs), median_ms(32_000, args.runs)
    print(f"syntax check, 2,000 comment lines: {small:.1f} ms; 32,000: {large:.1f} ms")
    print(f"ratio {large / small:.1f} for 16x the lines (linear: ~16; quadratic: ~256)")
    runs = max(3, args.runs // 3)
    small, large = scan_median_ms(3_750, runs), scan_median_ms(60_000, runs)
    print(f"rules scan, 3,750 comment lines: {small:.1f} ms; 60,000 (a reply at the cap): {large:.1f} ms")
    print(
        f"ratio {large / small:.1f} for 16x the lines (linear: ~16; quadratic: ~256); goal < 10 s at the cap"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
