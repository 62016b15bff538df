"""What the sandbox adds to one acceptance command.

    .venv/bin/python bench/bench_sandbox.py [--runs N] [--json]

The same commands run N times each (default 20) through `run_command`, unsandboxed (`sandbox: off`) and
in bwrap (`sandbox: auto`), in a repository with the control files the hub protects: `true` (the fixed
cost alone) and a one-line Python program (a typical command's interpreter start). Medians, the
difference, and the ratio. The goal: under 50 ms added per command.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hub.phases.acceptance import run_command
from hub.safety.sandbox import SandboxMode, SandboxSettings, availability, prepare

GOAL_MS = 50.0
COMMANDS = {"true": "true", "python": f"{shlex.quote(sys.executable)} -c 'print(1)'"}


def median_ms(command: str, repo: Path, settings: SandboxSettings, runs: int) -> float:
    protected = [repo / ".git", repo / "_handoff", repo / "hub.yaml"]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        jail = prepare(settings, repo, protected)
        result = run_command(command, repo, 60, jail)
        times.append((time.perf_counter() - started) * 1000)
        if not result.ok:
            raise SystemExit(f"{command} failed: {result.stderr}")
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bwrap, why = availability()
    if bwrap is None:
        print(f"no sandbox on this machine ({why}): nothing to measure")
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        for name in (".git", "_handoff"):
            (repo / name).mkdir(parents=True)
        (repo / "hub.yaml").write_text("project: bench\n", encoding="utf-8")
        for label, command in COMMANDS.items():
            off = median_ms(command, repo, SandboxSettings(SandboxMode.OFF), args.runs)
            on = median_ms(command, repo, SandboxSettings(SandboxMode.AUTO), args.runs)
            rows.append({"command": label, "off_ms": off, "sandboxed_ms": on, "added_ms": on - off})
    if args.json:
        print(json.dumps({"goal_ms": GOAL_MS, "runs": args.runs, "rows": rows}, indent=2))
        return 0
    print(
        f"{'command':<8} {'unsandboxed':>12} {'sandboxed':>10} {'added':>8} {'ratio':>6}   (median of {args.runs})"
    )
    for row in rows:
        ratio = row["sandboxed_ms"] / row["off_ms"] if row["off_ms"] else float("nan")
        print(
            f"{row['command']:<8} {row['off_ms']:>10.1f}ms {row['sandboxed_ms']:>8.1f}ms "
            f"{row['added_ms']:>6.1f}ms {ratio:>6.2f}"
        )
    worst = max(row["added_ms"] for row in rows)
    print(
        f"added per command: {worst:.1f} ms (goal < {GOAL_MS:.0f} ms): {'met' if worst < GOAL_MS else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
