"""Issue 38, point 2: nothing outside the sandbox opens a path in a task's worktree through a link the
task's code made. The tools' reads, the review's, the commit and the merge see a link as a link and
refuse it; a change never holds one the task does not name, and the model is told why.

The checkout lies outside /tmp and HOME holds planted secrets (conftest.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub.agent.builtin import ToolRefused, Workspace
from hub.core.config import CONFIG_FILE, load_config
from hub.core.files import read_capped
from hub.edits.policy import Policy
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.repo import untrusted
from hub.repo.gitops import open_repo
from hub.state.contract import now_utc
from hub.testing import FakeOllama

IMPL = "impl-model"
APP_PY = "def greet(name):\n    return 'hello ' + name\n"
HUB_YAML = f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama, timeouts: {{first_token: 20, stall: 20, total: 60}}}}
  local_reviewer: {{model: {IMPL}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 8192}}
acceptance_timeout_seconds: 30
"""


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
    for rel, text in {"src/app.py": APP_PY, CONFIG_FILE: HUB_YAML}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text, encoding="utf-8")
    (path / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def attempt(repo: Path, answer: str, **fields: Any) -> tuple[Outcome, Context]:
    from hub.phases.implement import run_implementer
    from hub.phases.setup import create, setup_task

    with FakeOllama() as fake:
        fake.add_model(IMPL)
        fake.script(IMPL, answer)
        ctx = Context(
            load_config(repo, env={"OLLAMA_HOST": fake.url}), clock=lambda: now_utc().replace(microsecond=0)
        )
        create(ctx, {"title": "t", "requirements": ["r"], **fields})
        setup_task(ctx)
        return run_implementer(ctx), ctx


def whole(path: str, text: str) -> str:
    return f"{path}\n```python\n{text}```\n"


def linked_folder(ground: Any) -> Path:
    """The checkout's tracked `src/` replaced by a link to a home folder holding an `app.py` of secrets
    (git's index still names `src/app.py`)."""
    leak = ground.home / ".leak"
    leak.mkdir()
    (leak / "app.py").write_text(
        (ground.home / ".bash_history").read_text(encoding="utf-8"), encoding="utf-8"
    )
    src = ground.checkout / "src"
    (src / "app.py").unlink()
    src.rmdir()
    src.symlink_to(leak)
    return ground.checkout


def test_agent_tools_never_read_through_a_linked_folder(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    root = linked_folder(ground)
    tools = Workspace(root, Policy(root, ("src",)))

    with pytest.raises(ToolRefused, match="link"):
        tools.read_file({"path": "src/app.py"})
    with pytest.raises(ToolRefused):
        tools.outline({"path": "src/app.py"})
    found = tools.search({"text": "PLANTED"}) + tools.search({"text": "DEPLOY"})

    # The tracked settings.cfg is the task's own file (the loop redacts it); the linked history is not.
    assert "PLANTED-history-Vx93nQ" not in found and "DEPLOY_PASSWORD" not in found, found
    assert read_capped(root / "src" / "app.py", root=root) is None
    assert read_capped(root / "settings.cfg", root=root) is not None  # a plain file still reads


def test_no_component_of_a_path_is_followed_below_the_root(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("ok", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f").write_text("secret", encoding="utf-8")
    root = tmp_path / "a"
    os.symlink(tmp_path / "outside", root / "l")
    os.symlink("b", root / "inner")  # a link that stays inside is still a link

    assert read_capped(root / "b" / "f", root=root) == (b"ok", False)
    assert read_capped(root / "l" / "f", root=root) is None
    assert read_capped(root / "inner" / "f", root=root) is None
    assert read_capped(tmp_path / "outside" / "f", root=root) is None


def test_a_link_in_the_worktree_is_taken_out_before_a_commit_and_the_tracked_file_put_back(
    ground: Any,
) -> None:
    checkout = ground.checkout
    (checkout / "src" / "app.py").unlink()
    (checkout / "src" / "app.py").symlink_to(ground.home / ".ssh" / "id_rsa")
    (checkout / "new.py").symlink_to(ground.home / ".netrc")
    (checkout / "ok.lnk").symlink_to("settings.cfg")
    repo_ = open_repo(checkout)

    with pytest.raises(untrusted.LinkRefused) as refused:
        untrusted.refuse_links(repo_, ["ok.lnk"])

    assert refused.value.paths == ["new.py", "src/app.py"]
    assert not (checkout / "new.py").is_symlink() and not (checkout / "new.py").exists()
    assert (checkout / "src" / "app.py").read_text(encoding="utf-8").startswith("def greet")
    assert (checkout / "ok.lnk").is_symlink()  # named exactly: the task may add it


def test_a_link_the_acceptance_command_makes_is_a_stall_told_to_the_model_and_never_committed(
    repo: Path,
) -> None:
    # The model's edit is fine; its code, run by the acceptance command, turns the file into a link.
    command = f"rm src/app.py && ln -s {Path.home()}/.ssh/id_rsa src/app.py"

    outcome, ctx = attempt(
        repo,
        whole("src/app.py", APP_PY.replace("hello ", "hello, ")),
        allowed_paths=["src/app.py"],
        acceptance_commands=[command],
    )

    assert outcome.to_state in ("pending_implementer", "timeout_implementer"), outcome.message
    assert "links_refused" in outcome.message
    contract = subprocess.run(
        ["git", "log", "--all", "--format=%H"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    for commit in contract:
        tree = git(repo, "ls-tree", "-r", commit)
        assert "120000" not in tree, tree
    stalls = (ctx.handoff.contract).read_text(encoding="utf-8")
    assert "symbolic link" in stalls


def test_the_merge_refuses_a_commit_that_adds_a_link(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "task")
    (repo / "src" / "app.py").unlink()
    (repo / "src" / "app.py").symlink_to("/etc/hostname")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a link")
    git(repo, "checkout", "-q", "main")
    repo_ = open_repo(repo)

    assert untrusted.links_added(repo_, "main", "task", []) == ["src/app.py"]
    assert untrusted.links_added(repo_, "main", "task", ["src/app.py"]) == []
    assert untrusted.links_added(repo_, "main", "main", []) == []
