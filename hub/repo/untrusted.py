"""Git operations that keep what a task's code wrote from reaching anything outside the sandbox: the
ignored files it leaves in its worktree, a fresh checkout of exactly the judged commit for the judge
command, the written edits a checkpoint did not commit, and the in-tree merge drivers a merge must not
obey (issue 28)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.atomic import write_bytes_atomic
from hub.core.errors import GitError
from hub.repo.gitops import common_dir, remove_worktree, restore_tracked, run, worktree_lock
from hub.repo.tree import remove_untracked

if TYPE_CHECKING:
    from git import Repo


def uncommitted(repo: Repo, files: Sequence[str]) -> list[str]:
    """Of `files`, those whose content in the work tree is not what HEAD has: changed, untracked or
    git-ignored (a written file git does not see is still not committed)."""
    if not files:
        return []
    out = run(
        repo,
        "status",
        "--porcelain=v1",
        "-z",
        "--ignored=matching",
        "--untracked-files=all",
        "--",
        *(f":(literal){f}" for f in files),
    )
    found: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) > 3:
            found.append(entry[3:])
            if entry[0] in "RC":
                next(entries, "")
    return sorted(set(found))


def remove_ignored(repo: Repo, keep: Sequence[str] = ()) -> list[str]:
    """Remove every git-ignored file from a task's worktree (and the folders that leaves empty) but
    those in `keep` (what the model's answers wrote: a written file git ignores is the uncommitted-edit
    check's to report, not this clean's to drop unseen). The worktree was checked out clean, so each is something a command
    wrote, and must not be there when the next run starts (a `json.pyc` the code wrote, or a
    `sitecustomize.py` in an ignored `.venv`, would run in it). Returns the paths removed. Never for the
    user's checkout: their ignored files are theirs."""
    root = Path(str(repo.working_tree_dir)).resolve()
    if not (root / ".git").is_file():
        raise GitError(f"{root} is not a linked worktree; its ignored files are not the hub's to remove")
    # Each ignored file by name (a nested repository as its folder, `x/`): a written file inside an
    # ignored folder stays while the rest of the folder goes.
    out = run(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
    kept = set(keep)
    removed = []
    for rel in (entry for entry in out.split("\0") if entry):
        if rel in kept or (rel.endswith("/") and any(k.startswith(rel) for k in kept)):
            continue
        if remove_untracked(root, rel):
            removed.append(rel)
    for folder in _stray_git_folders(root):
        if folder.is_symlink():
            folder.unlink(missing_ok=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.relative_to(root).as_posix() + "/")
    return removed


STRAY_WALK = 200_000  # entries at most: a huge tree costs a bounded walk


def _stray_git_folders(root: Path) -> list[Path]:
    """The folders named `.git` below the worktree's own: git never lists them (not as untracked, not as
    ignored), so a command could leave one holding anything, past every other clean-up (issue 38)."""
    found: list[Path] = []
    seen = 0
    for folder, names, _ in os.walk(root):
        seen += len(names)
        if Path(folder) == root:
            names[:] = [n for n in names if n != ".git"]
        elif ".git" in names:
            names.remove(".git")
            found.append(Path(folder) / ".git")
        if seen > STRAY_WALK:
            break
    return found


def keep_only(repo: Repo, written: Sequence[str]) -> list[str]:
    """Put every file of a task's worktree that is not in `written` (what the model's answers wrote)
    back as HEAD has it: untracked files removed, changed or deleted tracked files restored. What a
    command wrote there, even inside the allowed paths, is not the task's change and must not decide
    the next run or ride into the commit. Returns the paths put back."""
    keep = set(written)
    out = run(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    untracked: list[str] = []
    tracked: list[str] = []
    for entry in out.split("\0"):
        if len(entry) > 3 and entry[3:] not in keep:
            (untracked if entry[:2] == "??" else tracked).append(entry[3:])
    root = Path(str(repo.working_tree_dir)).resolve()
    for rel in untracked:
        remove_untracked(root, rel)
    restore_tracked(repo, tracked)
    return sorted(untracked + tracked)


@contextmanager
def judged_checkout(repo: Repo, commit: str, path: Path) -> Iterator[Path]:
    """A fresh, detached checkout of exactly `commit` at `path`, for a command that runs outside the
    sandbox (the judge): nothing a task's code wrote into its worktree (an ignored `json.pyc`, a
    `.claude/settings.local.json`, a `CLAUDE.local.md`) is in it. Removed afterwards, and before, if a
    killed run left one."""
    if path.exists():
        remove_worktree(repo, path)
        if path.exists():
            shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # --force: a registration a killed run left for a folder since deleted is reused, not an error.
    # Under the hub's worktree lock: another task's judge (hub next runs tasks side by side) removing
    # its checkout while git reads every record made this add fail ("failed to read .../commondir").
    with worktree_lock(repo):
        run(repo, "worktree", "add", "--quiet", "--detach", "--force", str(path), commit)
    try:
        yield path
    finally:
        remove_worktree(repo, path)


# Prepended to $GIT_DIR/info/attributes while the hub merges: that file outranks every in-tree
# .gitattributes (gitattributes(5), precedence), so a `* merge=union` (or `ours`, or a custom driver) that
# a task planted cannot resolve a conflict no judge saw; git's own text merge runs and a conflict halts
# `git_conflict`. The user's own lines stay after it, and a later line wins: their choices still hold.
# (git >= 2.41 has --attr-source, but reading no tree's attributes would drop eol and text settings too.)
MERGE_DRIVERS_OFF = (
    b"# agent-hub: in-tree merge drivers disregarded during its merge; removed after\n* !merge\n"
)


@contextmanager
def merge_drivers_off(repo: Repo) -> Iterator[None]:
    """In-tree merge drivers disregarded for the merges made inside (call under `merge_lock`). A block
    left by a killed hub is taken out first; the file is put back as the user had it afterwards."""
    path = common_dir(repo) / "info" / "attributes"
    before = path.read_bytes() if path.is_file() else None
    theirs = (before or b"").replace(MERGE_DRIVERS_OFF, b"")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, MERGE_DRIVERS_OFF + theirs)
    try:
        yield
    finally:
        if before is None or (not theirs and before == MERGE_DRIVERS_OFF):
            path.unlink(missing_ok=True)
        else:
            write_bytes_atomic(path, theirs)
