"""hub.repo.checkout_merge: the merge into the user's checkout is one step the hub can take back; what
does not finish is put back, the user's own changes kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hub.core.errors import GitError
from hub.repo import checkout_merge
from hub.repo.checkout_merge import MARKER
from hub.repo.gitops import MergeRefused


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
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A checkout on main with the user's unsaved README edit, and a task commit changing app.py."""
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    # The user's own identity, which the merge commit is made with (a fresh HOME has none).
    git(main, "config", "user.name", "t")
    git(main, "config", "user.email", "t@x.invalid")
    (main / "app.py").write_text("old\n", encoding="utf-8")
    (main / "README.md").write_text("# r\n", encoding="utf-8")
    git(main, "add", "-A")
    git(main, "commit", "-q", "-m", "base")
    git(main, "checkout", "-q", "-b", "task/t1")
    (main / "app.py").write_text("new\n", encoding="utf-8")
    git(main, "commit", "-q", "-am", "task")
    task = git(main, "rev-parse", "HEAD")
    git(main, "checkout", "-q", "main")
    (main / "README.md").write_text("the user's edit\n", encoding="utf-8")
    return main, task


def test_a_merge_lands_as_a_merge_commit_and_keeps_the_users_edit(repo: tuple[Path, str]) -> None:
    main, task = repo
    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1")
    assert git(main, "rev-parse", "main") == merge
    assert (
        git(main, "log", "-1", "--format=%P %s", "main")
        == f"{git(main, 'rev-parse', 'main~1')} {task} [TASK: t1] Merge task/t1"
    )
    assert (main / "app.py").read_text(encoding="utf-8") == "new\n"
    assert git(main, "status", "--porcelain") == "M README.md"
    assert not (main / ".git" / MARKER).exists()


def test_a_branch_move_that_fails_after_the_files_changed_puts_them_back(repo: tuple[Path, str]) -> None:
    main, task = repo
    before = git(main, "rev-parse", "main")
    # A hook that refuses the branch's update: the checkout's files are written by then.
    hook = main / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        '#!/bin/sh\n[ "$1" = prepared ] && grep -q refs/heads/main && exit 1\nexit 0\n', encoding="utf-8"
    )
    hook.chmod(0o755)

    with pytest.raises(GitError, match="moving the branch"):
        checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1")

    assert git(main, "rev-parse", "main") == before
    assert (main / "app.py").read_text(encoding="utf-8") == "old\n"
    assert (main / "README.md").read_text(encoding="utf-8") == "the user's edit\n"
    assert git(main, "status", "--porcelain") == "M README.md"
    assert not (main / ".git" / MARKER).exists()


def test_a_step_a_kill_left_is_taken_back_and_one_that_moved_the_branch_is_finished(
    repo: tuple[Path, str],
) -> None:
    main, task = repo
    old = git(main, "rev-parse", "HEAD")
    tree = git(main, "merge-tree", "--write-tree", old, task)
    merge = git(main, "commit-tree", tree, "-p", old, "-p", task, "-m", "m")
    # Killed between the checkout step and the branch's move: files and index at the merge.
    (main / ".git" / MARKER).write_text(f"{merge} {old} {task}\n", encoding="utf-8")
    git(main, "read-tree", "-m", "-u", old, merge)
    assert (main / "app.py").read_text(encoding="utf-8") == "new\n"

    checkout_merge.recover(main, main / ".git")

    assert (main / "app.py").read_text(encoding="utf-8") == "old\n"
    assert git(main, "status", "--porcelain") == "M README.md"
    assert not (main / ".git" / MARKER).exists()

    # Killed after the branch moved, before the marker went: nothing to undo.
    (main / ".git" / MARKER).write_text(f"{merge} {old} {task}\n", encoding="utf-8")
    git(main, "read-tree", "-m", "-u", old, merge)
    git(main, "update-ref", "HEAD", merge, old)
    checkout_merge.recover(main, main / ".git")
    assert (main / "app.py").read_text(encoding="utf-8") == "new\n"
    assert git(main, "status", "--porcelain") == "M README.md"
    assert not (main / ".git" / MARKER).exists()


