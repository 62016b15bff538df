"""The git objects a sandboxed command sees: its worktree's own, in a store of the hub's (issue 38).

The user's `objects/` holds everything the repository ever had: a stash's files, other branches' and
other tasks' commits, a blob someone once `git add`ed. Bound into the sandbox, a raw walk
(`git cat-file --batch-all-objects`, zlib over the loose files, the packs) read all of it, whatever
hid the refs naming it. So the sandbox gets a store of its own instead, `hub-sandbox/<worktree>/objects`
next to the sanitized config, holding a shallow view of the worktree:

- the commit HEAD was at when the store was first built (the base: the preflight runs there) with its
  whole tree, written as the one `shallow` boundary, as `git clone --depth 1` would;
- every commit made on top of it since, with what it added (the task's own history: `git log` shows it);
- the blobs the index holds that HEAD does not (staged, not committed yet).

Built once per worktree; when HEAD moves (each checkpoint) only what the new commits added is packed,
as one more pack (`git rev-list --objects NEW --not LAST | git pack-objects`). A HEAD that is not a
descendant of what the store holds (a reset, a rebase, a merge of history from before the base, another
worktree that took the name) builds it anew from HEAD. Shallow, not the whole history reachable from
HEAD: on a synthetic repository of 20,000 commits and 40,000 files the full walk took 31.5 s and 140 MB
per task, the shallow one 3.3 s and 33 MB, a checkpoint's update 0.4 s (bench/bench_git_objects.py, on a
loaded machine); and the user's old history (a secret committed once and removed since) is none of the
task's business either. A command whose HEAD and index did not move costs a few file reads (0.2 ms).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from hub.core.atomic import write_atomic
from hub.core.log import get_logger

log = get_logger(__name__)

STORE = "objects"
STATE = "objects.json"
SHALLOW = "shallow"
BUILD_TIMEOUT = 600.0  # a first build is one pack of HEAD's tree: seconds, even for a large repository
NO_OBJECT = "0" * 40


def task_objects(root: Path, common: Path, gitdir: Path, own: Path) -> tuple[Path, Path]:
    """(the objects folder, the shallow file) the sandbox of the worktree at `root` sees, brought up to
    date with its HEAD and index. Never the user's own objects: if the store cannot be brought up to
    date, git inside the sandbox misses objects rather than reads others'."""
    store, shallow = own / STORE, own / SHALLOW
    from filelock import FileLock, Timeout

    # Everything in here can fail (a full disk, a folder the user made read-only, git timing out): the
    # command then runs with the store as it is, and each command's update must not cost its caller
    # open files or a traceback.
    try:
        (store / "pack").mkdir(parents=True, exist_ok=True)
        if not shallow.exists():
            write_atomic(shallow, "")
        key = _key(root, common, gitdir)
        if key is None or _read_state(own).get("key") == key:
            return store, shallow
        with FileLock(str(own / "objects.lock"), timeout=BUILD_TIMEOUT, is_singleton=False):
            state = _read_state(own)
            if state.get("key") != key:
                _update(root, own, key, state)
    except (Timeout, OSError, subprocess.SubprocessError, ValueError) as exc:
        log.warning("sandbox.git_objects_not_built", worktree=str(root), error=str(exc)[:300])
    return store, shallow


