"""Merging a task into the branch checked out in the user's checkout, without ever leaving it mid-merge.

`git merge` there is not one step: it writes MERGE_HEAD, updates files one by one, and when anything
fails it runs `reset --hard` then `stash apply` to put the user's changes back; a kill or a full disk
between those leaves the checkout mid-merge, or their uncommitted edits only in a dangling stash. So
the merge is built in the object store (`merge-tree --write-tree`, the checkout's merge hooks, then
`commit-tree`), and the checkout sees one step the hub can undo: a two-way `read-tree -m -u` from the
old commit to the merge (which refuses before writing anything when a file it changes has local
changes, and never touches any other file), then the branch moved with `update-ref` only if nobody
moved it meanwhile. While that step runs, `HUB_MERGE` in the checkout's git dir names it; a later run
that finds it finishes it (the branch was moved) or takes it back, file by file.

The person keeps working in that checkout meanwhile, and the hub shares it as one git shares it with
another: their commit that moves the branch under the merge, or their git holding `index.lock`, makes
the merge try again (a few times, with pauses), then wait for the next `hub next`; never a halt. Taking
a merge back waits for their lock rather than stop half-way, puts each file the merge changed back to
what HEAD holds now (their commit may have taken the task's version in), and checks that nothing of the
hub's is left. The index is refreshed first, so a file only touched (a new mtime) is not a change.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from hub.core.atomic import write_atomic
from hub.core.errors import GitError
from hub.core.log import get_logger
from hub.repo import killed_git
from hub.repo.gitops import MergeRefused, your_checkout
from hub.repo.identity import commit_args

log = get_logger(__name__)

MARKER = "HUB_MERGE"  # "<merge commit> <old head> <task commit>" while the checkout step runs
MESSAGE_FILE = "HUB_MERGE_MSG"
# What git's two-way read-tree says when a file the merge changes has local changes (nothing written).
_REFUSED = re.compile(r"(?:Entry|file) '([^']+)'(?: is)? (?:not uptodate|would be overwritten)")
# What git says when another git (the user's) holds a lock it needs; git takes its locks before it
# writes anything, so the command changed nothing.
_LOCKED = re.compile(r"Unable to create '([^']+\.lock)': File exists|cannot lock ref")
# Pauses between tries when the user's git is in the way (their commit, their index.lock): git's own
# commands end within a second, a person's commit with its hooks within a few; then the task waits for
# the next `hub next`.
RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 4.0)
# Pauses while taking a merge back waits for the user's index.lock: stopping half-way would leave the
# task's files in their index, so this waits longer; then "try later", the marker kept for the next run.
PUT_BACK_PAUSES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0)

Sleep = Callable[[float], None]


class _TryAgain(Exception):
    """The user's git moved the branch or held a lock during the merge; nothing of the hub's is left."""


class _Locked(Exception):
    """A git command met a lock another git holds; it changed nothing."""

    def __init__(self, said: str) -> None:
        found = _LOCKED.search(said)
        self.lock = found.group(1) if found and found.group(1) else "a ref lock"
        super().__init__(f"{self.lock} was held by another git")


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True, check=False)


def _out(checkout: Path, *args: str) -> str:
    done = _git(checkout, *args)
    if done.returncode != 0:
        said = done.stderr.strip()
        raise GitError(
            f"git {' '.join(args[4:6] if args[:1] == ('-c',) else args[:2])} in {checkout} failed: "
            f"{said}{killed_git.space_note(said, checkout)}"
        )
    return done.stdout.strip()


def merge_in_checkout(checkout: Path, commit: str, message: str, sleep: Sleep = time.sleep) -> str:
    """Merge `commit` into the branch checked out at `checkout` (a merge commit, as `--no-ff`); the
    merge commit. Call only after `merge_conflicts` found none. MergeRefused, with nothing touched, when
    the checkout has staged changes, a merge of its own, or local changes in a file the merge changes,
    or when the user's git kept moving the branch or holding its locks through every try."""
    pauses = iter(RETRY_PAUSES)
    while True:
        try:
            return _merge_once(checkout, commit, message, sleep)
        except _TryAgain as exc:
            pause = next(pauses, None)
            if pause is None:
                raise MergeRefused(
                    checkout,
                    [],
                    "",
                    f"merge waits: in {your_checkout(checkout)}, {exc}",
                    hint="nothing to do: `hub next` tries again (your commits are kept)",
                ) from None
            log.info("merge.retry", checkout=str(checkout), why=str(exc), pause=pause)
            sleep(pause)