def test_a_file_edited_after_the_kill_is_kept_as_it_is(repo: tuple[Path, str]) -> None:
    main, task = repo
    old = git(main, "rev-parse", "HEAD")
    tree = git(main, "merge-tree", "--write-tree", old, task)
    merge = git(main, "commit-tree", tree, "-p", old, "-p", task, "-m", "m")
    (main / ".git" / MARKER).write_text(f"{merge} {old} {task}\n", encoding="utf-8")
    git(main, "read-tree", "-m", "-u", old, merge)
    (main / "app.py").write_text("the user's later edit\n", encoding="utf-8")

    checkout_merge.recover(main, main / ".git")

    assert (main / "app.py").read_text(encoding="utf-8") == "the user's later edit\n"
    assert git(main, "diff", "--cached", "--name-only") == ""


def test_a_file_the_user_only_touched_is_not_a_change(repo: tuple[Path, str]) -> None:
    main, task = repo
    app = main / "app.py"
    later = app.stat().st_mtime + 10
    os.utime(app, (later, later))  # an editor's save or `touch`: a new mtime, the same content

    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=_no_pause)

    assert git(main, "rev-parse", "main") == merge
    assert app.read_text(encoding="utf-8") == "new\n"


def _no_pause(seconds: float) -> None:
    raise AssertionError(f"the merge paused {seconds} s with nothing in its way")


def _fire_once(main: Path, script: str) -> None:
    """A post-index-change hook that runs `script` as the user the first time git writes the index while
    updating the work tree ($1 = 1): right after the merge's read-tree, before its branch move."""
    hook = main / ".git" / "hooks" / "post-index-change"
    hook.write_text(
        f'#!/bin/sh\n[ "$1" = 1 ] && [ -f .git/fire ] || exit 0\nrm .git/fire\n{script}\nexit 0\n',
        encoding="utf-8",
    )
    hook.chmod(0o755)
    (main / ".git" / "fire").write_text("", encoding="utf-8")


@pytest.mark.parametrize(
    "commit",
    [
        "git commit -q -m 'the user commits their README' -o README.md",
        "git commit -q -am 'the user commits everything staged, the task file included'",
    ],
)
def test_a_commit_of_the_users_during_the_merge_is_kept_and_the_merge_follows(
    repo: tuple[Path, str], commit: str
) -> None:
    main, task = repo
    _fire_once(main, commit)
    pauses: list[float] = []

    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=pauses.append)

    users = git(main, "rev-parse", f"{merge}^1")
    assert git(main, "log", "-1", "--format=%s", users).startswith("the user commits")
    assert git(main, "rev-parse", f"{merge}^2") == task
    assert git(main, "rev-parse", "main") == merge
    assert (main / "app.py").read_text(encoding="utf-8") == "new\n"
    assert (main / "README.md").read_text(encoding="utf-8") == "the user's edit\n"
    assert git(main, "status", "--porcelain") == ""
    assert pauses  # tried again, not halted
    assert not (main / ".git" / MARKER).exists()


def test_an_index_lock_the_users_git_holds_is_waited_for_then_the_merge_goes_ahead(
    repo: tuple[Path, str],
) -> None:
    main, task = repo
    lock = main / ".git" / "index.lock"
    held = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # open, as a live git holds it

    def user_git_finishes(seconds: float) -> None:
        os.close(held)
        lock.unlink()

    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=user_git_finishes)

    assert git(main, "rev-parse", "main") == merge
    assert git(main, "status", "--porcelain") == "M README.md"


