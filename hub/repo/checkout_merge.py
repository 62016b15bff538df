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
"""

from __future__ import annotations

import re
import subprocess
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


def merge_in_checkout(checkout: Path, commit: str, message: str) -> str:
    """Merge `commit` into the branch checked out at `checkout` (a merge commit, as `--no-ff`); the
    merge commit. Call only after `merge_conflicts` found none. MergeRefused, with nothing touched, when
    the checkout has staged changes, a merge of its own, or local changes in a file the merge changes."""
    killed_git.clear_locks(checkout)  # a git killed there leaves its index.lock
    git_dir = Path(_out(checkout, "rev-parse", "--absolute-git-dir"))
    recover(checkout, git_dir)
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
    marker = git_dir / MARKER
    write_atomic(marker, f"{merge} {old} {commit}\n")
    checked_out = _git(checkout, "read-tree", "-m", "-u", old, merge)
    if checked_out.returncode != 0:
        said = checked_out.stderr.strip()
        refused = _REFUSED.findall(said)
        if refused:
            marker.unlink(missing_ok=True)  # git checks every file before writing any: nothing written
            raise MergeRefused(checkout, refused, said)
        _take_back(checkout, old, merge, marker, clean_before=True)
        raise GitError(
            f"updating {checkout} to the merge failed: {said}{killed_git.space_note(said, checkout)}"
        )
    moved = _git(checkout, "update-ref", "-m", f"merge {commit}: Merge made by the hub", "HEAD", merge, old)
    if moved.returncode != 0:
        _take_back(checkout, old, merge, marker, clean_before=True)
        raise GitError(f"moving the branch in {checkout} to the merge failed: {moved.stderr.strip()}")
    marker.unlink(missing_ok=True)
    _git(checkout, "hook", "run", "--ignore-missing", "post-merge", "--", "0")
    log.debug("merge.checkout", checkout=str(checkout), merge=merge[:12])
    return merge


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


def recover(checkout: Path, git_dir: Path) -> None:
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
    elif head == old:
        _take_back(checkout, old, merge, marker, clean_before=False)
    else:
        marker.unlink(missing_ok=True)  # the branch moved elsewhere (the user): not ours to touch


def _take_back(checkout: Path, old: str, merge: str, marker: Path, clean_before: bool) -> None:
    kept = killed_git.undo_merge(checkout, old, tree=f"{merge}^{{tree}}", clean_before=clean_before)
    marker.unlink(missing_ok=True)
    log.warning("merge.taken_back", checkout=str(checkout), merge=merge[:12], kept=kept)


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