def _merge_once(checkout: Path, commit: str, message: str, sleep: Sleep) -> str:
    try:
        killed_git.clear_locks(checkout, sleep=sleep)  # a git killed there leaves its index.lock
    except killed_git.GitBusy as exc:
        raise _TryAgain(f"{exc.lock} was held by {exc.holder}") from None
    git_dir = Path(_out(checkout, "rev-parse", "--absolute-git-dir"))
    recover(checkout, git_dir, sleep)
    merge_head = _git(checkout, "rev-parse", "-q", "--verify", "MERGE_HEAD").stdout.strip()
    if merge_head and _finished_by_older_hub(checkout, git_dir, merge_head):
        # A `git merge` of an older hub killed after its commit, before it forgot the merge.
        _out(checkout, "merge", "--quit")
        merge_head = ""
    if merge_head == commit:
        # A `git merge` of an older hub, killed midway: take it back, then merge again.
        killed_git.undo_merge(checkout)
    elif merge_head:
        raise MergeRefused(
            checkout,
            [],
            "",
            f"merge waits: {your_checkout(checkout)} is in the middle of a merge of its own",
            hint="finish it",
        )
    # As `git merge` does: staged changes are the user's work in progress; the merge waits for them.
    staged = [p for p in _out(checkout, "diff", "--cached", "--name-only", "-z").split("\0") if p]
    if staged:
        raise MergeRefused(checkout, staged, "")
    old = _out(checkout, "rev-parse", "HEAD")
    tree = _git(checkout, "merge-tree", "--write-tree", "--no-messages", old, commit)
    if tree.returncode != 0:
        raise GitError(f"git merge-tree in {checkout} failed: {(tree.stderr or tree.stdout).strip()}")
    text = _run_hooks(checkout, git_dir, message)
    merge = _out(
        checkout,
        *commit_args(checkout),
        "commit-tree",
        tree.stdout.split("\n")[0],
        "-p",
        old,
        "-p",
        commit,
        "-m",
        text,
    )
    # As `git status` does: a file only touched (an editor, a formatter, `touch`) has a new mtime and the
    # same content; without this, read-tree takes it for a local change and the merge waits forever.
    refreshed = _git(checkout, "update-index", "-q", "--refresh")
    if refreshed.returncode == 128 and not refreshed.stderr.strip():
        # With -q, update-index that cannot take index.lock exits 128 without a word (builtin/update-index.c).
        raise _TryAgain(f"{git_dir / 'index.lock'} was held by another git")
    if refreshed.returncode != 0:
        said = refreshed.stderr.strip()
        raise GitError(
            f"refreshing the index of {checkout} failed: {said}{killed_git.space_note(said, checkout)}"
        )
    if _out(checkout, "rev-parse", "HEAD") != old:
        raise _TryAgain("a commit moved the branch while the merge was being made")
    marker = git_dir / MARKER
    write_atomic(marker, f"{merge} {old} {commit}\n")
    checked_out = _git(checkout, "read-tree", "-m", "-u", old, merge)
    if checked_out.returncode != 0:
        said = checked_out.stderr.strip()
        refused = _REFUSED.findall(said)
        if refused or _LOCKED.search(said):
            marker.unlink(missing_ok=True)  # git checks every file before writing any: nothing written
            if refused:
                raise MergeRefused(checkout, refused, said)
            raise _TryAgain(str(_Locked(said)))
        put_back(checkout, old, merge, sleep, clean=True)
        marker.unlink(missing_ok=True)
        raise GitError(
            f"updating {checkout} to the merge failed: {said}{killed_git.space_note(said, checkout)}"
        )
    moved = _git(checkout, "update-ref", "-m", f"merge {commit}: Merge made by the hub", "HEAD", merge, old)
    if moved.returncode != 0:
        said = moved.stderr.strip()
        head = _out(checkout, "rev-parse", "HEAD")
        if head == old and not _LOCKED.search(said):
            put_back(checkout, old, merge, sleep, clean=True)
            marker.unlink(missing_ok=True)
            raise GitError(f"moving the branch in {checkout} to the merge failed: {said}")
        # The user's commit moved the branch (or is moving it: it holds the ref's lock).
        put_back(checkout, old, merge, sleep, clean=head == old)
        marker.unlink(missing_ok=True)
        raise _TryAgain("a commit moved the branch during the merge; the merge was taken back")
    marker.unlink(missing_ok=True)
    _git(checkout, "hook", "run", "--ignore-missing", "post-merge", "--", "0")
    log.debug("merge.checkout", checkout=str(checkout), merge=merge[:12])
    return merge


