"""Git operations that keep what a task's code wrote from reaching anything outside the sandbox: the
ignored files it leaves in its worktree, a fresh checkout of exactly the judged commit for the judge
command, the written edits a checkpoint did not commit, the in-tree merge drivers a merge must not
obey (issue 28), and the links a task's code made (issue 38).

A link is never a legitimate answer to "change calc.py": code run by an acceptance command can replace a
tracked file or folder by one (`calc.py -> ~/.ssh/id_rsa`), and every unsandboxed reader after it (the
commit, the judge's checkout, the merge into the user's checkout) would follow it. So a change never
holds a link the task does not name exactly in `constraints.links_allowed` (set by a person):
`refuse_links` takes them out of the worktree before a commit, and `links_added` is the merge's last check.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.atomic import write_bytes_atomic
from hub.core.errors import GitError, NoSpace
from hub.core.files import is_linked
from hub.core.host_limits import free_space
from hub.core.text import listed
from hub.repo.gitops import common_dir, dirty_files, remove_worktree, restore_tracked, run, worktree_lock
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


LINK_MODE = "120000"


class LinkRefused(GitError):
    """A task's change made a symbolic link the task does not name; it was taken out of the worktree."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        super().__init__(
            f"the change holds symbolic links, never committed: {listed(paths, 10)}; they were removed "
            "from the task's worktree (tracked files put back)",
            hint="name the link exactly in the contract's constraints.links_allowed if the task is to add it",
        )


def refuse_links(repo: Repo, allowed: Sequence[str]) -> None:
    """Take every changed path that is a link, or lies beyond one (a folder the code replaced by a
    link), out of the worktree: the link removed, what HEAD tracks there put back. Links named exactly
    in `allowed` stay. Raises LinkRefused naming them; nothing otherwise."""
    root = Path(str(repo.working_tree_dir)).resolve()
    named = {a.strip("/") for a in allowed}
    linked = sorted(p for p in dirty_files(repo) if p not in named and is_linked(root, p))
    if not linked:
        return
    tracked = set(run(repo, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *linked).split("\0")) - {""}
    for rel in linked:
        current = root
        for part in Path(rel).parts:
            current = current / part
            if current.is_symlink():
                current.unlink()
                break
    restore_tracked(repo, sorted(tracked))
    raise LinkRefused(linked)


def links_added(repo: Repo, base: str, commit: str, allowed: Sequence[str]) -> list[str]:
    """The links `commit` adds or makes (a file or folder turned into one) against `base`, but those
    named exactly in `allowed`: git's objects read, never the file system."""
    named = {a.strip("/") for a in allowed}
    out = run(repo, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", f"{base}...{commit}")
    fields = iter(out.split("\0"))
    found = []
    for meta in fields:
        path = next(fields, "")
        parts = meta.split()
        if len(parts) >= 2 and parts[1] == LINK_MODE and path not in named:
            found.append(path)
    return sorted(found)


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
    try:
        with worktree_lock(repo):
            run(repo, "worktree", "add", "--quiet", "--detach", "--force", str(path), commit)
    except GitError as exc:
        # git says "unable to write file X" and often not why: a full disk is told by the space left.
        needed = _checkout_bytes(repo, commit)
        if "No space left on device" not in str(exc) and shutil.disk_usage(path.parent).free >= needed:
            raise
        # Issue 35: this halted git_error, and freeing space did not help. What the add wrote goes, the
        # task is untouched, and the next run tries again.
        remove_worktree(repo, path)
        shutil.rmtree(path, ignore_errors=True)
        raise NoSpace(
            f"no space for the judge's checkout {path} ({_unwritten(str(exc))}): it needs about "
            f"{needed / 1_000_000:.1f} MB, {free_space(path.parent)}",
            hint=f"free some space on the file system holding {path.parent}: the judge runs on the next "
            "`hub next`",
        ) from None
    try:
        yield path
    finally:
        remove_worktree(repo, path)


def _unwritten(git_said: str) -> str:
    """git's lines on what it could not write (the file and the error), from its full-disk failure."""
    lines = [line.strip() for line in git_said.splitlines() if "unable to" in line or "No space" in line]
    return "; ".join(dict.fromkeys(lines[:2])) or git_said.strip()[:300]


def _checkout_bytes(repo: Repo, commit: str) -> int:
    """The size of a checkout of `commit`: its files' bytes (git's own record of the worktree aside)."""
    sizes = (line.split()[3] for line in run(repo, "ls-tree", "-r", "-l", commit).splitlines())
    return sum(int(size) for size in sizes if size.isdigit())


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
