"""Start-up time of the `hub` command against a bare interpreter.

    .venv/bin/python bench/bench_startup.py [--runs N] [--json]

Median wall time of `python -c pass`, `hub --help`, and `hub status` on a repository with an active
task (the contract is read and validated), each run as a subprocess of the venv's `hub` script, N
times each (default 20). The goal: `hub status` under 150 ms here. Then what `hub status` imports,
from `python -X importtime`, the largest first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _repo import git, init_repo  # bench/, beside this script

GOAL_MS = 150.0
BIN = Path(sys.executable).parent
HUB = BIN / "hub"


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env["HUB_LOG_FORMAT"] = "json"
    return env


def make_repo(folder: Path) -> Path:
    """A repository with hub.yaml committed and one task in pending_implementer."""
    repo = init_repo(folder / "repo")
    (repo / "app.py").write_text("print('hello')\n", encoding="utf-8")
    env = clean_env()
    subprocess.run([str(HUB), "init"], cwd=repo, check=True, capture_output=True, env=env)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    subprocess.run(
        [str(HUB), "new", "--title", "Bench task", "--requirement", "say hello", "--target", "app.py"],
        cwd=repo,
        check=True,
        capture_output=True,
        env=env,
    )
    return repo


def median_ms(command: Sequence[str], cwd: Path, runs: int) -> float:
    env = clean_env()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)  # warm the page cache
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def import_times(command: Sequence[str], cwd: Path, top: int = 12) -> list[tuple[str, float]]:
    """What the hub's own modules pull in: ("hub.x -> package", cumulative ms), largest first.

    `-X importtime` prints children before their parent, indented two spaces per level; an import
    of a non-hub package made directly by a hub module is what a lazy import could save.
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    rows: list[tuple[int, str, float]] = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((depth, name.strip(), int(parts[1]) / 1000))
    edges: list[tuple[str, float]] = []
    pending: dict[int, list[tuple[str, float]]] = {}
    for depth, name, cumulative in rows:
        children = pending.pop(depth + 1, [])
        if name.split(".")[0] == "hub":
            edges += [(f"{name} -> {child}", ms) for child, ms in children if child.split(".")[0] != "hub"]
        pending.setdefault(depth, []).append((name, cumulative))
    return sorted(edges, key=lambda item: -item[1])[:top]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hub-bench-startup-") as tmp:
        repo = make_repo(Path(tmp))
        baseline = median_ms([sys.executable, "-c", "pass"], repo, args.runs)
        results = {
            "python -c pass": baseline,
            "hub --help": median_ms([str(HUB), "--help"], repo, args.runs),
            "hub status": median_ms([str(HUB), "status"], repo, args.runs),
            "hub status --json": median_ms([str(HUB), "status", "--json"], repo, args.runs),
        }
        imports = import_times(["-m", "hub", "status"], repo)
    report = {
        "runs": args.runs,
        "median_ms": {k: round(v, 1) for k, v in results.items()},
        "ratio_to_python": {k: round(v / baseline, 2) for k, v in results.items()},
        "goal_ms": {"hub status": GOAL_MS},
        "status_meets_goal": results["hub status"] < GOAL_MS,
        "hub_status_imports_ms": {name: round(ms, 1) for name, ms in imports},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"start-up, median of {args.runs} runs (ms)          median   x python")
        for name, ms in results.items():
            print(f"  {name:<40} {ms:7.1f}   {ms / baseline:6.2f}")
        verdict = "meets" if report["status_meets_goal"] else "MISSES"
        print(f"  hub status {verdict} the {GOAL_MS:.0f} ms goal")
        print("what the hub's modules import for `hub status` (cumulative ms):")
        for name, ms in imports:
            print(f"  {name:<40} {ms:7.1f}")
    return report


if __name__ == "__main__":
    main()
