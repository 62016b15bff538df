"""The spine's own overhead, no model: `setup-task`, `report-judge` and `finalize-task` on a repository
of 2,000 files.

    .venv/bin/python bench/bench_phases.py [--runs N] [--files N] [--json]

Each run is one task in the same repository: `hub new`, then `hub setup-task` (timed), a change of one
file committed on the task branch the way the implementer phase does it (not timed), a PASS written
into JUDGE_REPORT.json, `hub report-judge` (timed) and `hub finalize-task` (timed), each a subprocess of
the venv's `hub` script as cron would run it. The same three phases are then timed in process on
fresh tasks, which leaves out interpreter start-up and imports. Medians over the runs.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import git, init_repo  # noqa: E402  (bench/, beside this script)

from hub.core.config import load_config  # noqa: E402  (the checkout, not an installed copy)
from hub.core.log import configure  # noqa: E402
from hub.phases.context import Context  # noqa: E402
from hub.phases.finalize import finalize_task  # noqa: E402
from hub.phases.judge import enter_judge_review, report_judge  # noqa: E402
from hub.phases.run import Run  # noqa: E402
from hub.phases.setup import create, setup_task  # noqa: E402
from hub.state.store import load  # noqa: E402

HUB = Path(sys.executable).parent / "hub"
PHASES = ("setup-task", "report-judge", "finalize-task")


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env["HUB_LOG_FORMAT"] = "json"
    return env


def hub(repo: Path, *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(HUB), *args], cwd=repo, env=clean_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"hub {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def make_repo(folder: Path, files: int) -> Path:
    """`files` small Python modules in 50 packages, hub.yaml, one commit on main."""
    repo = init_repo(folder / "repo")
    for i in range(files - 1):
        path = repo / "src" / f"pkg{i % 50:02d}" / f"mod{i:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {i}."""\n\n\ndef f{i}(x):\n    return x + {i}\n', encoding="utf-8")
    subprocess.run([str(HUB), "init"], cwd=repo, check=True, capture_output=True, env=clean_env())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def implement(ctx: Context, target: str, n: int) -> None:
    """What run-implementer and run-local-review leave: one changed file committed, a review request."""
    run = Run(ctx, load(ctx.handoff.contract), "bench")
    run.record("lock_acquired")
    path = ctx.repo_root / target
    path.write_text(
        path.read_text(encoding="utf-8") + f"\n\ndef added_{n}():\n    return {n}\n", encoding="utf-8"
    )
    run.record("code_written")
    run.checkpoint("code_written")
    enter_judge_review(run, "local_pass")
    ctx.handoff.judge_report_json.write_text(json.dumps({"verdict": "PASS"}), encoding="utf-8")


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args(argv)
    configure("json", "WARNING")  # structlog unconfigured prints every level to stdout
    cli: dict[str, list[float]] = {phase: [] for phase in PHASES}
    inproc: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with tempfile.TemporaryDirectory(prefix="hub-bench-phases-") as tmp:
        started = time.perf_counter()
        repo = make_repo(Path(tmp), args.files)
        build_seconds = time.perf_counter() - started
        tracked = len(git(repo, "ls-files").splitlines())
        ctx = Context(load_config(repo, env={}))
        for n in range(args.runs):
            target = f"src/pkg{n % 50:02d}/mod{n:04d}.py"
            hub(repo, "new", "--title", f"cli run {n}", "--requirement", "add a function", "--target", target)
            cli["setup-task"].append(hub(repo, "setup-task"))
            implement(ctx, target, n)
            cli["report-judge"].append(hub(repo, "report-judge"))
            cli["finalize-task"].append(hub(repo, "finalize-task"))
        for n in range(args.runs, 2 * args.runs):
            target = f"src/pkg{n % 50:02d}/mod{n:04d}.py"
            create(
                ctx,
                {"title": f"in-process run {n}", "requirements": ["add a function"], "target_file": target},
            )
            inproc["setup-task"].append(timed(lambda: setup_task(ctx)))
            implement(ctx, target, n)
            inproc["report-judge"].append(timed(lambda: report_judge(ctx)))
            inproc["finalize-task"].append(timed(lambda: finalize_task(ctx)))
        merges = len(git(repo, "log", "--merges", "--format=%H", "main").splitlines())
    report = {
        "files": tracked,
        "runs": args.runs,
        "repo_build_seconds": round(build_seconds, 2),
        "merges_on_main": merges,
        "cli_median_ms": {p: round(statistics.median(v) * 1000, 1) for p, v in cli.items()},
        "in_process_median_ms": {p: round(statistics.median(v) * 1000, 1) for p, v in inproc.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"phase overhead, no model: {tracked} tracked files, median of {args.runs} runs (ms)")
        print(f"  {'phase':<16} {'hub CLI':>9} {'in process':>11}")
        for phase in PHASES:
            print(
                f"  {phase:<16} {report['cli_median_ms'][phase]:9.1f} {report['in_process_median_ms'][phase]:11.1f}"
            )
        print(f"  ({merges} --no-ff merges on main; building the repository took {build_seconds:.1f} s)")
    return report


if __name__ == "__main__":
    main()
