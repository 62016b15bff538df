"""hub.repo.killed_git: git's leftovers are cleared by git's own lockfile rule (stale once no live git
could hold it), a live holder is waited for then "try later", and records another process removes
meanwhile are simply gone."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from hub.repo import gitops, killed_git
from hub.repo.killed_git import GitBusy, clear_locks, live_git_in


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x.invalid", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    git(main, "commit", "-q", "--allow-empty", "-m", "x")
    return main


@contextmanager
def running_git(
    repo: Path, args: tuple[str, ...], line: str, answered: Callable[[str], bool]
) -> Iterator[subprocess.Popen[str]]:
    """A git started by this very process (as another task's phase in a thread starts one), running in
    the repository until its stdin closes; its answer to `line` is the event that says it runs."""
    proc = subprocess.Popen(
        ["git", *args], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    assert answered(proc.stdout.readline())
    try:
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def hash_object(repo: Path) -> AbstractContextManager[subprocess.Popen[str]]:
    return running_git(repo, ("hash-object", "--stdin-paths"), "/dev/null", lambda a: len(a.strip()) == 40)


@pytest.fixture
def live_git(repo: Path) -> Iterator[subprocess.Popen[str]]:
    with hash_object(repo) as proc:
        yield proc


def test_a_git_this_process_started_counts_as_live_and_a_cat_file_helper_does_not(
    repo: Path, live_git: subprocess.Popen[str]
) -> None:
    with running_git(repo, ("cat-file", "--batch-check"), "HEAD", lambda answer: "commit" in answer):
        assert live_git_in(repo) == [live_git.pid]


def test_a_lock_no_live_git_holds_is_removed_and_one_a_live_git_may_hold_is_try_later(
    repo: Path, tmp_path: Path
) -> None:
    stale = repo / ".git" / "refs" / "heads" / "task" / "t1.lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("", encoding="utf-8")
    (repo / ".git" / "packed-refs.new").write_text("", encoding="utf-8")

    assert len(clear_locks(repo, shared_only=True)) == 2
    assert not stale.exists() and not (repo / ".git" / "packed-refs.new").exists()

    held = repo / ".git" / "index.lock"
    held.write_text("", encoding="utf-8")
    with hash_object(repo) as proc:
        with pytest.raises(GitBusy, match="held by a running git") as busy:
            clear_locks(repo, wait_seconds=0)
        assert busy.value.exit_code == 75 and busy.value.pids == [proc.pid]
        assert held.exists()
    # Ended: the same lock is stale now.
    clear_locks(repo, wait_seconds=0)
    assert not held.exists()


def test_the_hubs_own_merge_lock_is_never_taken_for_a_leftover(repo: Path) -> None:
    (repo / ".git" / "hub-merge.lock").write_text("", encoding="utf-8")
    assert clear_locks(repo) == []
    assert (repo / ".git" / "hub-merge.lock").exists()


def test_a_worktree_record_removed_while_it_is_read_is_gone_not_an_error(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    # Another task's clean-up between git's two steps: the record's folder is there, its gitdir not.
    (repo / ".git" / "worktrees" / "half").mkdir()

    assert [tree for _, tree in killed_git.linked_worktrees(repo / ".git")] == [other]
    assert gitops.rebasing(gitops.open_repo(repo)) == {}


def test_an_add_git_never_finished_is_found_and_one_that_finished_is_not(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    common = repo / ".git"
    assert killed_git.unfinished_add(common, other) is None
    locked = common / "worktrees" / "other" / "locked"
    locked.write_text("initializing", encoding="utf-8")
    assert killed_git.unfinished_add(common, other) == locked
    locked.write_text("on a USB disk", encoding="utf-8")  # a person's own lock: not ours
    assert killed_git.unfinished_add(common, other) is None


def test_a_removal_git_started_is_finished_and_the_branch_kept(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "task"
    git(repo, "worktree", "add", "-q", "-b", "task/t1", str(tree))
    (tree / "build.out").write_text("x\n", encoding="utf-8")
    (tree / ".git").unlink()  # `git worktree remove` killed after deleting the `.git` file

    gitops.remove_worktree(gitops.open_repo(repo), tree)

    assert not tree.exists()
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "branch", "--list", "task/t1")


def test_a_lock_another_process_has_open_is_not_removed(repo: Path) -> None:
    held = repo / ".git" / "index.lock"
    held.write_text("", encoding="utf-8")
    # Not a git (a libgit2 tool, an IDE): the open file is what says it holds the lock.
    with held.open("rb") as handle:
        holder = subprocess.Popen(
            ["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(handle.fileno(),)
        )
    try:
        with pytest.raises(GitBusy) as busy:
            clear_locks(repo, wait_seconds=0)
        assert busy.value.pids == [holder.pid]
        assert held.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    clear_locks(repo, wait_seconds=0)
    assert not held.exists()
