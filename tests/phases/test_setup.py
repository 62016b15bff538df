"""`hub init`, `hub new` and `hub setup-task` in process, on real repositories."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.config import load_config
from hub.core.errors import GitError, WrongState
from hub.phases.context import Context
from hub.phases.setup import init, setup_task

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver

APP_PY = 'def greet(name):\n    return "hello " + name\n'


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
    assert "commit" not in outcome.message  # hub.yaml is read from the checkout, committed or not
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


def test_a_new_task_takes_its_clocks_and_rebuttal_limit_from_hub_yaml(git_repo: Path, clock: Any) -> None:
    from hub.phases.setup import create

    config = (git_repo / "hub.yaml").read_text(encoding="utf-8")
    config = config.replace("limits:\n", "limits:\n  timeout_minutes: {judge: 90}\n  max_rebuttals: 0\n", 1)
    (git_repo / "hub.yaml").write_text(config, encoding="utf-8")
    ctx = Context(load_config(git_repo, env={}), clock=clock)

    outcome = create(ctx, {"title": "Clocks", "requirements": ["r"], "target_file": "README.md"})

    contract = json.loads(
        (ctx.handoff_root.tasks_dir / str(outcome.task_id) / "TASK_CONTRACT.json").read_text("utf-8")
    )
    assert contract["limits"]["timeout_minutes"] == {"implementer": 30, "local_review": 15, "judge": 90}
    assert contract["limits"]["max_rebuttals"] == 0


def test_new_works_while_another_task_is_active_each_in_a_folder_of_its_own(task: Any, ctx: Context) -> None:
    first = task.new()
    first_bytes = task.hand.contract.read_bytes()
    from hub.phases.setup import create

    outcome = create(ctx, {"title": "Another", "requirements": ["r"], "target_file": "README.md"})
    second = str(outcome.task_id)
    assert second != first and second in outcome.message
    root = ctx.handoff_root
    assert root.task_ids() == sorted([first, second])
    assert root.for_task(first).contract.read_bytes() == first_bytes
    assert (root.dir / "tasks" / second / "TASK_CONTRACT.json").is_file()
    status_md = root.status_file.read_text(encoding="utf-8")
    assert f"## {first}" in status_md and f"## {second}" in status_md


def test_the_same_title_twice_in_one_second_gets_two_task_ids(task: Any, ctx: Context) -> None:
    first = task.new(title="Same")
    from hub.phases.setup import create

    second = create(ctx, {"title": "Same", "requirements": ["r"], "target_file": "README.md"}).task_id
    assert second == f"{first}-2"


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
        "worktree": str(ctx.repo_root / ".git" / "hub-worktrees" / task_id),
    }
    # The branch lives in the task's own worktree; the user's checkout stays where it was.
    assert run_git(Path(git["worktree"]), "rev-parse", "--abbrev-ref", "HEAD") == f"task/{task_id}"
    assert run_git(ctx.repo_root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
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
    assert not (Path(git["worktree"]) / "other.txt").exists()
    assert (ctx.repo_root / "other.txt").exists()
    assert run_git(ctx.repo_root, "rev-parse", "--abbrev-ref", "HEAD") == "elsewhere"


def test_setup_on_a_dirty_checkout_works_from_the_committed_base_and_leaves_the_users_work_alone(
    task: Any, ctx: Context, run_git: Any
) -> None:
    (ctx.repo_root / "src/app.py").write_text("edited by hand\n", encoding="utf-8")
    (ctx.repo_root / "scratch.txt").write_text("x\n", encoding="utf-8")
    from hub.phases.setup import create

    outcome_new = create(ctx, {"title": "t", "requirements": ["r"], "target_file": "src/app.py"})
    assert "src/app.py has uncommitted changes in your checkout, which the task will not see" in (
        outcome_new.message
    )
    contract = task.setup()
    worktree = Path(contract["git"]["worktree"])
    assert (worktree / "src/app.py").read_text(encoding="utf-8") == APP_PY
    assert not (worktree / "scratch.txt").exists()
    assert (ctx.repo_root / "src/app.py").read_text(encoding="utf-8") == "edited by hand\n"
    status = sorted(line.strip() for line in run_git(ctx.repo_root, "status", "--porcelain").splitlines())
    assert status == ["?? scratch.txt", "M src/app.py"]


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
    run_git(ctx.repo_root, "branch", f"task/{task_id}")
    setup_task(ctx)
    git = task.contract()["git"]
    assert (git["base_branch"], git["task_branch"], git["base_commit"]) == (
        "main",
        f"task/{task_id}",
        base_commit,
    )
    assert run_git(Path(git["worktree"]), "rev-parse", "--abbrev-ref", "HEAD") == f"task/{task_id}"


def test_setup_on_a_branch_without_a_commit_asks_for_a_base_and_takes_one_given(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task.new()
    run_git(ctx.repo_root, "checkout", "-q", "--orphan", "fresh")
    with pytest.raises(GitError, match=r"the current branch 'fresh' has no commit yet") as caught:
        setup_task(ctx)
    assert re.match(r"pass --base .*\(main\)", caught.value.hint)
    assert task.contract()["git"]["task_branch"] is None

    assert setup_task(ctx, "main").exit_code == 0
    assert task.contract()["git"]["base_branch"] == "main"
