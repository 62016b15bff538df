"""How many tasks a repository's own history gives `hub eval --history` (issue 34), and what it costs.

    .venv/bin/python bench/bench_history.py REPO [--workdir DIR] [--limit N] [--since DATE]
        [--max-source-files N] [--test-command CMD] [--json]

Walks REPO's first-parent, non-merge history (hub.evals.history.find_candidates), makes the eval's venv
once (hub.evals.history_env.make_env: the registry is needed here, and only here), then verifies each
candidate (prepare_task: fails on the parent with its tests, passes on the commit). Prints the commits
walked, the candidates, the verified tasks, the reasons for the rest, and the seconds for the venv and
per task. Base branches `hub-eval/base/<sha>` are left in REPO: run it on a clone. Not in run_all: it
needs the network and minutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hub.core.log import configure
from hub.evals.history import HistoryTask, Skipped, find_candidates, prepare_task
from hub.evals.history_env import default_test_command, make_env, venv_python


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument(
        "--workdir", type=Path, help="where the venv, worktrees and reports go (default: a temp dir)"
    )
    parser.add_argument("--limit", type=int)
    parser.add_argument("--since")
    parser.add_argument("--max-source-files", type=int, default=3)
    parser.add_argument("--test-command")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--sandbox-check",
        action="store_true",
        help="run each task's acceptance command at its commit in the hub's sandbox (bwrap), the venv read-only",
    )
    parser.add_argument("--verbose", action="store_true", help="the library's debug lines on stderr")
    args = parser.parse_args(argv)
    # The library's lines go to stderr, so that --json's document is stdout's only content.
    configure(level="DEBUG" if args.verbose else "WARNING")
    repo = args.repo.resolve()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="hub-history-"))).resolve()

    started = time.monotonic()
    walk = find_candidates(repo, since=args.since, limit=args.limit, max_source_files=args.max_source_files)
    walk_seconds = time.monotonic() - started
    started = time.monotonic()
    venv = make_env(repo, workdir)
    env_seconds = time.monotonic() - started
    command = args.test_command or default_test_command(str(venv_python(venv)), repo)

    tasks: list[HistoryTask] = []
    skipped: list[Skipped] = []
    seconds: list[float] = []
    for candidate in walk.candidates:
        clock = time.monotonic()
        result = prepare_task(repo, candidate, workdir, test_command=command)
        seconds.append(time.monotonic() - clock)
        if isinstance(result, HistoryTask):
            tasks.append(result)
        else:
            skipped.append(result)
        what = result.id if isinstance(result, HistoryTask) else f"skipped: {result.reason.value}"
        print(
            f"{candidate.sha[:10]} {candidate.subject[:60]!r}: {what} ({seconds[-1]:.1f} s)", file=sys.stderr
        )

    sandboxed = [in_sandbox(repo, task, venv, workdir) for task in tasks] if args.sandbox_check else []
    walk_reasons = Counter(s.reason.value for s in walk.skipped)
    task_reasons = Counter(s.reason.value for s in skipped)
    summary = {
        "repo": repo.name,
        "walked": walk.walked,
        "candidates": len(walk.candidates),
        "tasks": len(tasks),
        "not_candidates": dict(walk_reasons.most_common()),
        "not_tasks": dict(task_reasons.most_common()),
        "walk_seconds": round(walk_seconds, 1),
        "env_seconds": round(env_seconds, 1),
        "task_seconds_median": round(statistics.median(seconds), 1) if seconds else None,
        "task_seconds_max": round(max(seconds), 1) if seconds else None,
        "task_seconds_total": round(sum(seconds), 1),
        "skipped": [
            {
                "sha": s.sha[:10],
                "subject": s.subject[:80],
                "reason": s.reason.value,
                "detail": last_line(s.detail),
            }
            for s in skipped
        ],
        "sandbox_passes": sum(sandboxed) if args.sandbox_check else None,
        "tasks_made": [
            {"id": t.id, "sources": list(t.source_files), "fail_to_pass": len(t.fail_to_pass)} for t in tasks
        ],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{repo.name}: {walk.walked} commits walked, {len(walk.candidates)} candidates, {len(tasks)} tasks")
    print(f"  not candidates: {dict(walk_reasons.most_common())}")
    print(f"  candidates that are no task: {dict(task_reasons.most_common())}")
    if args.sandbox_check:
        print(f"  acceptance passing at the commit in the sandbox: {sum(sandboxed)} of {len(tasks)}")
    print(
        f"  walk {summary['walk_seconds']} s, venv {summary['env_seconds']} s, per task median "
        f"{summary['task_seconds_median']} s (max {summary['task_seconds_max']} s, {summary['task_seconds_total']} s in all)"
    )
    for t in tasks:
        print(f"  {t.id}: {', '.join(t.source_files)}; {len(t.fail_to_pass)} failing -> passing")


def in_sandbox(repo: Path, task: HistoryTask, venv: Path, workdir: Path) -> bool:
    """Whether the task's acceptance command passes at its commit (the known solution) in the sandbox
    the hub runs acceptance commands in, with the eval's venv as a read-only path and no network."""
    from hub.core.sandbox_config import SandboxMode, SandboxSettings
    from hub.safety.sandbox import prepare

    tree = workdir / "sandbox-check"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", "-f", str(tree), task.sha], cwd=repo, check=True
    )
    try:
        jail = prepare(
            SandboxSettings(mode=SandboxMode.REQUIRED, read_paths=(venv,)), tree, protected=[tree / ".git"]
        )
        done = subprocess.run(
            jail.argv(task.acceptance_command, tree),
            env=dict(jail.env),
            preexec_fn=jail.preexec,
            capture_output=True,
            timeout=600,
        )
        if done.returncode:
            print(f"{task.id}: fails in the sandbox: {done.stdout[-600:]!r}", file=sys.stderr)
        return done.returncode == 0
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, check=False)


def last_line(text: str) -> str:
    """The last non-empty line of a run's output: pytest's summary or the error."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


if __name__ == "__main__":
    main(sys.argv[1:])