def _write(checkout: Path, *args: str) -> str:
    """A git command that writes the index: _Locked when another git holds a lock it needs."""
    done = _git(checkout, *args)
    if done.returncode != 0:
        said = done.stderr.strip()
        if _LOCKED.search(said):
            raise _Locked(said)
        raise GitError(
            f"git {' '.join(args[:2])} in {checkout} failed: {said}{killed_git.space_note(said, checkout)}"
        )
    return done.stdout


def _finished_by_older_hub(checkout: Path, git_dir: Path, merge_head: str) -> bool:
    if "[TASK: " not in (killed_git.read_gone(git_dir / "MERGE_MSG") or ""):
        return False  # the user's own merge
    return _git(checkout, "merge-base", "--is-ancestor", merge_head, "HEAD").returncode == 0


def forget_committed_merge(checkout: Path, commit: str) -> bool:
    """Our merge of `commit`, killed after git made the merge commit and before it cleared its merge
    state: the commit is in, so only MERGE_HEAD and MERGE_MSG go (`git merge --quit`: the index and the
    user's files stay as they are). Left there, the user's next `git commit` would record the task's
    branch as a second parent. True if there was such a state."""
    found = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", "MERGE_HEAD"], cwd=checkout, capture_output=True, text=True
    )
    if found.stdout.strip() != commit:
        return False
    quit_ = subprocess.run(["git", "merge", "--quit"], cwd=checkout, capture_output=True, text=True)
    if quit_.returncode != 0:
        raise GitError(f"git merge --quit in {checkout} failed: {quit_.stderr.strip()}")
    log.warning("merge.state_cleared", checkout=str(checkout), commit=commit[:12])
    return True


def recover(checkout: Path, git_dir: Path, sleep: Sleep = time.sleep) -> None:
    """Finish or take back the checkout step a killed run left (its HUB_MERGE marker)."""
    marker = git_dir / MARKER
    recorded = (killed_git.read_gone(marker) or "").split()
    if len(recorded) != 3:
        marker.unlink(missing_ok=True)
        return
    merge, old, _ = recorded
    head = _out(checkout, "rev-parse", "HEAD")
    if head == merge:
        log.warning(
            "merge.finished", checkout=str(checkout), merge=merge[:12], why="killed after the branch moved"
        )
        marker.unlink(missing_ok=True)
    else:
        # Not moved (head == old), or moved by a commit of the user's meanwhile, which may have left the
        # task's files in their index: back to what HEAD holds now, their edits since kept.
        put_back(checkout, old, merge, sleep, clean=False)
        marker.unlink(missing_ok=True)


def put_back(checkout: Path, old: str, merge: str, sleep: Sleep, clean: bool) -> list[str]:
    """Take the merge of `old` into `merge` out of the user's index and work tree: each file the merge
    changed goes back to what HEAD holds now (a commit of the user's made during the merge may hold the
    task's version: then nothing is left to take). A file edited since keeps its content, only its index
    entry goes back (unless `clean`: the caller saw the files clean); those are returned. Waits for the
    user's index.lock rather than stop half-way, and checks the result; GitBusy when their git held the
    lock throughout (the marker stays: the next run finishes the job)."""
    paths = [
        p for p in _out(checkout, "diff", "--name-only", "-z", "--no-renames", old, merge).split("\0") if p
    ]
    pauses = iter(PUT_BACK_PAUSES)
    while True:
        locked: _Locked | None = None
        try:
            kept = _put_back_once(checkout, merge, paths, clean)
            left = _left_over(checkout, merge, paths, kept)
            if not left:
                log.warning("merge.taken_back", checkout=str(checkout), merge=merge[:12], kept=kept)
                return kept
            why = f"{', '.join(left)} still held the task's version"
        except _Locked as exc:
            locked, why = exc, str(exc)
        pause = next(pauses, None)
        if pause is None:
            if locked is not None:
                lock = Path(locked.lock)
                raise killed_git.GitBusy(
                    lock, killed_git.open_by(lock), checkout, holder="your git"
                ) from None
            raise GitError(
                f"taking the merge {merge[:12]} back in {checkout} failed: {why}",
                hint="`git status` there; `git checkout HEAD -- <file>` puts a file back",
            )
        log.info("merge.put_back_waits", checkout=str(checkout), why=why, pause=pause)
        sleep(pause)


