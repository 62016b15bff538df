"""Issue 23, the crash matrix: for each git command of set-up, the phases and finalize, git's own
half-state after a kill inside it, then `hub next` alone (as cron runs it) takes both tasks in flight to
merged with no person, exit codes only 0 or 75, and the user's checkout as they left it.

Two ways to leave git's exact leftover: a `reference-transaction` hook that SIGKILLs the hub's whole
process group (the hub and its git) at one ref update, while git holds that update's locks, so git
itself leaves what it leaves; or the files a kill leaves elsewhere, made by hand (a removal git had
started, a checkout a full disk stopped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.core.errors import LockBusy
from hub.phases.next import run_next
from hub.repo.killed_git import git_dirs

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, git

OTHER_PY = "X = 1\n"
OTHER_FIXED = "X = 2\n"
USER_EDIT = "# demo\n\nthe user's own unsaved edit\n"
JUDGE_PASS = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})

# A test seam in the repository's hooks: at the first ref update matching HUB_TEST_KILL_REF (a shell
# pattern) of the kind HUB_TEST_KILL_WHEN (create/update: a ref that moves/delete; the
# HUB_TEST_KILL_NTH such update when set), SIGKILL the whole process group:
# the hub, the git holding the locks, this hook. Inert without the variables (the in-process recovery).
KILL_HOOK = """#!/bin/sh
[ "$1" = prepared ] && [ -n "$HUB_TEST_KILL_REF" ] && [ ! -e "$HUB_TEST_KILL_MARK" ] || exit 0
zero=0000000000000000000000000000000000000000
while read -r old new ref; do
  case "$ref" in $HUB_TEST_KILL_REF) ;; *) continue ;; esac
  case "$HUB_TEST_KILL_WHEN" in
    create) [ "$old" = "$zero" ] || continue ;;
    delete) [ "$new" = "$zero" ] || continue ;;
    update) [ "$old" != "$zero" ] && [ "$new" != "$zero" ] && [ "$old" != "$new" ] || continue ;;
  esac
  echo >> "$HUB_TEST_KILL_MARK.count"
  [ "$(wc -l < "$HUB_TEST_KILL_MARK.count")" -ge "${HUB_TEST_KILL_NTH:-1}" ] || continue
  : > "$HUB_TEST_KILL_MARK"
  kill -KILL 0
done
exit 0
"""


def answer(body: dict[str, object]) -> str:
    """The implementer's answer for whichever task asks: its own file, fixed."""
    if "src/other.py" in json.dumps(body.get("messages", "")):
        return f"src/other.py\n```python\n{OTHER_FIXED}```\n"
    return f"src/app.py\n```python\n{GREET_FIXED}```\n"


def two_tasks(pipe: Pipeline, acceptance: list[str] | None = None) -> list[str]:
    """Two tasks in flight on two files, a judge that passes at once, the user's own uncommitted edit
    and untracked file in their checkout; the kill hook installed."""
    pipe.commit("another file", {"src/other.py": OTHER_PY})
    pipe.configure(extra_yaml=f"judge:\n  command: {json.dumps('echo ' + repr(JUDGE_PASS))}\n")
    pipe.fake.respond_with(IMPL, answer)
    pipe.fake.respond_with(REV, lambda _body: PASS_REVIEW)
    hook = pipe.repo / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(KILL_HOOK, encoding="utf-8")
    hook.chmod(0o755)
    from hub.phases.setup import create

    ids = [
        str(
            create(
                pipe.ctx,
                {
                    "title": f"Fix {name}",
                    "requirements": ["fix it"],
                    "target_file": name,
                    "acceptance_commands": acceptance or [],
                },
            ).task_id
        )
        for name in ("src/app.py", "src/other.py")
    ]
    (pipe.repo / "README.md").write_text(USER_EDIT, encoding="utf-8")
    (pipe.repo / "notes.txt").write_text("untracked\n", encoding="utf-8")
    return ids


