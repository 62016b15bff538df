"""bench_real_model.py's history side (issue 34): a repository's own commits through the hub in three
ways and through aider, with the same model and server, side by side.

The hub runs `hub eval --history` once per way: edit mode with the files named (`--name-files`), edit
mode with the files hidden (the repository map finds them), agent mode with the files hidden. aider
0.86.2 gets the same tasks (the same walk, the same verified bases): a checkout of the base, the commit
message as its only message, no file added, its repository map on (`--map-tokens 1024`), the task's
acceptance command as `--test-cmd` with `--auto-test`. Solved, for aider: the acceptance command passes
on what it left, with the test files put back as the base has them (the hub forbids them to its model;
aider is held to the same tests). Files found / needed as the hub's report counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hub.evals import history
from hub.evals.history import HistoryTask
from hub.evals.history_env import make_env, venv_python

AIDER_TIMEOUT = 3600
# The hub's ways, by the name the report gives them: `hub eval` options of each.
WAYS: dict[str, list[str]] = {
    "edit-named": ["--mode", "edit", "--name-files"],
    "edit-hidden": ["--mode", "edit"],
    "agent-hidden": ["--mode", "agent"],
}


def walk_options(args: argparse.Namespace) -> list[str]:
    options: list[str] = []
    if args.since:
        options += ["--since", args.since]
    if args.limit:
        options += ["--limit", str(args.limit)]
    for path in args.paths:
        options += ["--paths", path]
    return options


def run_hub_way(repo: Path, way: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """`hub eval --history repo` in one way; its JSON report with the wall time."""
    workdir = out / way / repo.name
    command = [sys.executable, "-m", "hub", "eval", "--history", str(repo), "--config", str(args.hub_config)]
    command += ["--workdir", str(workdir), "--json", *WAYS[way], *walk_options(args)]
    if args.python:
        command += ["--python", args.python]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    (out / f"{way}-{repo.name}.stderr").write_text(done.stderr, encoding="utf-8")
    if done.returncode:
        raise SystemExit(f"hub eval --history {repo} ({way}) exited {done.returncode}: {done.stderr[-3000:]}")
    doc: dict[str, Any] = json.loads(done.stdout)
    doc["wall_seconds"] = round(time.monotonic() - started, 1)
    return doc


def history_tasks(repo: Path, args: argparse.Namespace, workdir: Path) -> tuple[list[HistoryTask], Path, str]:
    """The tasks `hub eval --history` makes of `repo` with the same options, in a clone of aider's own:
    (tasks, the clone, the interpreter the tests run under)."""
    clone = workdir / "repo"
    clone.parent.mkdir(parents=True, exist_ok=True)
    history.git(clone.parent, "clone", "-q", "--no-hardlinks", str(repo.resolve()), str(clone))
    history.git(clone, "config", "user.name", "bench aider")
    history.git(clone, "config", "user.email", "bench-aider@localhost")
    walk = history.find_candidates(
        clone, since=args.since, limit=args.limit, paths=tuple(args.paths), max_source_files=3
    )
    python = args.python or str(venv_python(make_env(clone, workdir)))
    tasks = []
    for candidate in walk.candidates:
        made = history.prepare_task(clone, candidate, workdir / "prepare", python=python)
        if isinstance(made, HistoryTask):
            tasks.append(made)
    return tasks, clone, python


def aider_task(task: HistoryTask, clone: Path, args: argparse.Namespace, meta: Path) -> dict[str, Any]:
    tree = clone.parent / "trees" / task.sha[:10]
    history.git(clone, "worktree", "add", "-q", "--detach", "-f", str(tree), task.base)
    try:
        command = [
            args.aider,
            "--model", f"openai/{args.model}",
            "--openai-api-base", args.base_url,
            "--model-metadata-file", str(meta),
            "--map-tokens", "1024",
            "--yes-always", "--auto-test", "--test-cmd", task.acceptance_command,
            "--no-check-update", "--no-analytics", "--no-show-model-warnings", "--no-pretty",
            "--no-gitignore",
            "--message", task.requirement,
        ]  # fmt: skip
        if args.aider_edit_format:
            command += ["--edit-format", args.aider_edit_format]
        env = {**os.environ, "OPENAI_API_KEY": "local", "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, cwd=tree, env=env, capture_output=True, text=True, timeout=AIDER_TIMEOUT
            )
            exit_code: int | None = done.returncode
            log = done.stdout[-4000:]
        except subprocess.TimeoutExpired:
            exit_code, log = None, "timed out"
        seconds = time.monotonic() - started
        changed = history.git(tree, "diff", "--name-only", "--no-renames", task.base).split()
        changed += history.git(tree, "ls-files", "--others", "--exclude-standard").split()
        found, needed = task.files_found(changed)
        # The tests are the specification: put them back as the base has them before judging.
        history.git(tree, "checkout", task.base, "--", *task.tests)
        tests = subprocess.run(
            task.acceptance_command, shell=True, cwd=tree, capture_output=True, timeout=600, env=env
        )
        return {
            "name": task.id,
            "solved": tests.returncode == 0,
            "exit_code": exit_code,
            "seconds": round(seconds, 1),
            "files_found": found,
            "files_needed": needed,
            "log_tail": log[-1500:],
        }
    finally:
        history.remove_worktree(clone, tree)


def run_aider(repo: Path, args: argparse.Namespace, out: Path, meta: Path) -> list[dict[str, Any]]:
    workdir = out / "aider" / repo.name
    if workdir.exists():
        shutil.rmtree(workdir)
    tasks, clone, _ = history_tasks(repo, args, workdir)
    results = []
    for task in tasks:
        results.append(aider_task(task, clone, args, meta))
        r = results[-1]
        print(f"aider {task.id}: {'solved' if r['solved'] else 'failed'} in {r['seconds']} s", flush=True)
    return results


def cell(task: dict[str, Any] | None) -> str:
    if task is None:
        return "-"
    if task.get("solved"):
        result = "solved"
    elif task.get("halted"):
        result = f"halted: {task.get('halt_trigger')}" + (" (tests pass)" if task.get("tests_pass") else "")
    else:
        result = str(task.get("status", "failed"))
    if task.get("files_needed"):
        result += f" {task.get('files_found')}/{task['files_needed']}"
    return result


def summary(name: str, tasks: list[dict[str, Any]], hub: bool) -> str:
    solved = sum(bool(t.get("solved")) for t in tasks)
    found = sum(int(t.get("files_found") or 0) for t in tasks)
    needed = sum(int(t.get("files_needed") or 0) for t in tasks if t.get("files_needed") is not None)
    line = f"- {name}: {solved} of {len(tasks)} solved; files found {found} of {needed}"
    if hub:
        halted = sum(bool(t.get("halted")) for t in tasks)
        passing = sum(bool(t.get("false_halt")) for t in tasks)
        wrong = sum(t.get("status") == "merged" and not t.get("tests_pass") for t in tasks)
        stalls = sum(int(t.get("stalls") or 0) for t in tasks)
        model = round(sum(float(t.get("model_seconds") or 0) for t in tasks), 1)
        own = round(sum(float(t.get("hub_seconds") or 0) for t in tasks), 1)
        line += (
            f"; halted {halted} (with passing tests {passing}), merged with failing tests {wrong}, "
            f"{stalls} stalls; model {model} s, hub {own} s"
        )
    else:
        line += f"; wall {round(sum(float(t.get('seconds') or 0) for t in tasks), 1)} s"
    return line


def markdown(results: dict[str, list[dict[str, Any]]], model: str) -> str:
    """One row per task, one column per way, and a line of totals per way."""
    names: list[str] = []
    by_way: dict[str, dict[str, dict[str, Any]]] = {}
    for way, tasks in results.items():
        by_way[way] = {t["name"]: t for t in tasks}
        names += [t["name"] for t in tasks if t["name"] not in names]
    ways = list(results)
    lines = [f"# hub vs aider on repositories' own commits, {model}, same server", ""]
    lines += [summary(way, results[way], hub=way != "aider") for way in ways]
    lines += ["", "| task | " + " | ".join(ways) + " |", "| --- |" + " --- |" * len(ways)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(cell(by_way[w].get(name)) for w in ways) + " |")
    return "\n".join(lines) + "\n"


def main_history(args: argparse.Namespace, meta: Path) -> None:
    """Each way over every `--history` repository; results kept per way and repository in --out, so a
    run cut short (or run one way at a time with --ways) completes the table from the files already
    there."""
    for repo in args.history:
        for way in args.ways:
            file = args.out / f"{way}-{repo.name}.json"
            if file.exists():
                continue
            if way == "aider":
                doc: Any = run_aider(repo, args, args.out, meta)
            else:
                doc = run_hub_way(repo, way, args, args.out)
            file.write_text(json.dumps(doc, indent=2), encoding="utf-8")
            print(f"{way} {repo.name}: written {file}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    for way in [*WAYS, "aider"]:
        for repo in args.history:
            file = args.out / f"{way}-{repo.name}.json"
            if file.exists():
                doc = json.loads(file.read_text(encoding="utf-8"))
                tasks = doc if way == "aider" else doc["tasks"]
                results.setdefault(way, []).extend({**t, "name": f"{repo.name} {t['name']}"} for t in tasks)
    report = markdown(results, args.model)
    (args.out / "report-history.md").write_text(report, encoding="utf-8")
    print(report)