def test_taking_a_merge_back_waits_for_the_users_index_lock_and_leaves_nothing_of_the_task(
    repo: tuple[Path, str],
) -> None:
    main, task = repo
    # The user commits their README while the merge runs, and their next git takes the index lock.
    _fire_once(main, "git commit -q -m 'the user commits their README' -o README.md && : > .git/index.lock")
    users: list[str] = []

    def user_git_finishes(seconds: float) -> None:
        lock = main / ".git" / "index.lock"
        if lock.exists():
            # The task's file is still in the user's index: the take-back waits rather than stop here.
            assert git(main, "diff", "--cached", "--name-only") == "app.py"
            users.append(git(main, "rev-parse", "HEAD"))
            lock.unlink()

    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=user_git_finishes)

    assert users and git(main, "rev-parse", f"{merge}^1") == users[0]
    assert git(main, "rev-parse", f"{merge}^2") == task
    assert (main / "app.py").read_text(encoding="utf-8") == "new\n"
    assert git(main, "status", "--porcelain") == ""


def test_a_step_a_kill_left_under_a_commit_of_the_users_leaves_nothing_of_the_task_in_their_index(
    repo: tuple[Path, str],
) -> None:
    main, task = repo
    old = git(main, "rev-parse", "HEAD")
    tree = git(main, "merge-tree", "--write-tree", old, task)
    merge = git(main, "commit-tree", tree, "-p", old, "-p", task, "-m", "m")
    (main / ".git" / MARKER).write_text(f"{merge} {old} {task}\n", encoding="utf-8")
    git(main, "read-tree", "-m", "-u", old, merge)
    # Killed before the branch moved; then the user commits their README (the task's file staged).
    git(main, "commit", "-q", "-m", "the user's README", "-o", "README.md")

    checkout_merge.recover(main, main / ".git")

    assert git(main, "log", "-1", "--format=%s") == "the user's README"
    assert (main / "app.py").read_text(encoding="utf-8") == "old\n"
    assert git(main, "status", "--porcelain") == ""
    assert not (main / ".git" / MARKER).exists()


def test_an_index_lock_taken_while_the_merge_is_made_makes_it_try_again(repo: tuple[Path, str]) -> None:
    main, task = repo
    hook = main / ".git" / "hooks" / "pre-merge-commit"  # run after the hub cleared stale locks
    hook.write_text(
        "#!/bin/sh\n[ -f .git/fire ] && rm .git/fire && : > .git/index.lock\nexit 0\n", encoding="utf-8"
    )
    hook.chmod(0o755)
    (main / ".git" / "fire").write_text("", encoding="utf-8")
    pauses: list[float] = []

    def user_git_finishes(seconds: float) -> None:
        pauses.append(seconds)
        (main / ".git" / "index.lock").unlink()

    merge = checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=user_git_finishes)

    assert pauses
    assert git(main, "rev-parse", "main") == merge
    assert git(main, "status", "--porcelain") == "M README.md"


def test_a_user_whose_commits_keep_moving_the_branch_makes_the_merge_wait_with_nothing_of_it_left(
    repo: tuple[Path, str],
) -> None:
    main, task = repo
    git(main, "commit", "-q", "-am", "the user's README")
    # Every time git updates the work tree and writes the index (the merge's read-tree among them), the
    # user commits a line of their log.
    hook = main / ".git" / "hooks" / "post-index-change"
    hook.write_text(
        '#!/bin/sh\n[ "$1" = 1 ] || exit 0\necho entry >> log.md\ngit add log.md\n'
        "git commit -q -m 'the user logs' -o log.md\nexit 0\n",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    pauses: list[float] = []

    with pytest.raises(MergeRefused, match="a commit moved the branch") as refused:
        checkout_merge.merge_in_checkout(main, task, "[TASK: t1] Merge task/t1", sleep=pauses.append)

    assert "hub next" in refused.value.hint
    assert pauses == list(checkout_merge.RETRY_PAUSES)
    assert git(main, "log", "-1", "--format=%s") == "the user logs"
    assert subprocess.run(["git", "merge-base", "--is-ancestor", task, "HEAD"], cwd=main).returncode == 1
    assert (main / "app.py").read_text(encoding="utf-8") == "old\n"
    assert git(main, "status", "--porcelain", "--", "app.py") == ""  # the hook's own log.md may be in flight
    assert not (main / ".git" / MARKER).exists()