def hub_until_killed(pipe: Pipeline, tmp_path: Path, env: dict[str, str]) -> None:
    """`hub next --until-idle` as a real process in a process group of its own, killed as `env` says."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    environment.update(OLLAMA_HOST=pipe.fake.url, HUB_LOG_FORMAT="json", **env)
    done = subprocess.run(
        [sys.executable, "-m", "hub", "next", "--until-idle"],
        cwd=pipe.repo,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
    )
    assert done.returncode == -9, done.stderr[-2000:]


def killed_in_git(pipe: Pipeline, tmp_path: Path, ref: str, when: str) -> None:
    mark = tmp_path / "killed"
    hub_until_killed(
        pipe,
        tmp_path,
        {"HUB_TEST_KILL_REF": ref, "HUB_TEST_KILL_WHEN": when, "HUB_TEST_KILL_MARK": str(mark)},
    )
    assert mark.exists()


def hub_next_alone_until_merged(pipe: Pipeline, ids: list[str], runs: int = 25) -> list[int]:
    """`hub next` again and again, as cron would; the exit codes. Fails if a task halts or never merges."""
    codes: list[int] = []
    archive = pipe.ctx.handoff_root.archive
    for _ in range(runs):
        if all((archive / task_id / "TASK_CONTRACT.json").exists() for task_id in ids):
            return codes
        try:
            codes.append(run_next(pipe.ctx).exit_code)
        except LockBusy:
            codes.append(75)
        assert set(codes) <= {0, 75}, codes
    raise AssertionError(f"not merged after {runs} runs of hub next: {codes}")


def assert_merged_and_untouched(pipe: Pipeline) -> None:
    """Both changes on main, each merged once; the user's edit and file as they were; no worktree,
    task branch, merge in progress or lock left."""
    repo = pipe.repo
    assert git(repo, "show", "main:src/app.py") + "\n" == GREET_FIXED
    assert git(repo, "show", "main:src/other.py") + "\n" == OTHER_FIXED
    assert len(git(repo, "log", "--merges", "--format=%s", "main").splitlines()) == 2
    assert (repo / "README.md").read_text(encoding="utf-8") == USER_EDIT
    assert {line.strip() for line in git(repo, "status", "--porcelain").splitlines()} == {
        "M README.md",
        "?? notes.txt",
    }
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    assert git(repo, "branch", "--list", "task/*") == ""
    # No lock file but the hub's own (filelock's, held through the kernel, never removed by design).
    assert [p.name for p in (repo / ".git").rglob("*.lock") if not p.name.startswith("hub-")] == []
    assert git(repo, "fsck", "--no-dangling") == ""


def left(repo: Path, pattern: str) -> list[Path]:
    return sorted((repo / ".git").glob(pattern))


# what git was doing -> (the ref update the kill lands in, its kind, what git left: a glob in .git)
KILLS_IN_GIT = {
    "worktree add -b, creating the task branch": ("refs/heads/task/*", "create", "refs/heads/task/*.lock"),
    "worktree add, checking out (its 'initializing' lock held)": (
        "ORIG_HEAD",
        "create",
        "worktrees/*/locked",
    ),
    "a checkpoint commit on the task branch": ("refs/heads/task/*", "update", "refs/heads/task/*.lock"),
    "the merge into the user's checkout": ("refs/heads/main", "update", "HUB_MERGE"),
    "branch -D of a merged task": ("refs/heads/task/*", "delete", "packed-refs.*"),
}


@pytest.mark.parametrize("what", list(KILLS_IN_GIT))
def test_a_kill_inside_a_git_command_is_recovered_by_hub_next_alone_for_both_tasks(
    pipe: Pipeline, tmp_path: Path, what: str
) -> None:
    ids = two_tasks(pipe)
    ref, when, leftover = KILLS_IN_GIT[what]

    killed_in_git(pipe, tmp_path, ref, when)
    assert left(pipe.repo, leftover), f"no {leftover}: the kill did not land inside {what}"

    hub_next_alone_until_merged(pipe, ids)
    assert_merged_and_untouched(pipe)


def merged_not_cleaned(pipe: Pipeline, tmp_path: Path) -> tuple[list[str], Path]:
    """Two tasks; the first merged and recorded, its worktree and branch not removed yet (a kill right
    after `pass`); the worktree of the merged one."""
    ids = two_tasks(pipe)
    # One phase at a time: with two threads the second task's finalize could record its own pass before
    # the first one's kill point ended the process (seen once in CI), and no task would be left unmerged.
    hub_until_killed(pipe, tmp_path, {"HUB_TEST_CRASH_AT": "finalize:after-pass", "HUB_PARALLEL_TASKS": "1"})
    merged = [t for t in ids if pipe.ctx.for_task(t).handoff.contract.exists()]
    (task_id,) = [
        t
        for t in merged
        if json.loads(pipe.ctx.for_task(t).handoff.contract.read_text("utf-8"))["status"] == "merged"
    ]
    contract = json.loads(pipe.ctx.for_task(task_id).handoff.contract.read_text("utf-8"))
    return ids, Path(contract["git"]["worktree"])


def test_a_worktree_removal_git_had_started_is_finished(pipe: Pipeline, tmp_path: Path) -> None:
    ids, worktree = merged_not_cleaned(pipe, tmp_path)
    # `git worktree remove` killed midway: the folder, its `.git` file already gone, some files left.
    (worktree / ".git").unlink()
    assert (worktree / "src").exists()

    hub_next_alone_until_merged(pipe, ids)

    assert not worktree.exists()
    assert_merged_and_untouched(pipe)


def test_a_merged_tasks_worktree_locked_initializing_is_removed(pipe: Pipeline, tmp_path: Path) -> None:
    ids, worktree = merged_not_cleaned(pipe, tmp_path)
    # What an older hub left: it worked in a worktree whose add was killed, git's lock still on it.
    dirs = git_dirs(worktree)
    assert dirs is not None
    (dirs[0] / "locked").write_text("initializing", encoding="utf-8")

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def test_a_packed_refs_lock_a_killed_branch_delete_left_is_cleared(pipe: Pipeline, tmp_path: Path) -> None:
    ids, _ = merged_not_cleaned(pipe, tmp_path)
    (pipe.repo / ".git" / "packed-refs.lock").write_text("", encoding="utf-8")

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def test_a_half_made_worktree_is_made_again_keeping_the_branch(pipe: Pipeline, tmp_path: Path) -> None:
    from hub.phases.setup import setup_task

    ids = two_tasks(pipe)
    setup_task(pipe.ctx.for_task(ids[0]))
    worktree = pipe.repo / ".git" / "hub-worktrees" / ids[0]
    # `git worktree add` killed before its checkout: the `.git` file over an empty tree, the lock held.
    dirs = git_dirs(worktree)
    assert dirs is not None
    (dirs[0] / "locked").write_text("initializing", encoding="utf-8")
    (dirs[0] / "index").unlink()
    for name in ("src/app.py", "README.md", "hub.yaml", "src/other.py"):
        (worktree / name).unlink()

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def test_a_merge_a_full_disk_stopped_in_the_users_checkout_is_undone_and_redone(
    pipe: Pipeline, tmp_path: Path
) -> None:
    ids = two_tasks(pipe)
    hub_until_killed(pipe, tmp_path, {"HUB_TEST_CRASH_AT": "finalize:before-merge"})
    task_id = next(
        t
        for t in ids
        if json.loads(pipe.ctx.for_task(t).handoff.contract.read_text("utf-8"))["status"] == "review_complete"
    )
    reviewed = json.loads(pipe.ctx.for_task(task_id).handoff.contract.read_text("utf-8"))["handoff_data"][
        "reviewed_commit"
    ]
    # What the full disk left: MERGE_HEAD, the fix staged while the work tree holds the old file, an
    # empty MERGE_MSG, the index lock of the git that failed. `git merge --abort` fails on it.
    git(pipe.repo, "merge", "--no-ff", "--no-commit", reviewed)
    changed = next(
        n
        for n in ("src/app.py", "src/other.py")
        if git(pipe.repo, "diff", "--cached", "--name-only", "--", n)
    )
    (pipe.repo / changed).write_text(git(pipe.repo, "show", f"HEAD:{changed}") + "\n", encoding="utf-8")
    (pipe.repo / ".git" / "MERGE_MSG").write_text("", encoding="utf-8")
    abort = subprocess.run(["git", "merge", "--abort"], cwd=pipe.repo, capture_output=True, text=True)
    assert "not uptodate" in abort.stderr
    (pipe.repo / ".git" / "index.lock").write_text("", encoding="utf-8")

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def test_a_tasks_stash_a_kill_left_in_the_users_stash_list_is_moved_to_the_hubs_refs(
    pipe: Pipeline, tmp_path: Path
) -> None:
    ids = two_tasks(pipe, acceptance=["true"])
    # Killed while the implementer's edit is uncommitted (its acceptance command running): the next run
    # stashes that edit; killed again between git's stash and the hub's move of it to its own ref.
    hub_until_killed(pipe, tmp_path, {"HUB_TEST_CRASH_AT": "acceptance:running"})
    killed_in_git(pipe, tmp_path, "refs/hub/stashes/*", "create")
    assert ": hub: " in git(pipe.repo, "stash", "list")

    hub_next_alone_until_merged(pipe, ids)

    # Moved out of the user's stash list, then, the task merged, dropped with its refs (issue 36).
    assert git(pipe.repo, "stash", "list") == ""
    assert git(pipe.repo, "for-each-ref", "refs/hub/stashes") == ""
    assert_merged_and_untouched(pipe)


def test_a_merge_an_older_hubs_git_merge_committed_but_did_not_forget_holds_no_task_up(
    pipe: Pipeline, tmp_path: Path
) -> None:
    ids, _ = merged_not_cleaned(pipe, tmp_path)
    (merged,) = [
        t
        for t in ids
        if pipe.ctx.for_task(t).handoff.contract.exists()
        and json.loads(pipe.ctx.for_task(t).handoff.contract.read_text("utf-8"))["status"] == "merged"
    ]
    contract = json.loads(pipe.ctx.for_task(merged).handoff.contract.read_text("utf-8"))
    # `git merge` killed after moving the branch, before removing its merge state.
    (pipe.repo / ".git" / "MERGE_HEAD").write_text(contract["handoff_data"]["reviewed_commit"] + "\n")
    (pipe.repo / ".git" / "MERGE_MSG").write_text(
        f"[TASK: {merged}] Merge {contract['git']['task_branch']}\n"
    )

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def test_a_merged_tasks_clean_up_that_keeps_failing_is_shown_and_holds_no_other_task_up(
    pipe: Pipeline, tmp_path: Path
) -> None:
    from hub.phases.status import status

    ids, worktree = merged_not_cleaned(pipe, tmp_path)
    (merged,) = [
        t
        for t in ids
        if json.loads(pipe.ctx.for_task(t).handoff.contract.read_text("utf-8"))["status"] == "merged"
    ]
    (other,) = [t for t in ids if t != merged]
    # A person locked the worktree: `git worktree remove --force` refuses it on every run.
    git(pipe.repo, "worktree", "lock", "--reason", "on a USB disk", str(worktree))

    outcome = run_next(pipe.ctx)

    assert outcome.exit_code == 4
    assert "merged, but removing its worktree" in outcome.message
    assert outcome.data["ran"], "the other task's phase did not run"
    views = {view["task_id"]: view for view in status(pipe.ctx)["tasks"]}
    assert "locked working tree" in str(views[merged]["needs_person"])
    assert f"git worktree remove --force {worktree}" in str(views[merged]["needs_person"])

    git(pipe.repo, "worktree", "unlock", str(worktree))
    hub_next_alone_until_merged(pipe, ids)
    assert_merged_and_untouched(pipe)
    assert (pipe.ctx.handoff_root.archive / other / "TASK_CONTRACT.json").exists()


def test_an_attempt_stashed_by_a_recovery_killed_before_recording_it_is_never_merged_empty(
    pipe: Pipeline, tmp_path: Path
) -> None:
    from hub.repo import gitops

    ids = two_tasks(pipe, acceptance=["true"])
    hub_until_killed(pipe, tmp_path, {"HUB_TEST_CRASH_AT": "acceptance:running"})
    contracts = {t: json.loads(pipe.ctx.for_task(t).handoff.contract.read_text("utf-8")) for t in ids}
    task_id = next(
        t
        for t, c in contracts.items()
        if c["status"] == "implementation_in_progress"
        and git(Path(c["git"]["worktree"]), "status", "--porcelain")
    )
    path = pipe.ctx.for_task(task_id).handoff.contract
    contract = json.loads(path.read_text("utf-8"))
    worktree = Path(contract["git"]["worktree"])
    # Killed after marking the commit and before making it; then a recovery stashed the attempt's
    # edit and was killed before recording it: the marker is left, the tree clean, no commit made.
    contract["handoff_data"]["committing"] = {"attempt": 1, "parent": git(worktree, "rev-parse", "HEAD")}
    path.write_text(json.dumps(contract), encoding="utf-8")
    assert gitops.stash(gitops.open_repo(worktree), f"{task_id}/attempt-1-interrupted")

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)  # both changes on main: none merged empty


def test_a_status_temp_file_a_kill_left_after_the_last_task_is_swept_by_hub_next(pipe: Pipeline) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    pipe.ctx.handoff_root.ensure()
    left = pipe.ctx.handoff_root.dir / f".STATUS.md.{dead.pid}-0a1b2c3d.tmp"
    left.write_text("# Tasks\n", encoding="utf-8")

    assert run_next(pipe.ctx).message.startswith("nothing to do")

    assert not left.exists()


def test_the_judges_checkout_a_kill_left_goes_with_the_merged_task(pipe: Pipeline, tmp_path: Path) -> None:
    ids, worktree = merged_not_cleaned(pipe, tmp_path)
    merged = next(t for t in ids if worktree.name == t)
    judged = worktree.with_name(f".judge-{merged}")
    # A judge killed before its checkout was removed.
    git(pipe.repo, "worktree", "add", "-q", "--detach", str(judged), "HEAD")

    hub_next_alone_until_merged(pipe, ids)

    assert not judged.exists()
    assert_merged_and_untouched(pipe)
