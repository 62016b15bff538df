"""What a killed git leaves behind, and clearing it the way git's own lockfile rules say: a lock file is
stale once no live git can hold it, and one a live git may hold is never touched. Lock files and
worktree records are found by reading the git directories, not by running git (which would fail on the
very lock it meets); a record another process removes meanwhile is simply gone. Also: a merge of the
hub's own left half done, a worktree whose `git worktree add` never finished ("initializing").

A lock a live git may hold is waited for a moment (git's own commands end within a second); if it is
still held, GitBusy (exit 75: try later), never a halt: the caller halts only when it persists."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from hub.core.errors import GitError, LockBusy
from hub.core.log import get_logger

log = get_logger(__name__)

# Lock files git creates beside what it is changing; a git killed mid-way leaves them, and every later
# git command that needs one fails ("Unable to create '.../index.lock': File exists").
# `packed-refs.new` is the temp file git rewrites packed-refs into (a ref deleted): created exclusively
# like a lock, and left by a kill the same way ("unable to create file .../packed-refs.new: File exists").
SHARED_LOCKS = ("packed-refs.lock", "packed-refs.new", "config.lock", "shallow.lock")
TOP_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", *SHARED_LOCKS)

# How long a lock held by a live git is waited for before "try later": git's commands finish in well
# under this; a `hub next` killed by PID leaves its git child finishing for a moment.
LIVE_GIT_WAIT_SECONDS = 3.0
# What `git worktree add` writes into the worktree's `locked` file until it has finished.
ADD_UNFINISHED = "initializing"


class GitBusy(LockBusy):
    """A git lock file is held by a live git process: try later (exit 75)."""

    def __init__(self, lock: Path, pids: list[int], work_root: Path, holder: str = "a running git") -> None:
        self.lock = lock
        self.pids = pids
        self.holder = holder
        super().__init__(
            f"{lock} is held by {holder} (pid {', '.join(map(str, pids))})",
            hint=f"try later: wait for it to finish; if no git runs in {work_root}, delete {lock}",
        )


def read_gone(path: Path) -> str | None:
    """A git administrative file's text, or None when it is not there (another process may remove a
    worktree's record at any moment: gone is gone, not an error)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_bytes_gone(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def git_dirs(work_root: Path) -> tuple[Path, Path] | None:
    """(git dir, common dir) of a work tree without running git; None when there is no .git."""
    dot = work_root / ".git"
    if dot.is_dir():
        return dot, dot
    text = read_gone(dot) if dot.is_file() else None
    if text is None or not text.strip().startswith("gitdir:"):
        return None
    git_dir = (work_root / text.strip().removeprefix("gitdir:").strip()).resolve()
    common_text = read_gone(git_dir / "commondir")
    common = (git_dir / common_text.strip()).resolve() if common_text else git_dir
    return git_dir, common


def common_of(work_root: Path) -> Path:
    """The repository's common git dir, seen from a work tree (the work tree's .git when unknown)."""
    dirs = git_dirs(work_root)
    return dirs[1] if dirs else work_root / ".git"


# How long a worktree folder set aside as `<task>.broken-<ns>` (a half-made checkout, see gitops'
# _make_worktree) is kept for a person to look at before a phase removes it (issue 35: never removed).
SET_ASIDE_KEEP_SECONDS = 7 * 24 * 3600


def remove_stale_set_asides(worktrees: Path, now: float) -> list[Path]:
    """Remove the set-aside worktree folders in `worktrees` older than SET_ASIDE_KEEP_SECONDS (by the
    time in their name; one from a clock ahead of ours is kept). The folders removed."""
    import shutil

    removed = []
    for folder in worktrees.glob("*.broken-*") if worktrees.is_dir() else ():
        stamp = folder.name.rpartition(".broken-")[2]
        if not stamp.isdigit() or now - int(stamp) / 1e9 <= SET_ASIDE_KEEP_SECONDS or not folder.is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        log.info("worktree.set_aside_removed", path=str(folder))
        removed.append(folder)
    return removed