def _put_back_once(checkout: Path, merge: str, paths: list[str], clean: bool) -> list[str]:
    head = _out(checkout, "rev-parse", "HEAD")
    ours, theirs, index = (
        _blobs(checkout, head, paths),
        _blobs(checkout, merge, paths),
        _index_blobs(checkout, paths),
    )
    kept = []
    for path in paths:
        h, m = ours.get(path), theirs.get(path)
        if h == m:
            continue  # HEAD holds the merge's version now (the user's commit took it in): nothing to take
        now = _file_blob(checkout, path)
        in_index, in_file = index.get(path) == m, now == m or (clean and now != h)
        if in_index and not in_file:
            kept.append(path)
            _write(checkout, "reset", "-q", head, "--", path)  # the index only: their file stays
        elif in_file and (in_index or index.get(path) == h):
            if h is None:
                _write(checkout, "rm", "-q", "--cached", "--ignore-unmatch", "--", path)
                (checkout / path).unlink(missing_ok=True)
            else:
                _write(checkout, "checkout", "-q", head, "--", path)
        elif in_index:
            _write(checkout, "reset", "-q", head, "--", path)
    return kept


def _left_over(checkout: Path, merge: str, paths: list[str], kept: Iterable[str]) -> list[str]:
    """The files whose index entry, or whose content (but the kept ones'), is still the merge's version
    where HEAD's differs."""
    head = _out(checkout, "rev-parse", "HEAD")
    ours, theirs, index = (
        _blobs(checkout, head, paths),
        _blobs(checkout, merge, paths),
        _index_blobs(checkout, paths),
    )
    return [
        p
        for p in paths
        if ours.get(p) != theirs.get(p)
        and (index.get(p) == theirs.get(p) or (p not in kept and _file_blob(checkout, p) == theirs.get(p)))
    ]


def _blobs(checkout: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """Path -> blob id of `paths` in `commit` (a path it does not hold is left out)."""
    if not paths:
        return {}
    listed = _out(checkout, "ls-tree", "-r", "-z", commit, "--", *paths)
    return {entry.split("\t", 1)[1]: entry.split()[2] for entry in listed.split("\0") if "\t" in entry}


def _index_blobs(checkout: Path, paths: list[str]) -> dict[str, str]:
    if not paths:
        return {}
    listed = _out(checkout, "ls-files", "-s", "-z", "--", *paths)
    return {entry.split("\t", 1)[1]: entry.split()[1] for entry in listed.split("\0") if "\t" in entry}


def _file_blob(checkout: Path, path: str) -> str | None:
    return _out(checkout, "hash-object", "--", path) if (checkout / path).is_file() else None


def _run_hooks(checkout: Path, git_dir: Path, message: str) -> str:
    """The hooks `git merge` runs before its merge commit (pre-merge-commit, prepare-commit-msg,
    commit-msg), which may refuse it (GitError naming the hook) or edit its message; the message."""
    msg_file = git_dir / MESSAGE_FILE
    write_atomic(msg_file, message + "\n")
    try:
        for hook, args in (
            ("pre-merge-commit", ()),
            ("prepare-commit-msg", (str(msg_file), "merge")),
            ("commit-msg", (str(msg_file),)),
        ):
            done = _git(checkout, "hook", "run", "--ignore-missing", hook, "--", *args)
            if done.returncode != 0:
                said = (done.stderr + done.stdout).strip()
                raise GitError(f"the merge commit was refused by the {hook} hook of {checkout}: {said}")
        return msg_file.read_text(encoding="utf-8").strip() or message
    finally:
        msg_file.unlink(missing_ok=True)
