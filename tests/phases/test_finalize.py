"""`hub finalize-task`: a --no-ff merge after PASS, the archive, and a merge conflict that halts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.config import load_config
from hub.errors import DirtyWorkTree, WrongState
from hub.phases.context import Context
from hub.phases.finalize import finalize_task, resume

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver


def test_a_passed_task_merges_with_a_merge_commit_and_is_archived(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    contract = task.to_review_complete("PASS")
    repo = ctx.repo_root
    task_head = run_git(repo, "rev-parse", contract["git"]["task_branch"])
    outcome = finalize_task(ctx)
    assert (outcome.to_state, outcome.exit_code) == ("merged", 0)
    merge = outcome.data["merge_commit"]
    assert run_git(repo, "rev-parse", "main") == merge
    assert run_git(repo, "log", "-1", "--format=%P", "main").split() == [
        contract["git"]["base_commit"],
        task_head,
    ]
    assert run_git(repo, "log", "-1", "--format=%s", "main") == (
        f"[TASK: {contract['task_id']}] Merge {contract['git']['task_branch']}"
    )
    assert run_git(repo, "show", "main:src/app.py") == 'def greet(name):\n    return "hello, " + name'
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    # The handoff folder is free for the next task; the finished one is in the archive.
    assert not task.hand.contract.exists()
    archived = json.loads((task.hand.archive / contract["task_id"] / "TASK_CONTRACT.json").read_text("utf-8"))
    assert archived["status"] == "merged"
    assert archived["handoff_data"]["merge_commit"] == merge
    assert archived["history"][-1]["event"] == "pass"


def test_finalize_needs_review_complete_with_a_pass(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    with pytest.raises(WrongState, match="finalize-task needs the task in review_complete"):
        finalize_task(ctx)
    contract = task.record("review_started", "judge_complete")
    contract["handoff_data"]["judge_verdict"] = "FAIL"
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    with pytest.raises(WrongState, match="has verdict FAIL, not PASS"):
        finalize_task(ctx)


def test_finalize_refuses_uncommitted_changes_but_not_untracked_build_output(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task.to_review_complete("PASS")
    (ctx.repo_root / "build.out").write_text("artefact\n", encoding="utf-8")
    (ctx.repo_root / "README.md").write_text("edited by hand\n", encoding="utf-8")
    with pytest.raises(DirtyWorkTree, match=r"README\.md"):
        finalize_task(ctx)
    assert task.contract()["status"] == "review_complete"
    run_git(ctx.repo_root, "checkout", "--", "README.md")
    assert finalize_task(ctx).to_state == "merged"


def _conflicting_base(task: TaskDriver, ctx: Context, run_git: Any) -> dict[str, Any]:
    contract = task.to_review_complete("PASS")
    repo = ctx.repo_root
    run_git(repo, "checkout", "-q", "main")
    (repo / "src/app.py").write_text('def greet(name):\n    return "hi " + name\n', encoding="utf-8")
    run_git(repo, "commit", "-q", "-am", "someone else changed greet")
    run_git(repo, "checkout", "-q", contract["git"]["task_branch"])
    return contract


def test_a_merge_conflict_halts_with_git_conflict_and_leaves_both_branches_and_the_base_intact(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    contract = _conflicting_base(task, ctx, run_git)
    repo = ctx.repo_root
    branches = ("main", contract["git"]["task_branch"])
    heads = {b: run_git(repo, "rev-parse", b) for b in branches}
    outcome = finalize_task(ctx)
    assert (outcome.exit_code, outcome.to_state) == (4, "erik_consultation")
    after = task.contract()
    assert after["status"] == "erik_consultation"
    assert after["breaker"]["trigger"] == "git_conflict"
    assert {b: run_git(repo, "rev-parse", b) for b in branches} == heads
    assert run_git(repo, "status", "--porcelain") == ""
    assert not (repo / ".git/MERGE_HEAD").exists()
    halt = task.hand.halt_report.read_text(encoding="utf-8")
    assert "Trigger: `git_conflict`" in halt and "src/app.py" in halt
    command = f"cd {repo} && hub resume --to review_complete"
    assert f"\n    {command}\n" in halt


def test_after_a_person_resolves_the_conflict_resume_and_finalize_merge(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    contract = _conflicting_base(task, ctx, run_git)
    finalize_task(ctx)
    repo = ctx.repo_root
    run_git(repo, "merge", "-q", "main", "-X", "ours", "-m", "resolve: keep the task's greeting")
    resume(ctx, "review_complete", "merged main into the task branch")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "merged"
    assert run_git(repo, "show", "main:src/app.py") == 'def greet(name):\n    return "hello, " + name'
    assert contract["task_id"] in run_git(repo, "log", "-1", "--format=%s", "main")


def test_the_resume_command_names_a_handoff_folder_outside_the_repo(
    git_repo: Path, tmp_path: Path, clock: Any, run_git: Any
) -> None:
    outside = tmp_path / "elsewhere"
    ctx = Context(load_config(git_repo, outside, env={}), clock=clock)
    from hub.phases.setup import create, setup_task

    create(ctx, {"title": "t", "requirements": ["r"], "target_file": "src/app.py"})
    setup_task(ctx)
    from hub.phases.context import Run
    from hub.phases.judge import enter_judge_review, report_judge

    run = Run(ctx, json.loads((outside / "TASK_CONTRACT.json").read_text("utf-8")), "test")
    for event in ("lock_acquired", "code_written"):
        run.record(event)
    enter_judge_review(run, "local_pass")
    (outside / "JUDGE_REPORT.json").write_text('{"verdict": "CRITICAL_HALT"}', encoding="utf-8")
    report_judge(ctx)
    halt = (outside / "ERIK_HALT.md").read_text(encoding="utf-8")
    # The judge's CRITICAL_HALT is no PASS: the halt file offers the implementer (with a note), never a merge.
    assert f"hub --handoff {outside} resume --to pending_implementer --note '<<REPLACE" in halt
    assert "--to review_complete" not in halt