def linked_worktrees(common: Path) -> list[tuple[Path, Path]]:
    """(record folder `.git/worktrees/<id>`, work tree) of every linked worktree; records removed while
    they are read are left out."""
    found = []
    records = common / "worktrees"
    try:
        entries = sorted(records.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    for record in entries:
        text = read_gone(record / "gitdir")
        if text and text.strip():
            found.append((record, Path(text.strip()).parent))
    return found


def worktree_record(common: Path, tree: Path) -> Path | None:
    """The record folder git keeps for the linked worktree at `tree` (None: it has none)."""
    wanted = tree.resolve()
    for record, path in linked_worktrees(common):
        if path.resolve() == wanted:
            return record
    return None


def leftover_locks(work_root: Path, shared_only: bool = False) -> list[Path]:
    """The lock files in the work tree's git dir, its common dir and the shared refs (only the ones
    every worktree shares, with `shared_only`)."""
    dirs = git_dirs(work_root)
    if dirs is None:
        return []
    git_dir, common = dirs
    found = [common / name for name in SHARED_LOCKS if (common / name).exists()]
    if not shared_only:
        # Every `*.lock` git made there (index.lock, HEAD.lock, a stash's temporary index's lock...),
        # but the hub's own (hub-merge.lock: held by a live hub through the kernel, never stale).
        found = sorted(
            {
                *found,
                *(d / name for d in {git_dir, common} for name in TOP_LOCKS if (d / name).exists()),
                *(p for d in {git_dir, common} for p in d.glob("*.lock") if not p.name.startswith("hub-")),
            }
        )
    # A ref folder removed while it is walked (a branch deleted) took its lock with it.
    with suppress(OSError):
        found += sorted((common / "refs").rglob("*.lock"))
    return found


def live_git_in(work_root: Path, proc: Path = Path("/proc"), lock: Path | None = None) -> list[int] | None:
    """Process ids of live git processes that may hold `lock` (default: any lock of the repository);
    None when that cannot be known (no /proc: not Linux), in which case no lock may be cleared.

    A lock in a linked worktree's own git dir (its index, its HEAD) can only be held by a git working
    in that worktree; a shared one (refs, packed-refs) by a git in any worktree of the repository."""
    if not proc.is_dir():
        return None
    roots = [work_root.resolve()]
    dirs = git_dirs(work_root)
    if dirs:
        git_dir, common = dirs
        roots.append(git_dir.resolve())
        private = lock is not None and git_dir != common and lock.parent.resolve() == git_dir.resolve()
        if not private:
            roots.append(common.resolve())
            # Every worktree of the repository shares its refs: a git in any of them may hold a ref lock.
            roots += [tree.resolve() for _, tree in linked_worktrees(common)]
            roots.append(common.resolve().parent)  # the main work tree, seen from a linked worktree
    live = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "comm").read_text(encoding="utf-8").startswith("git"):
                continue
        except OSError:
            continue
        # `cat-file` (GitPython's helpers, ours and other hubs') takes no lock. Every other git counts,
        # our own children too: another task's phase in a thread of this process may be mid-commit.
        if b"\0cat-file\0" in (read_bytes_gone(entry / "cmdline") or b""):
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except FileNotFoundError:
            continue  # it ended between the two reads: it holds nothing
        except OSError:
            live.append(int(entry.name))  # a git whose folder we cannot see: assume it is in ours
            continue
        if any(cwd == r or cwd.is_relative_to(r) for r in roots):
            live.append(int(entry.name))
    return live


def open_by(path: Path, proc: Path = Path("/proc")) -> list[int]:
    """Process ids that have `path` open (those whose /proc entries this user may read)."""
    wanted = str(path)
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue  # ended meanwhile, or another user's
        if wanted in links:
            found.append(int(entry.name))
    return found


