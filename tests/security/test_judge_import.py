"""Issue 38, point 10: a module the change commits does not run inside a judge command. The judge runs
as the user, in a fresh checkout of the reviewed commit; neither its working folder nor a relative
PATH entry may hand the change's code to the judge's interpreter or shell.

The checkout lies outside /tmp and HOME holds planted secrets (conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.core.config import CONFIG_FILE, default_yaml, load_config
from hub.phases.context import Context
from hub.phases.judge_runner import judge_env
from hub.state.contract import now_utc
from hub.state.store import load

REPORT = {"verdict": "PASS", "summary": "ok", "blocking_issues": [], "suggestions": []}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def repo(outside_tmp: Path) -> Path:
    path = outside_tmp / "proj"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    with (path / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write("[user]\n\tname = Hub Test\n\temail = hub-test@example.invalid\n")
    for rel, text in {"src/app.py": "X = 1\n", CONFIG_FILE: default_yaml("demo")}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text, encoding="utf-8")
    (path / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def test_a_module_or_program_the_change_commits_does_not_run_in_the_judge_command(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.phases.judge import enter_judge_review
    from hub.phases.judge_runner import run_judge
    from hub.phases.run import Run
    from hub.phases.setup import create, setup_task

    ran = repo.parent / "change-ran.txt"
    # A Python judge as a user writes one, in the judged folder, and a PATH with `.` on it.
    judge = f"python3 -c 'import json; print(json.dumps({json.dumps(REPORT)}))'"
    (repo / CONFIG_FILE).write_text(
        f"project: demo\njudge:\n  command: {json.dumps(judge)}\n", encoding="utf-8"
    )
    git(repo, "commit", "-qam", "a judge command")
    monkeypatch.setenv("PATH", f".{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ctx = Context(load_config(repo), clock=lambda: now_utc().replace(microsecond=0))
    create(ctx, {"title": "t", "requirements": ["r"], "allowed_paths": ["."]})
    setup_task(ctx)
    worktree = Path(load(ctx.handoff.contract)["git"]["worktree"])
    (worktree / "json.py").write_text(f"open({str(ran)!r}, 'a').write('json.py\\n')\n", encoding="utf-8")
    (worktree / "python3").write_text(f"#!/bin/sh\necho python3 >> {ran}\n", encoding="utf-8")
    (worktree / "python3").chmod(0o755)
    run = Run(ctx, load(ctx.handoff.contract), "test")
    run.record("lock_acquired")
    run.record("code_written")
    run.checkpoint("code_written")
    enter_judge_review(run, "local_pass")
    assert "json.py" in git(
        repo, "show", "--name-only", "--format=", load(ctx.handoff.contract)["git"]["task_branch"]
    )

    outcome = run_judge(ctx)

    assert outcome.to_state == "review_complete", outcome.message
    assert not ran.exists(), ran.read_text(encoding="utf-8")


def test_the_judge_environment_drops_relative_search_paths_and_keeps_the_rest() -> None:
    env = judge_env({"PATH": ".:/usr/bin::bin", "PYTHONPATH": ".", "NODE_PATH": "/opt/n:lib", "KEEP": "1"})

    assert env["PATH"] == "/usr/bin" and "PYTHONPATH" not in env and env["NODE_PATH"] == "/opt/n"
    assert env["PYTHONSAFEPATH"] == "1" and env["KEEP"] == "1"
