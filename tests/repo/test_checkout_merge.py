"""hub.repo.checkout_merge: the merge into the user's checkout is one step the hub can take back; what
does not finish is put back, the user's own changes kept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hub.core.errors import GitError
from hub.repo import checkout_merge
from hub.repo.checkout_merge import MARKER


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
