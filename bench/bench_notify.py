"""What notifications (issue 37) cost the pipeline, and that a hanging notifier delays no phase.

    .venv/bin/python bench/bench_notify.py [--runs N] [--json]

1. The hub's own cost per transition: `Run.record` of a halt (the transition saved, transition.ndjson,
   STATUS.md, and with `notify:` the event's claim and the detached notifier's start), notify off
   against on; medians over `--runs` halts of one task (each resumed, untimed, before the next).
2. A phase beside a notifier that hangs 60 s: `hub next` as cron runs it (a subprocess, its output
   captured, so it ends only when its stdout and stderr close), each time sending a halt a killed run
   left unsent, notify off against a command that sleeps 60 s (with a clock of 120 s: nothing ends it
   before the 60 s are up). Medians of the command's wall time.

The notifiers started here are ended when the bench ends (their pids, which the hanging command writes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo  # noqa: E402  (bench/, beside this script)

from hub.core.config import default_yaml, load_config  # noqa: E402
from hub.core.log import configure  # noqa: E402
from hub.phases.context import Context  # noqa: E402
from hub.phases.run import Run  # noqa: E402
from hub.phases.setup import create, setup_task  # noqa: E402
from hub.state import handoff, store  # noqa: E402
from hub.state.machine import HALT_EVENT, PENDING_IMPLEMENTER, RESUME_EVENT  # noqa: E402

APP_PY = 'def greet(name):\n    return "hello " + name\n'
HANG = '#!/bin/sh\necho $PPID $$ >> "{pids}"\nexec sleep 60\n'
SCRUBBED = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def make(folder: Path, notify: bool) -> tuple[Path, Context]:
    """A repository with one task set up; with `notify`, a notifier command that hangs 60 s."""
    yaml = default_yaml("bench")
    if notify:
        script = folder / "hang.sh"
        script.write_text(HANG.format(pids=folder / "pids"), encoding="utf-8")
        script.chmod(0o755)
        yaml += f"\nnotify:\n  command: [{script}]\n  timeout: 120\n"
    repo = commit_repo(folder / "repo", {"hub.yaml": yaml, "src/app.py": APP_PY, "README.md": "# b\n"})
    then = time.time() - 60  # as a user's hub.yaml is: not parsed again by every command
    os.utime(repo / "hub.yaml", (then, then))
    ctx = Context(load_config(repo, env={}))
    task_id = create(
        ctx, {"title": "Greet", "requirements": ["say hello"], "target_file": "src/app.py"}
    ).task_id
    ctx = ctx.for_task(str(task_id))
    setup_task(ctx)
    return repo, ctx


def resume(ctx: Context) -> None:
    contract = store.load(ctx.handoff.contract)
    handoff.record(ctx.handoff, contract, RESUME_EVENT, ctx.clock(), "bench", PENDING_IMPLEMENTER)


def started(folder: Path) -> int:
    """How many notifiers have reached their hanging command (each wrote a line)."""
    pids = folder / "pids"
    return len(pids.read_text(encoding="utf-8").splitlines()) if pids.exists() else 0


def settled(folder: Path, notify: bool, count: int) -> None:
    """Wait (bounded) until the notifier just started hangs in its command: its own start-up (~0.15 s of
    CPU) then no longer competes with the next timed transition on this machine's two cores, as it does
    not when transitions are seconds apart."""
    deadline = time.monotonic() + 60
    while notify and started(folder) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def record_costs(ctx: Context, runs: int, folder: Path, notify: bool) -> list[float]:
    """Seconds of each `Run.record` of a halt (the task resumed, untimed, after each)."""
    seconds = []
    for number in range(runs):
        run = Run(ctx, store.load(ctx.handoff.contract), "bench")
        start = time.perf_counter()
        run.record(HALT_EVENT, "bench: a halt")
        seconds.append(time.perf_counter() - start)
        resume(ctx)
        settled(folder, notify, number + 1)
    return seconds


def next_walls(repo: Path, ctx: Context, runs: int, folder: Path, notify: bool) -> list[float]:
    """Wall seconds of `hub next` sending a halt left unsent (recorded without `Run.record`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED}
    env["HUB_LOG_FORMAT"] = "json"
    walls = []
    before = started(folder)
    for number in range(runs):
        contract = store.load(ctx.handoff.contract)
        handoff.record(ctx.handoff, contract, HALT_EVENT, ctx.clock(), "bench: a halt")
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hub", "next"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - start)
        assert done.returncode == 4, done.stderr  # halted: exit 4
        resume(ctx)
        settled(folder, notify, before + number + 1)
    return walls


def end_notifiers(folders: list[Path], expected: int) -> int:
    """End the notifiers this bench started and their hanging commands: each command wrote its parent's
    pid (the notifier, a session of its own) and its own (a session of its own too). Waits, bounded, for
    the last notifiers to get that far."""
    deadline = time.monotonic() + 60
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [
            line for f in folders if (f / "pids").exists() for line in (f / "pids").read_text().splitlines()
        ]
        if len(lines) >= expected:
            break
        time.sleep(0.2)
    ended = 0
    for line in lines:
        for pid in (int(p) for p in line.split()):  # the notifier first: it would retry its command
            try:
                os.killpg(pid, signal.SIGKILL)
                ended += 1
            except ProcessLookupError:
                pass
    return ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure("json", "WARNING")  # the phases' log lines on stderr, not amid the figures
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        folders = []
        try:
            for notify in (False, True):
                folder = Path(tmp) / ("on" if notify else "off")
                folder.mkdir()
                folders.append(folder)
                repo, ctx = make(folder, notify)
                label = "on" if notify else "off"
                results[f"record_{label}_ms"] = (
                    statistics.median(record_costs(ctx, args.runs, folder, notify)) * 1000
                )
                results[f"next_{label}_s"] = statistics.median(
                    next_walls(repo, ctx, max(3, args.runs // 3), folder, notify)
                )
            pids = folders[1] / "pids"
            results["hanging_notifiers_during_the_runs"] = (
                len(pids.read_text().splitlines()) if pids.exists() else 0
            )
        finally:
            results["processes_ended"] = end_notifiers(folders, args.runs + max(3, args.runs // 3))
    results["record_ratio"] = results["record_on_ms"] / results["record_off_ms"]
    results["next_ratio"] = results["next_on_s"] / results["next_off_s"]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"Run.record of a halt, median of {args.runs}:")
    print(f"  notify off {results['record_off_ms']:.1f} ms, on {results['record_on_ms']:.1f} ms")
    print(f"  ratio {results['record_ratio']:.2f}")
    print("hub next sending a halt, its notifier hanging 60 s (wall time, as cron waits for it):")
    print(f"  notify off {results['next_off_s']:.2f} s, on {results['next_on_s']:.2f} s")
    print(
        f"  ratio {results['next_ratio']:.2f}; notifiers hanging meanwhile: {results['hanging_notifiers_during_the_runs']}"
    )


if __name__ == "__main__":
    main()