def clear_locks(
    work_root: Path,
    shared_only: bool = False,
    wait_seconds: float = LIVE_GIT_WAIT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Remove the lock files a killed git left in this repository. A lock some live git may hold is
    waited for (up to `wait_seconds`); still held then: GitBusy (try later). Without /proc nothing can
    be known: GitError naming the locks."""
    done: list[str] = []
    deadline = time.monotonic() + wait_seconds
    for lock in leftover_locks(work_root, shared_only):
        while True:
            seen = _identity(lock)
            live = live_git_in(work_root, lock=lock)
            holder = "a running git"
            if live == []:
                # No git could hold it; a process that has it open does (a libgit2 tool, an IDE).
                live, holder = open_by(lock), "a process that has it open"
            if live is None:
                raise GitError(
                    f"{lock} exists and git may hold it (cannot tell here)",
                    hint=f"if no git is running in {work_root}, delete {lock}",
                )
            if seen is None:
                break  # released meanwhile
            if not live:
                # The same file as before the look found no git alive: stale. A git that starts now
                # cannot have made it (git creates a lock exclusively), so it is ours to remove.
                if _identity(lock) == seen:
                    lock.unlink(missing_ok=True)
                    done.append(f"removed {lock} left by a killed git")
                    break
                continue
            if time.monotonic() >= deadline:
                raise GitBusy(lock, live, work_root, holder)
            sleep(0.05)
    for line in done:
        log.warning("git.recovered", detail=line)
    return done


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def unfinished_add(common: Path, tree: Path) -> Path | None:
    """The `locked` file of a worktree whose `git worktree add` never finished (git writes
    "initializing" there and removes it as its last step), when no live git is still adding it."""
    record = worktree_record(common, tree)
    if record is None:
        return None
    locked = record / "locked"
    if (read_gone(locked) or "").strip() != ADD_UNFINISHED:
        return None
    live = live_git_in(tree, lock=locked)
    if live:
        raise GitBusy(locked, live, tree)
    return locked


def clear_leftovers(work_root: Path) -> list[str]:
    """Remove the lock files a killed git left, and undo a merge the hub itself left half done in the
    task's worktree. Called under the hub's OS lock, so no hub phase is running git here."""
    done = clear_locks(work_root)
    dirs = git_dirs(work_root)
    if dirs and (dirs[0] / "MERGE_HEAD").exists():
        message = read_gone(dirs[0] / "MERGE_MSG") or ""
        if "[TASK: " not in message:
            raise GitError(
                f"a merge is in progress in {work_root} that the hub did not start",
                hint="finish it (`git commit`) or abandon it (`git merge --abort`)",
            )
        undo_merge(work_root)
        done.append("undid the hub's own merge left half done by a kill")
        log.warning("git.recovered", detail=done[-1])
    return done


def undo_merge(
    checkout: Path,
    head: str | None = None,
    commit: str | None = None,
    tree: str | None = None,
    clean_before: bool = False,
) -> list[str]:
    """Take back a merge the hub started in `checkout` and did not finish: of `commit` (default:
    MERGE_HEAD) into `head` (default: HEAD), or to `tree` when given; the files kept as they are
    (someone's edits since), as paths. Every file the merge does not change, the user's uncommitted
    changes among them, is left alone.

    git only merges into files that are clean, so each file the merge changes holds HEAD's version,
    the merge's, or (a kill or a full disk mid-write) neither; the first two go back to HEAD's version
    in the index and the work tree, and with `clean_before` (the caller saw them clean) the third too.
    Unlike `git merge --abort`, this also works when the index and the work tree disagree ("Entry 'x'
    not uptodate. Cannot merge")."""

    def git(*args: str, check: bool = True) -> str:
        done = subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise GitError(
                f"git {' '.join(args[:2])} in {checkout} failed: {done.stderr.strip()}"
                f"{space_note(done.stderr, checkout)}"
            )
        return done.stdout

    head = head or git("rev-parse", "HEAD").strip()
    commit = commit or git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).strip()
    if tree is None and commit:
        # The tree the merge was writing (exit 1 on a conflict still prints it first).
        tree = git("merge-tree", "--write-tree", "--no-messages", head, commit, check=False).split("\n")[0]
    kept: list[str] = []
    if tree:
        changed = [p for p in git("diff", "--name-only", "-z", "--no-renames", head, tree).split("\0") if p]
        for path in changed:
            ours = _blob(git("ls-tree", "-z", head, "--", path))
            theirs = _blob(git("ls-tree", "-z", tree, "--", path))
            file = checkout / path
            now = git("hash-object", "--", path).strip() if file.is_file() else None
            if not clean_before and now not in {ours, theirs}:
                kept.append(path)
                git("reset", "-q", head, "--", path)  # the index only: the file as it is now stays
            elif ours is not None:
                git("checkout", "-q", head, "--", path)
            else:
                git("rm", "-q", "--cached", "--ignore-unmatch", "--", path)
                file.unlink(missing_ok=True)
    if git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).strip():
        git("merge", "--quit")  # forget the merge; the index and work tree are as put back above
    log.warning("merge.undone", checkout=str(checkout), kept=kept)
    return kept


def _blob(ls_tree: str) -> str | None:
    """The object id from one `git ls-tree -z` entry (None: no such path)."""
    fields = ls_tree.split("\t", 1)[0].split()
    return fields[2] if len(fields) == 3 else None


def space_note(git_said: str, where: Path) -> str:
    """For git's "No space left on device": how much space is free, and where."""
    if "No space left on device" not in git_said:
        return ""
    from hub.core.host_limits import free_space

    return f"; {free_space(where)}"
