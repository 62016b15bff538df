"""`hub finalize-task`: a --no-ff merge after PASS, the archive, and a merge conflict that halts."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.config import load_config
from hub.core.errors import TaskHalted, WrongState
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


def test_a_merge_over_the_users_uncommitted_changes_waits_and_touches_nothing_of_theirs(
    task: Any, ctx: Context, run_git: Any
) -> None:
    task.to_review_complete("PASS")
    repo = ctx.repo_root
    (repo / "build.out").write_text("artefact\n", encoding="utf-8")
    (repo / "src/app.py").write_text("the user's unsaved work\n", encoding="utf-8")
    main_before = run_git(repo, "rev-parse", "main")
    outcome = finalize_task(ctx)
    assert outcome.exit_code == 0 and outcome.to_state == "review_complete"
    assert "merge waits: your checkout has local changes in src/app.py" in outcome.message
    assert (repo / "src/app.py").read_text(encoding="utf-8") == "the user's unsaved work\n"
    assert run_git(repo, "rev-parse", "main") == main_before
    assert run_git(repo, "stash", "list") == ""
    from hub.phases.status import status

    shown = status(ctx)["tasks"][0]
    assert shown["next"]["phase"] == "finalize-task"
    assert "merge waits: your checkout has local changes in src/app.py" in shown["next"]["why"]
    assert "merge waits: your checkout has local changes in src/app.py" in shown["needs_person"]
    assert "Needs you:** merge waits" in task.hand.status_file.read_text(encoding="utf-8")
    run_git(repo, "checkout", "--", "src/app.py")
    assert finalize_task(ctx).to_state == "merged"
    assert (repo / "build.out").read_text(encoding="utf-8") == "artefact\n"


def test_a_merge_over_local_changes_waits_even_when_the_user_has_merge_autostash_set(
    task: Any, ctx: Context, run_git: Any
) -> None:
    # With merge.autoStash git would stash the user's change, merge, and pop it back into conflict
    # markers, leaving their work in the stash.
    task.to_review_complete("PASS")
    repo = ctx.repo_root
    run_git(repo, "config", "merge.autoStash", "true")
    (repo / "src/app.py").write_text("the user's unsaved work\n", encoding="utf-8")
    main_before = run_git(repo, "rev-parse", "main")
    outcome = finalize_task(ctx)
    assert "merge waits: your checkout has local changes in src/app.py" in outcome.message
    assert (repo / "src/app.py").read_text(encoding="utf-8") == "the user's unsaved work\n"
    assert run_git(repo, "rev-parse", "main") == main_before
    assert run_git(repo, "stash", "list") == ""


def test_a_merge_over_a_staged_change_waits_naming_the_staged_file(
    task: Any, ctx: Context, run_git: Any
) -> None:
    task.to_review_complete("PASS")
    repo = ctx.repo_root
    (repo / "README.md").write_text("staged by the user\n", encoding="utf-8")
    run_git(repo, "add", "README.md")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "review_complete"
    assert outcome.message.startswith("merge waits: your checkout has local changes in README.md;")
    assert run_git(repo, "diff", "--cached", "--name-only") == "README.md"


def test_a_merge_commit_the_users_hook_refuses_halts_and_leaves_their_checkout_as_it_was(
    task: Any, ctx: Context, run_git: Any
) -> None:
    # git merge runs the checkout's commit-msg hook (commitlint, husky); when it refuses, git leaves the
    # merge half done: MERGE_HEAD set and the task's changes staged in the user's checkout.
    task.to_review_complete("PASS")
    repo = ctx.repo_root
    hook = repo / ".git" / "hooks" / "commit-msg"
    hook.write_text(
        "#!/bin/sh\necho 'commitlint: subject must be lower-case' >&2\nexit 1\n", encoding="utf-8"
    )
    hook.chmod(0o755)
    (repo / "README.md").write_text("the user's unsaved work\n", encoding="utf-8")
    main_before = run_git(repo, "rev-parse", "main")
    with pytest.raises(TaskHalted, match="commitlint: subject must be lower-case"):
        finalize_task(ctx)
    assert run_git(repo, "rev-parse", "main") == main_before
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert run_git(repo, "status", "--porcelain", "--untracked-files=no") == "M README.md"
    assert (repo / "README.md").read_text(encoding="utf-8") == "the user's unsaved work\n"


def test_a_merge_into_a_base_the_user_is_rebasing_waits_for_the_rebase(
    task: Any, ctx: Context, run_git: Any
) -> None:
    # Mid-rebase the checkout's HEAD is detached, so the base looks checked out nowhere; moving it
    # then would make the user's `git rebase --continue` fail to write their branch.
    import subprocess

    task.to_review_complete("PASS")
    repo = ctx.repo_root
    (repo / "README.md").write_text("# demo, the user's commit\n", encoding="utf-8")
    run_git(repo, "commit", "-q", "-am", "user's commit")
    stopped = subprocess.run(
        ["git", "rebase", "--exec", "false", "HEAD~1"], cwd=repo, capture_output=True, check=False
    )
    assert stopped.returncode != 0 and (repo / ".git" / "rebase-merge").is_dir()
    main_before = run_git(repo, "rev-parse", "main")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "review_complete"
    assert "merge waits: main is being rebased" in outcome.message
    assert run_git(repo, "rev-parse", "main") == main_before
    run_git(repo, "rebase", "--continue")
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert finalize_task(ctx).to_state == "merged"


def passed_with_main_in_a_linked_worktree(task: Any, ctx: Context, run_git: Any, tmp_path: Path) -> Path:
    """A passed task on main, which the user has checked out in a linked worktree (returned) while the
    main checkout is on another branch."""
    from hub.phases.setup import setup_task

    linked = tmp_path / "main-wt"
    run_git(ctx.repo_root, "checkout", "-q", "-b", "feature")
    run_git(ctx.repo_root, "worktree", "add", "-q", str(linked), "main")
    task.new()
    setup_task(ctx, base_branch="main")
    task.to_review_complete("PASS")
    return linked


def test_a_merge_waiting_on_local_changes_in_a_linked_worktree_of_the_user_names_that_worktree(
    task: Any, ctx: Context, run_git: Any, tmp_path: Path
) -> None:
    # The main checkout is clean and on another branch: "your checkout" alone would send the person
    # looking for local changes where there are none.
    repo = ctx.repo_root
    linked = passed_with_main_in_a_linked_worktree(task, ctx, run_git, tmp_path)
    (linked / "src/app.py").write_text("the user's unsaved work\n", encoding="utf-8")
    main_before = run_git(repo, "rev-parse", "main")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "review_complete"
    wait = f"merge waits: your checkout {linked} has local changes in src/app.py"
    assert outcome.message.startswith(wait + ";")
    from hub.phases.status import status

    shown = status(ctx)["tasks"][0]
    assert wait in shown["next"]["why"]
    assert wait in shown["needs_person"]
    assert str(linked) in task.hand.status_file.read_text(encoding="utf-8")
    assert (linked / "src/app.py").read_text(encoding="utf-8") == "the user's unsaved work\n"
    assert run_git(repo, "rev-parse", "main") == main_before
    run_git(linked, "checkout", "--", "src/app.py")
    assert finalize_task(ctx).to_state == "merged"
    assert run_git(linked, "rev-parse", "HEAD") == run_git(repo, "rev-parse", "main") != main_before
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "feature"


def test_a_base_checked_out_in_a_worktree_the_user_deleted_by_hand_merges_without_a_checkout(
    task: Any, ctx: Context, run_git: Any, tmp_path: Path
) -> None:
    # `rm -rf` of a linked worktree leaves git's record of it ("prunable") until `git worktree prune`.
    import shutil

    repo = ctx.repo_root
    linked = passed_with_main_in_a_linked_worktree(task, ctx, run_git, tmp_path)
    shutil.rmtree(linked)
    outcome = finalize_task(ctx)
    assert outcome.to_state == "merged"
    assert run_git(repo, "rev-parse", "main") == outcome.data["merge_commit"]
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "feature"


def test_a_merge_into_a_base_checked_out_nowhere_leaves_the_users_checkout_untouched(
    task: Any, ctx: Context, run_git: Any
) -> None:
    repo = ctx.repo_root
    run_git(repo, "branch", "release")
    task.new()
    from hub.phases.setup import setup_task

    setup_task(ctx, base_branch="release")
    contract = task.to_review_complete("PASS")
    (repo / "notes.txt").write_text("untracked\n", encoding="utf-8")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "merged"
    assert run_git(repo, "rev-parse", "release") == outcome.data["merge_commit"]
    assert run_git(repo, "show", "release:src/app.py") == 'def greet(name):\n    return "hello, " + name'
    assert run_git(repo, "rev-parse", "main") == contract["git"]["base_commit"]
    assert run_git(repo, "status", "--porcelain") == "?? notes.txt"


def test_the_worktree_is_removed_after_the_merge_and_the_branch_kept_only_when_configured(
    task: Any, ctx: Context, run_git: Any
) -> None:
    contract = task.to_review_complete("PASS")
    worktree = Path(contract["git"]["worktree"])
    assert worktree.is_dir()
    finalize_task(ctx)
    assert not worktree.exists()
    assert run_git(ctx.repo_root, "worktree", "list").count("\n") == 0
    assert run_git(ctx.repo_root, "branch", "--list", contract["git"]["task_branch"]) == ""


def test_keep_branches_keeps_the_merged_task_branch_but_not_its_worktree(
    task: TaskDriver, ctx: Context, git_repo: Path, run_git: Any
) -> None:

    ctx.config = ctx.config._replace(keep_branches=True)
    contract = task.to_review_complete("PASS")
    assert finalize_task(ctx).to_state == "merged"
    branch = contract["git"]["task_branch"]
    assert run_git(git_repo, "rev-parse", branch) == contract["handoff_data"]["reviewed_commit"]
    assert not Path(contract["git"]["worktree"]).exists()


def test_a_commit_on_the_task_branch_after_pass_goes_back_to_review_with_the_reason(
    task: Any, ctx: Context, run_git: Any
) -> None:
    contract = task.to_review_complete("PASS")
    main_before = run_git(ctx.repo_root, "rev-parse", "main")
    worktree = Path(contract["git"]["worktree"])
    (worktree / "src/app.py").write_text("def greet(name):\n    return 'sneaked in'\n", encoding="utf-8")
    run_git(worktree, "commit", "-q", "-am", "a commit after the verdict")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "pending_local_review"
    assert "the task branch moved after the verdict" in outcome.message
    after = task.contract()
    assert after["handoff_data"]["judge_verdict"] is None
    assert after["history"][-1]["event"] == "branch_moved"
    assert run_git(ctx.repo_root, "rev-parse", "main") == main_before


def test_a_hand_edit_after_pass_becomes_the_tasks_and_goes_back_to_review(
    task: Any, ctx: Context, run_git: Any
) -> None:
    contract = task.to_review_complete("PASS")
    worktree = Path(contract["git"]["worktree"])
    (worktree / "src/app.py").write_text("def greet(name):\n    return 'by hand'\n", encoding="utf-8")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "pending_local_review"
    assert "a person's edits to src/app.py" in run_git(worktree, "log", "-1", "--format=%s")
    assert run_git(worktree, "status", "--porcelain") == ""


def test_a_merged_tasks_stashes_go_with_it_and_other_tasks_stay(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    from hub.repo import gitops

    task_id = task.new()
    task.setup()
    task.write({"src/half.py": "def half(x):\n"})  # a stalled attempt's work
    kept = gitops.stash(gitops.open_repo(task.worktree), f"{task_id}/attempt-1-stalled")
    repo = ctx.repo_root
    other = "refs/hub/stashes/someone-else/attempt-1-stalled"
    run_git(repo, "update-ref", other, "HEAD")
    assert kept and run_git(repo, "for-each-ref", "--format=%(refname)", kept) == kept
    task.to_review_complete("PASS")

    outcome = finalize_task(ctx)

    assert outcome.to_state == "merged"
    assert run_git(repo, "for-each-ref", "--format=%(refname)", "refs/hub/stashes") == other


def _conflicting_base(task: TaskDriver, ctx: Context, run_git: Any) -> dict[str, Any]:
    contract = task.to_review_complete("PASS")
    repo = ctx.repo_root
    (repo / "src/app.py").write_text('def greet(name):\n    return "hi " + name\n', encoding="utf-8")
    run_git(repo, "commit", "-q", "-am", "someone else changed greet")
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
    assert run_git(task.worktree, "status", "--porcelain") == ""
    assert not (repo / ".git/MERGE_HEAD").exists()
    halt = task.hand.halt_report.read_text(encoding="utf-8")
    assert "Trigger: `git_conflict`" in halt and "src/app.py" in halt
    command = f"cd {repo} && hub resume --to review_complete --task {contract['task_id']}"
    assert f"\n    {command}\n" in halt


def test_a_conflict_resolved_by_hand_on_the_task_branch_is_reviewed_before_it_merges(
    task: Any, ctx: Context, run_git: Any
) -> None:
    _conflicting_base(task, ctx, run_git)
    finalize_task(ctx)
    worktree = task.worktree
    run_git(worktree, "merge", "-q", "main", "-X", "ours", "-m", "resolve: keep the task's greeting")
    resume(ctx, "review_complete", "merged main into the task branch")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "pending_local_review"
    assert "moved after the verdict" in outcome.message


def test_a_conflict_resolved_as_the_halt_says_merges_after_the_resume_it_names(
    task: Any, ctx: Context, run_git: Any
) -> None:
    from hub.phases.judge import enter_judge_review, report_judge

    _conflicting_base(task, ctx, run_git)
    finalize_task(ctx)
    halt = task.hand.halt_report.read_text(encoding="utf-8")
    # What the halt tells a person to do, done as written: the merge in the task's worktree (real git,
    # a real conflict), the file resolved by hand, the commit, then the resume line.
    [merge] = re.findall(r"`(cd [^`]+ && git merge [^`]+)`", halt)
    merging = subprocess.run(["bash", "-c", merge], capture_output=True, text=True)
    assert merging.returncode == 1 and "CONFLICT" in merging.stdout, merging
    worktree = task.worktree
    resolved = 'def greet(name):\n    return "hello, hi " + name\n'
    (worktree / "src/app.py").write_text(resolved, encoding="utf-8")
    assert "`git add` the files and `git commit --no-edit`" in halt
    run_git(worktree, "add", "src/app.py")
    run_git(worktree, "commit", "--no-edit")
    [line] = re.findall(r"\n    cd \S+ && hub resume --to (\S+) --task \S+\n", halt)
    resume(ctx, line)

    again = finalize_task(ctx)
    assert again.to_state == "pending_local_review"  # the merged branch is reviewed before it merges
    enter_judge_review(task.run(), "local_pass")
    task.judge_report("PASS")
    report_judge(ctx)
    merged = finalize_task(ctx)

    assert (merged.to_state, merged.exit_code) == ("merged", 0), merged.message
    assert run_git(ctx.repo_root, "show", "main:src/app.py") == resolved.rstrip("\n")
    assert run_git(ctx.repo_root, "status", "--porcelain") == ""


def test_the_resume_command_names_a_handoff_folder_outside_the_repo(
    git_repo: Path, tmp_path: Path, clock: Any, run_git: Any
) -> None:
    outside = tmp_path / "elsewhere"
    ctx = Context(load_config(git_repo, outside, env={}), clock=clock)
    from hub.phases.setup import create, setup_task

    create(ctx, {"title": "t", "requirements": ["r"], "target_file": "src/app.py"})
    setup_task(ctx)
    from hub.phases.judge import enter_judge_review, report_judge
    from hub.phases.run import Run

    (task_id,) = ctx.handoff.task_ids()
    run = Run(
        ctx, json.loads((outside / "tasks" / task_id / "TASK_CONTRACT.json").read_text("utf-8")), "test"
    )
    for event in ("lock_acquired", "code_written"):
        run.record(event)
    enter_judge_review(run, "local_pass")
    (outside / "tasks" / task_id / "JUDGE_REPORT.json").write_text('{"verdict": "CRITICAL_HALT"}', "utf-8")
    report_judge(ctx)
    halt = (outside / "tasks" / task_id / "ERIK_HALT.md").read_text(encoding="utf-8")
    # The judge's CRITICAL_HALT is no PASS: the halt file offers the implementer (with a note), never a merge.
    assert f"hub --handoff {outside} resume --to pending_implementer --note '<<REPLACE" in halt
    assert "--to review_complete" not in halt


def test_a_merge_killed_midway_in_the_users_checkout_is_redone_keeping_their_changes(
    task: Any, ctx: Context, run_git: Any
) -> None:
    contract = task.to_review_complete("PASS")
    repo = ctx.repo_root
    (repo / "README.md").write_text("the user's edit\n", encoding="utf-8")
    (repo / "notes.txt").write_text("untracked\n", encoding="utf-8")
    reviewed = contract["handoff_data"]["reviewed_commit"]
    # What a SIGKILL between git's file updates and its merge commit leaves: MERGE_HEAD, files updated.
    run_git(repo, "merge", "--no-ff", "--no-commit", reviewed)
    assert (repo / ".git" / "MERGE_HEAD").exists()
    outcome = finalize_task(ctx)
    assert outcome.to_state == "merged"
    assert run_git(repo, "log", "-1", "--format=%P", "main").split()[1] == reviewed
    assert (repo / "README.md").read_text(encoding="utf-8") == "the user's edit\n"
    assert (repo / "notes.txt").read_text(encoding="utf-8") == "untracked\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()


def test_a_merge_of_the_users_own_in_progress_makes_the_task_wait(
    task: Any, ctx: Context, run_git: Any
) -> None:
    task.to_review_complete("PASS")
    repo = ctx.repo_root
    run_git(repo, "checkout", "-q", "-b", "side")
    (repo / "other.txt").write_text("side\n", encoding="utf-8")
    run_git(repo, "add", "other.txt")
    run_git(repo, "commit", "-q", "-m", "side")
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "merge", "--no-ff", "--no-commit", "side")
    outcome = finalize_task(ctx)
    assert outcome.to_state == "review_complete"
    assert "in the middle of a merge of its own" in outcome.message
    assert (repo / ".git" / "MERGE_HEAD").exists()