def _key(root: Path, common: Path, gitdir: Path) -> dict[str, str] | None:
    """What the store must be rebuilt or extended for when it changes: HEAD's commit, the index's stat,
    and which worktree record this is (a later worktree may take a removed one's name)."""
    head = _head_commit(root, common, gitdir)
    if head is None:
        return None
    return {"head": head, "index": _stamp(gitdir / "index"), "record": _stamp(gitdir / "commondir")}


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _head_commit(root: Path, common: Path, gitdir: Path) -> str | None:
    """HEAD's commit, read from the files when they say it plainly (every sandboxed command asks),
    else from git."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if _is_oid(head):
            return head
        ref = head.removeprefix("ref:").strip()
        if ref.startswith("refs/") and ".." not in ref.split("/"):
            loose = common / ref
            value = loose.read_text(encoding="utf-8").strip() if loose.is_file() else _packed(common, ref)
            if _is_oid(value):
                return value
    done = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    value = done.stdout.strip()
    return value if done.returncode == 0 and _is_oid(value) else None


def _packed(common: Path, ref: str) -> str:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in (common / "packed-refs").read_text(encoding="utf-8").splitlines():
            oid, _, name = line.partition(" ")
            if name == ref:
                return oid
    return ""


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _read_state(own: Path) -> dict[str, object]:
    try:
        state = json.loads((own / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _update(root: Path, own: Path, key: dict[str, str], state: dict[str, object]) -> None:
    head = key["head"]
    old = state.get("key")
    commits = state.get("commits")
    known = [c for c in commits if isinstance(c, str)] if isinstance(commits, list) else []
    last = old.get("head") if isinstance(old, dict) else None
    extend = isinstance(old, dict) and old.get("record") == key["record"] and isinstance(last, str) and known
    new = _new_commits(root, head, str(last), set(known)) if extend else None
    if new is None:
        _rebuild(root, own, key)
        return
    staged = _staged_blobs(root)
    if new or staged:
        _pack(root, own / STORE, [head, *staged, f"^{last}"] if new else staged, history=bool(new))
    _write_state(own, key, [*known, *new])
    log.debug("sandbox.git_objects_added", worktree=str(root), commits=len(new), staged=len(staged))


def _new_commits(root: Path, head: str, last: str, known: set[str]) -> list[str] | None:
    """The commits HEAD has that `last` has not; None when the store cannot be extended to HEAD (a
    parent of one of them is not in the store: a merge of other history, a rebase, a reset to before
    the base)."""
    if head in known:
        return []  # HEAD went back to a commit the store holds: nothing to add
    done = _git(root, "rev-list", "--parents", head, "--not", last)
    if done.returncode != 0:
        return None
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    ours = {row[0] for row in rows}
    if not rows or any(parent not in ours and parent not in known for row in rows for parent in row[1:]):
        return None
    return [row[0] for row in rows]


def _rebuild(root: Path, own: Path, key: dict[str, str]) -> None:
    """A fresh store: HEAD's commit and whole tree (the shallow boundary) and the staged blobs. What
    the store held goes first: a failed build leaves part of HEAD's objects at most, never another
    worktree's."""
    store = own / STORE
    old = own / f"{STORE}.old-{os.getpid()}"
    (own / STATE).unlink(missing_ok=True)
    with contextlib.suppress(FileNotFoundError):
        store.rename(old)
    # With the old store go those a rebuild killed halfway left (the lock is held: none is in use).
    for left in own.glob(f"{STORE}.old-*"):
        shutil.rmtree(left, ignore_errors=True)
    (store / "pack").mkdir(parents=True)
    head = key["head"]
    write_atomic(own / SHALLOW, f"{head}\n")
    _pack(root, store, [head, *_staged_blobs(root)], history=False)
    _write_state(own, key, [head])
    log.debug("sandbox.git_objects_built", worktree=str(root), head=head[:12])


def _staged_blobs(root: Path) -> list[str]:
    """The blobs the index holds that HEAD's tree does not (a checkpoint's `git add` before its commit)."""
    done = _git(root, "diff-index", "--cached", "--no-renames", "-z", "HEAD")
    if done.returncode != 0:
        return []
    # Each change is two fields, its status line then its path: a path is never read as a status line
    # (a file named `:a b c --all` would hand rev-list every ref's objects).
    fields = done.stdout.split("\0")
    found = []
    for status in fields[0:-1:2]:
        parts = status.split()
        if len(parts) >= 4 and parts[1] != "160000" and parts[3] != NO_OBJECT and _is_oid(parts[3]):
            found.append(parts[3])
    return found


def _pack(root: Path, store: Path, revs: list[str], *, history: bool = True) -> None:
    """One more pack in `store` of the objects `git rev-list --objects REVS` lists (each an object id,
    or `^` and one: what to leave out), read from the user's repository (alternates included: the store
    needs none). Without `history`, only the objects REVS name and their trees."""
    if not all(_is_oid(rev.removeprefix("^")) for rev in revs):
        raise ValueError(f"not an object id among what to pack: {revs!r}")
    with subprocess.Popen(
        [
            "git",
            "-C",
            str(root),
            "rev-list",
            "--objects",
            *([] if history else ["--no-walk"]),
            "--end-of-options",
            *revs,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as walk:
        packed = subprocess.run(
            ["git", "-C", str(root), "pack-objects", "-q", str(store / "pack" / "pack")],
            stdin=walk.stdout,
            capture_output=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if walk.stdout is not None:
            walk.stdout.close()
        walked = walk.wait(timeout=BUILD_TIMEOUT)
    if walked != 0 or packed.returncode != 0:
        raise ValueError(
            f"git could not pack the worktree's objects: {packed.stderr.decode(errors='replace')}"
        )


def _write_state(own: Path, key: dict[str, str], commits: list[str]) -> None:
    write_atomic(own / STATE, json.dumps({"key": key, "commits": commits}))


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
    )
