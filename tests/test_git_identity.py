"""Issue 36's trap, end to end: on a machine where git has no identity (a new home folder, no system
config), a task goes from `hub new` to merged through the CLI, its checkpoint and its merge made as the
hub, and `hub doctor` says which identity the hub's commits carry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hub.testing import FakeOllama

IMPL, REV = "impl-model", "rev-model"
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
HUB_YAML = f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
  local_reviewer: {{model: {REV}, backend: ollama, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
models:
  {IMPL}: {{num_ctx: 8192}}
sandbox: off
"""
UNSET = ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        server.add_model(IMPL)
        server.add_model(REV)
        yield server


def homeless_env(home: Path, fake: FakeOllama) -> dict[str, str]:
    """A shell in a new home folder: no system git config, a global one without an identity that
    forbids git to guess one (so the trap is the same whatever the machine's host name)."""
    home.mkdir()
    (home / "gitconfig").write_text("[user]\n\tuseConfigOnly = true\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "GIT_")) and k not in UNSET}
    return env | {
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        "OLLAMA_HOST": fake.url,
        "HUB_LOG_FORMAT": "json",
    }


def test_a_task_merges_on_a_machine_without_a_git_identity(
    git_repo: Path, tmp_path: Path, fake: FakeOllama, run_git: Callable[..., str]
) -> None:
    (git_repo / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
    run_git(git_repo, "commit", "-q", "-am", "configure the hub")
    run_git(git_repo, "config", "--unset", "user.name")
    run_git(git_repo, "config", "--unset", "user.email")
    env = homeless_env(tmp_path / "home", fake)
    fake.script(IMPL, f"src/app.py\n```python\n{GREET_FIXED}```\n")
    fake.script(REV, '{"passed": true, "critical": false, "issues": []}')

    def hub(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "hub", *args],
            cwd=git_repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"hub {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
        return done

    refused = subprocess.run(
        ["git", "commit", "--allow-empty", "-qm", "x"], cwd=git_repo, env=env, check=False
    )
    assert refused.returncode != 0  # the trap is set: git itself refuses to commit here
    doctor = subprocess.run(
        [sys.executable, "-m", "hub", "doctor"],
        cwd=git_repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    hub(
        "new",
        "--title",
        "Greet politely",
        "--requirement",
        "greet() says 'hello, NAME'",
        "--target",
        "src/app.py",
    )
    hub("setup-task")
    hub("run-implementer")
    hub("run-local-review")
    (task,) = (git_repo / "_handoff" / "tasks").iterdir()
    report = {"verdict": "PASS", "summary": "read the diff", "blocking_issues": [], "suggestions": []}
    (task / "JUDGE_REPORT.json").write_text(json.dumps(report), encoding="utf-8")
    hub("report-judge")
    merged = hub("finalize-task", "--json")

    assert json.loads(merged.stdout)["to"] == "merged"
    assert run_git(git_repo, "show", "main:src/app.py") + "\n" == GREET_FIXED
    authors = run_git(git_repo, "log", "-2", "--format=%an <%ae>", "main").splitlines()
    assert authors == ["agent-hub <agent-hub@localhost>"] * 2  # the merge, then the task's checkpoint
    assert "git identity: user.name and user.email are not set" in doctor.stdout
