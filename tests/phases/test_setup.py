"""`hub init`, `hub new` and `hub setup-task` in process, on real repositories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.config import load_config
from hub.errors import DirtyWorkTree, GitError, WrongState
from hub.phases.context import Context
from hub.phases.setup import init, setup_task

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver


def test_init_creates_the_handoff_folder_a_default_config_and_excludes_the_folder(
    tmp_path: Path, run_git: Any
) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    ctx = Context(load_config(repo, env={}))
    outcome = init(ctx)
    assert (repo / "_handoff" / "README.md").is_file()
    assert "project: fresh" in (repo / "hub.yaml").read_text(encoding="utf-8")
    assert "/_handoff/" in (repo / ".git/info/exclude").read_text(encoding="utf-8").splitlines()
    assert "commit hub.yaml before `hub setup-task`" in outcome.message
    assert run_git(repo, "status", "--porcelain") == "?? hub.yaml"  # _handoff/ is invisible to git
    again = init(ctx)
    assert again.message == f"initialised {repo / '_handoff'}"


def test_new_writes_a_pending_contract_with_roles_from_config(task: TaskDriver, ctx: Context) -> None:
    (task.repo / "src" / "util.py").write_text("X = 1\n", encoding="utf-8")
    task_id = task.new(title="Greet politely", source_files=["src/util.py"])
    contract = task.contract()
    assert contract["task_id"] == task_id
    assert task_id.startswith("demo-") and task_id.endswith("-greet-politely")
    assert contract["status"] == "pending_implementer"
    assert contract["roles"]["implementer"] == ctx.config.role("implementer").model
    assert contract["constraints"]["allowed_paths"] == ["src/app.py", "src/util.py"]
    assert contract["limits"]["max_changed_files"] == ctx.config.max_changed_files


def test_new_refuses_to_overwrite_an_active_task(task: TaskDriver) -> None:
    task.new()
    before = task.hand.contract.read_bytes()
    with pytest.raises(WrongState, match="is still active \\(pending_implementer\\)"):
        task.new(title="Another")
    assert task.hand.contract.read_bytes() == before


def test_new_refuses_to_overwrite_an_unreadable_contract(task: TaskDriver) -> None:
    task.hand.ensure()
    task.hand.contract.write_text("{not json", encoding="utf-8")
    with pytest.raises(WrongState, match="exists and is not a valid contract"):
        task.new()
    assert task.hand.contract.read_text(encoding="utf-8") == "{not json"


def test_setup_creates_the_task_branch_from_the_current_branch_and_records_it(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task_id = task.new()
    base_commit = run_git(ctx.repo_root, "rev-parse", "main")
    contract = task.setup()
    git = contract["git"]
    assert git == {
        "repo_root": str(ctx.repo_root),
        "base_branch": "main",
        "task_branch": f"task/{task_id}",
        "base_commit": base_commit,
    }
    assert run_git(ctx.repo_root, "rev-parse", "--abbrev-ref", "HEAD") == f"task/{task_id}"
    assert contract["status"] == "pending_implementer" and contract["history"] == []


def test_setup_takes_an_explicit_base_branch(task: TaskDriver, ctx: Context, run_git: Any) -> None:
    run_git(ctx.repo_root, "branch", "develop")
    run_git(ctx.repo_root, "checkout", "-q", "-b", "elsewhere")
    (ctx.repo_root / "other.txt").write_text("x\n", encoding="utf-8")
    run_git(ctx.repo_root, "add", "other.txt")
    run_git(ctx.repo_root, "commit", "-q", "-m", "not on develop")
    task.new()
    setup_task(ctx, "develop")
    git = task.contract()["git"]
    assert git["base_branch"] == "develop"
    assert git["base_commit"] == run_git(ctx.repo_root, "rev-parse", "develop")
    assert not (ctx.repo_root / "other.txt").exists()


def test_setup_refuses_a_dirty_tree_naming_the_files_and_changes_nothing(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task.new()
    (ctx.repo_root / "src/app.py").write_text("edited by hand\n", encoding="utf-8")
    (ctx.repo_root / "scratch.txt").write_text("x\n", encoding="utf-8")
    before = task.hand.contract.read_bytes()
    with pytest.raises(DirtyWorkTree) as caught:
        setup_task(ctx)
    assert sorted(caught.value.files) == ["scratch.txt", "src/app.py"]
    assert task.hand.contract.read_bytes() == before
    assert run_git(ctx.repo_root, "branch", "--format=%(refname:short)") == "main"


def test_setup_twice_is_refused(task: TaskDriver, ctx: Context) -> None:
    task.new()
    task.setup()
    with pytest.raises(WrongState, match="is set up already on task/"):
        setup_task(ctx)


def test_setup_on_a_detached_head_asks_for_a_base(task: TaskDriver, ctx: Context, run_git: Any) -> None:
    run_git(ctx.repo_root, "checkout", "-q", "--detach")
    task.new()
    with pytest.raises(WrongState, match="HEAD is detached"):
        setup_task(ctx)


def test_setup_from_a_missing_base_branch_is_a_git_error(task: TaskDriver, ctx: Context) -> None:
    task.new()
    with pytest.raises(GitError, match="base branch 'nope' does not exist"):
        setup_task(ctx, "nope")
    assert task.contract()["git"]["task_branch"] is None


def test_setup_in_a_later_state_is_refused(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    with pytest.raises(WrongState, match="setup-task needs the task in pending_implementer"):
        setup_task(ctx)


def test_setup_without_a_contract_says_there_is_none(ctx: Context) -> None:
    with pytest.raises(Exception, match="no such file"):
        setup_task(ctx)


def test_a_setup_killed_after_creating_the_branch_is_finished_by_the_next_setup(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    """What a SIGKILL between `git checkout -b` and saving the contract leaves behind."""
    task_id = task.new()
    base_commit = run_git(ctx.repo_root, "rev-parse", "main")
    contract = task.contract()
    contract["git"].update(base_branch="main", base_commit=base_commit)
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    run_git(ctx.repo_root, "checkout", "-q", "-b", f"task/{task_id}")
    setup_task(ctx)
    git = task.contract()["git"]
    assert (git["base_branch"], git["task_branch"], git["base_commit"]) == (
        "main",
        f"task/{task_id}",
        base_commit,
    )
    assert run_git(ctx.repo_root, "rev-parse", "--abbrev-ref", "HEAD") == f"task/{task_id}"
