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
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

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
    args = parser.parse_args(argv)
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
    print(
        f"  walk {summary['walk_seconds']} s, venv {summary['env_seconds']} s, per task median "
        f"{summary['task_seconds_median']} s (max {summary['task_seconds_max']} s, {summary['task_seconds_total']} s in all)"
    )
    for t in tasks:
        print(f"  {t.id}: {', '.join(t.source_files)}; {len(t.fail_to_pass)} failing -> passing")


if __name__ == "__main__":
    main(sys.argv[1:])
