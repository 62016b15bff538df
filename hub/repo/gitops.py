"""Every git operation the hub does, through GitPython: branches, the work tree, checkpoints, diffs,
stashes, the tasks' worktrees, and merges into the user's branches. Clearing what a killed git left
behind is `killed_git.py`."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.errors import GitError
from hub.core.files import read_capped
from hub.core.log import get_logger
from hub.core.relpaths import first_match, refusal
from hub.repo.git_bin import open_repo as open_repo  # re-exported: its callers name gitops
from hub.repo.identity import commit_args
from hub.repo.sandbox_views import drop_orphan_views
from hub.repo.tree import remove_untracked

if TYPE_CHECKING:
    from git import Repo

log = get_logger(__name__)
Paths = Sequence[str]


class MergeConflict(GitError):
    """The task branch does not merge cleanly into the base branch."""

    def __init__(self, task_branch: str, base_branch: str, files: list[str]) -> None:
        self.files = files
        super().__init__(
            f"merging {task_branch} into {base_branch} conflicts in: {', '.join(files) or 'unknown files'}; "
            "the merge was aborted and both branches are as they were"
        )


@dataclass(frozen=True)
class DiffStats:
    """What the task branch changed against its base commit."""

    files: tuple[str, ...]
    added: int
    removed: int
    per_file: tuple[tuple[str, int, int], ...] = ()


def run(repo: Repo, *args: str, as_hub: bool = False) -> str:
    """`git <args>` in the repository (`as_hub`: one that commits, given `commit_args`' identity); its
    output, or GitError naming the command and what git said."""
    import git

    try:
        return str(repo.git.execute(["git", *(commit_args(Path(repo.working_dir)) if as_hub else []), *args]))
    except git.GitCommandError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().removeprefix("stderr: ").strip("'\n ")
        raise GitError(f"git {' '.join(args[:2])} failed: {detail}") from None


def current_branch(repo: Repo) -> str:
    return run(repo, "rev-parse", "--abbrev-ref", "HEAD")


def branches(repo: Repo) -> list[str]:
    """The repository's local branches; none in a repository without a commit."""
    return [b for b in run(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").splitlines() if b]


def unborn_branch(repo: Repo) -> str | None:
    """The name of the current branch when it has no commit yet (a new repository, an orphan branch)."""
    if repo.head.is_valid():
        return None
    return run(repo, "symbolic-ref", "--short", "-q", "HEAD") or "HEAD"


def head_commit(repo: Repo) -> str:
    return run(repo, "rev-parse", "HEAD")


def commit_of(repo: Repo, ref: str) -> str:
    """The commit a branch or other ref points at."""
    return run(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}")


def dirty_files(repo: Repo, untracked: bool = True) -> list[str]:
    """Files with uncommitted changes, untracked ones included unless asked not to (ignored ones never)."""
    out = run(repo, "status", "--porcelain=v1", "-z", "--untracked-files=" + ("all" if untracked else "no"))
    files: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) > 3:
            files.append(entry[3:])
            # With -z a rename or copy is followed by its source path as a field of its own, unprefixed.
            if entry[0] in "RC":
                files.append(next(entries, ""))
    return [name for name in files if name]


def exclude_path(repo: Repo, rel: str) -> bool:
    """Add `rel` to .git/info/exclude once; True if it was added."""
    exclude = Path(repo.git_dir) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    entry = "/" + rel.strip("/") + "/"
    if entry in text.splitlines():
        return False
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(("\n" if text and not text.endswith("\n") else "") + entry + "\n")
    return True


def branch_exists(repo: Repo, name: str) -> bool:
    # for-each-ref, not `branch --list`: that one reads every worktree's HEAD to mark the branches checked
    # out, and fails ("Invalid path .../worktrees/<id>") while another task's worktree is being removed.
    ref = f"refs/heads/{name}"
    return ref in run(repo, "for-each-ref", "--format=%(refname)", ref).splitlines()


def in_scope(
    path: str, scopes: Paths, forbidden: Paths = (), control: Paths = (), commands: Paths = ()
) -> bool:
    """Whether a task may have written `path`, as the one matcher decides it for the edit layer too
    (`hub.core.relpaths.refusal`): a file one side allowed and the other did not was written and never
    committed, or committed and never allowed."""
    return refusal(path, scopes, forbidden, control, commands) is None


# Folders a command writes as its cache (Python's bytecode, pytest's, the linters'). They are never the
# model's doing, so they go without a word; they go all the same, inside the allowed paths too, so the
# next run starts clean and a planted .pyc cannot stand in for a test (issue 27).
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})


def cache_dir(path: str) -> str | None:
    """The cache folder `path` lies in (or is), relative like `path`; None outside every cache."""
    parts = path.rstrip("/").split("/")
    for depth, part in enumerate(parts, 1):
        if part in CACHE_DIRS:
            return "/".join(parts[:depth])
    return None


def restore_outside(
    repo: Repo, scopes: Paths, forbidden: Paths = (), control: Paths = (), commands: Paths = ()
) -> list[str]:
    """Put the work tree back as HEAD has it everywhere a task may not write (`in_scope`): changed
    or deleted tracked files restored, new untracked files removed (ignored ones, installed packages,
    are left). What an acceptance command changed there must not become the tests the next run checks
    against. Untracked caches (`CACHE_DIRS`, ignored or not) are removed everywhere and not reported.
    Returns the paths restored or removed."""
    out = run(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    tracked: list[str] = []
    untracked: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) <= 3:
            continue
        (untracked if entry[:2] == "??" else tracked).append(entry[3:])
        if entry[0] in "RC":
            tracked.append(next(entries, ""))
    ignored = run(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    root = Path(str(repo.working_tree_dir)).resolve()
    caches = {c for p in [*untracked, *ignored.split("\0")] if p and (c := cache_dir(p))}
    # A cache folder someone committed keeps its tracked files: only what is new in it goes.
    held = run(repo, "--literal-pathspecs", "ls-files", "-z", "--", *caches).split("\0") if caches else []
    for rel in sorted(caches):
        path = root / rel
        if not path.parent.resolve().is_relative_to(root) or not path.is_dir() or path.is_symlink():
            continue
        if any(h == rel or h.startswith(rel + "/") for h in held if h):
            for new in [p for p in untracked if p.startswith(rel + "/")]:
                (root / new).unlink(missing_ok=True)
        else:
            shutil.rmtree(path, ignore_errors=True)
    if caches:
        log.debug("gitops.caches_removed", paths=sorted(caches)[:50])
    outside = {
        p for p in [*untracked, *tracked] if p and not in_scope(p, scopes, forbidden, control, commands)
    }
    untracked = [p for p in untracked if p in outside and cache_dir(p) is None]
    tracked = [p for p in tracked if p in outside]
    for rel in untracked:
        remove_untracked(root, rel)
    restore_tracked(repo, tracked)
    return sorted(set(tracked) | set(untracked))


def restore_tracked(repo: Repo, tracked: Sequence[str]) -> None:
    """Tracked files (changed or deleted) put back as HEAD has them."""
    for start in range(0, len(tracked), 500):
        # Literal pathspecs: a file named ':(glob)*' is that file, not every file.
        run(repo, "--literal-pathspecs", "checkout", "-q", "HEAD", "--", *tracked[start : start + 500])


def checkpoint(
    repo: Repo,
    message: str | Callable[[list[str]], str],
    scope: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    forbidden: Sequence[str] = (),
    commands: Sequence[str] = (),
) -> str | None:
    """Commit what changed, only what a task may write (`in_scope`: inside `scope`, the allowed paths,
    outside `forbidden`) when `scope` is given, and never inside `exclude` (the hub's control files);
    None if nothing changed. `message` may be a function of the changed files, so the title can say
    what changed."""
    changed = dirty_files(repo)
    if scope:
        changed = [path for path in changed if in_scope(path, scope, forbidden, exclude or (), commands)]
    elif forbidden:
        changed = [path for path in changed if first_match(path, forbidden) is None]
    if exclude:
        lowered = [e.strip("/").lower() for e in exclude]
        changed = [
            p for p in changed if not any(p.lower() == e or p.lower().startswith(e + "/") for e in lowered)
        ]
    if not changed:
        return None
    run(repo, "add", "-A", "--", *changed)
    if not run(repo, "diff", "--cached", "--name-only").strip():
        return None
    text = message if isinstance(message, str) else message(changed)
    run(repo, "commit", "-q", "--no-verify", "-m", text, "--", *changed, as_hub=True)
    sha = head_commit(repo)
    log.debug("git.checkpoint", commit=sha[:12], files=len(changed))
    return sha


def diff_stats(repo: Repo, base_commit: str, ref: str = "HEAD") -> DiffStats:
    spec = f"{base_commit}...{ref}" if ref != "WORKTREE" else base_commit
    out = run(repo, "diff", "--numstat", "-z", spec)
    per_file: list[tuple[str, int, int]] = []
    for entry in out.split("\0"):
        parts = entry.split("\t")
        if len(parts) == 3 and parts[2]:
            if parts[0].isdigit() and parts[1].isdigit():
                added, removed = int(parts[0]), int(parts[1])
            else:
                # Binary to git: maybe only because the work tree's .gitattributes (which a task's command
                # can write) says `-diff`; counted as text, as the reviewer's diff shows it.
                added, removed = _text_counts(repo, spec, parts[2])
            per_file.append((parts[2], added, removed))
    return DiffStats(
        files=tuple(p for p, _, _ in per_file),
        added=sum(a for _, a, _ in per_file),
        removed=sum(r for _, _, r in per_file),
        per_file=tuple(per_file),
    )


def _text_counts(repo: Repo, spec: str, path: str) -> tuple[int, int]:
    """Lines added and removed in one file, compared as text whatever its attributes say."""
    out = run(repo, "diff", "--text", "--no-ext-diff", "--no-textconv", "-U0", spec, "--", path)
    added = removed = 0
    in_hunk = False
    for line in out.split("\n"):
        if line.startswith("diff --git "):
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            added += 1
        elif in_hunk and line.startswith("-"):
            removed += 1
    return added, removed


def diff_text(repo: Repo, base_commit: str, ref: str = "HEAD") -> str:
    # --text: the work tree's .gitattributes (which a task's command can write, untracked, so absent from
    # the diff itself) must not turn the task's code into "Binary files differ" for the reviewer.
    # A binary file's bytes come back surrogate-escaped: shown as U+FFFD, so the text can be written as UTF-8.
    text = run(
        repo, "diff", "--no-color", "--text", "--no-ext-diff", "--no-textconv", f"{base_commit}...{ref}"
    )
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def content_hash(repo_dir: Path, files: list[str]) -> str:
    """A hash of the named files' current contents (missing files count as empty)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        # A link or a special file counts as empty, a huge file by its first DEFAULT_LIMIT bytes: the
        # worktree is what the model's code left (a link to /dev/zero was read forever).
        found = read_capped(repo_dir / name, root=repo_dir)
        digest.update(found[0] if found else b"")
        digest.update(b"\0")
    return digest.hexdigest()


STASH_REFS = "refs/hub/stashes"


def stash(repo: Repo, name: str) -> str | None:
    """Move uncommitted changes (untracked included) to `refs/hub/stashes/<name>`; the ref, or None if
    there was nothing. `git stash apply <ref>` brings them back.

    refs/stash is shared by every worktree of the repository: left there, the task's stash would top the
    user's `git stash list` and their next `git stash pop` would apply the task's half-written files to
    their checkout. So the stash git makes is moved to a ref of the hub's own at once, under a lock
    (tasks stash concurrently), and dropped from the shared list."""
    if not dirty_files(repo):
        return None
    from filelock import FileLock

    ref = f"{STASH_REFS}/{name}"
    message = f"hub: {name}"
    with FileLock(str(common_dir(repo) / "hub-stash.lock"), timeout=MERGE_LOCK_SECONDS, is_singleton=False):
        _adopt_stashes(repo)
        run(repo, "stash", "push", "--include-untracked", "-m", message, as_hub=True)
        made = run(repo, "rev-parse", "refs/stash")
        run(repo, "update-ref", ref, made)
        if run(repo, "rev-parse", "stash@{0}") == made:
            run(repo, "stash", "drop", "--quiet", "stash@{0}")
    return ref


def adopt_stashes(repo: Repo) -> list[str]:
    """Move the hub's own stashes that a kill left in the user's `git stash list` (between the stash
    and its move) to their refs under refs/hub/stashes; the refs. Under the stash lock."""
    from filelock import FileLock

    with FileLock(str(common_dir(repo) / "hub-stash.lock"), timeout=MERGE_LOCK_SECONDS, is_singleton=False):
        return _adopt_stashes(repo)


def _adopt_stashes(repo: Repo) -> list[str]:
    listed = run(repo, "stash", "list", "--format=%gd%x09%H%x09%gs").splitlines()
    moved = []
    # Oldest first: dropping an entry renumbers only the ones older than it, which are done already.
    for line in reversed(listed):
        entry, sha, subject = [*line.split("\t", 2), "", ""][:3]
        if ": hub: " not in subject:
            continue
        ref = f"{STASH_REFS}/{subject.split(': hub: ', 1)[1].strip()}"
        if not run(repo, "for-each-ref", ref).strip():
            run(repo, "update-ref", ref, sha)
        run(repo, "stash", "drop", "--quiet", entry)
        moved.append(ref)
        log.warning("stash.adopted", ref=ref, why="left in the shared stash list by a killed hub")
    return moved


# --- worktrees: one per task -----------------------------------------------------------------------------

WORKTREES_FOLDER = "hub-worktrees"


def common_dir(repo: Repo) -> Path:
    """The repository's shared git directory (the same from the main checkout and every worktree)."""
    return Path(repo.common_dir).resolve()


def default_worktrees_dir(repo: Repo) -> Path:
    # Inside the git directory: test runners, searches and IDEs skip `.git/`, so a task's copy of the
    # code is never collected, found or indexed as the user's own.
    return common_dir(repo) / WORKTREES_FOLDER


def worktrees(repo: Repo) -> dict[str, Path]:
    """Checked-out branch -> worktree path, for every worktree of the repository (main checkout included)."""
    for attempt in range(3):
        try:
            out = run(repo, "worktree", "list", "--porcelain")
            break
        except GitError as exc:
            # Another task's `worktree add` is writing its record this instant: read again, briefly.
            if "failed to read" not in str(exc) or attempt == 2:
                raise
            time.sleep(0.05)
    found: dict[str, Path] = {}
    for block in out.split("\n\n"):
        lines = block.splitlines()
        path = next((Path(line[len("worktree ") :]) for line in lines if line.startswith("worktree ")), None)
        branch = next(
            (line[len("branch refs/heads/") :] for line in lines if line.startswith("branch refs/heads/")),
            None,
        )
        # "prunable": its folder was deleted by hand; nothing is checked out there any more.
        if path is not None and branch and not any(line.startswith("prunable") for line in lines):
            found[branch] = path
    return found


def rebasing(repo: Repo) -> dict[str, Path]:
    """Branch being rebased -> the work tree rebasing it. HEAD is detached meanwhile, so `worktrees` does
    not list the branch; the rebase writes it when it ends, and fails if the branch moved under it."""
    from hub.repo.killed_git import linked_worktrees, read_gone

    common = common_dir(repo)
    # Another task's clean-up may remove its worktree's record while this reads it: gone is gone.
    trees = [(common, common.parent), *linked_worktrees(common)]
    found: dict[str, Path] = {}
    for gitdir, tree in trees:
        for state in ("rebase-merge", "rebase-apply"):
            ref = (read_gone(gitdir / state / "head-name") or "").strip()
            if ref.startswith("refs/heads/"):
                found[ref.removeprefix("refs/heads/")] = tree
    return found


def ensure_worktree(repo: Repo, path: Path, branch: str, start: str | None = None) -> bool:
    """Have `branch` checked out at `path`; True if the worktree had to be (re)created.

    With `start`, a missing branch is created there. A worktree folder deleted by hand is recreated
    from its branch (git's own record of it is pruned first).
    """
    from hub.repo import killed_git

    common = common_dir(repo)
    unfinished = killed_git.unfinished_add(common, path)
    if unfinished is not None:
        # A `git worktree add` killed midway: its checkout may be empty or half written, and git's
        # "initializing" lock keeps it from ever being pruned or removed. The branch (and every commit
        # on it) stays; only the checkout is made again.
        unfinished.unlink(missing_ok=True)
        log.warning("worktree.unfinished_add", path=str(path), branch=branch)
    elif (path / ".git").is_file() and worktrees(repo).get(branch) == path.resolve():
        return False
    elif rebasing(repo).get(branch) == path.resolve():
        # HEAD is detached while a rebase stops, so the branch looks checked out nowhere; setting the
        # folder aside would throw the person's rebase away with git's record of it.
        raise GitError(
            f"a rebase of {branch} is in progress in {path}",
            hint=f"finish it there (`git -C {path} rebase --continue`) or abandon it "
            f"(`git -C {path} rebase --abort`)",
        )
    with worktree_lock(repo):
        _make_worktree(repo, path, branch, start)
    return True


def _make_worktree(repo: Repo, path: Path, branch: str, start: str | None) -> None:
    from hub.repo import killed_git

    common = common_dir(repo)
    run(repo, "worktree", "prune")
    if path.exists():
        # Half made (a `worktree add` killed midway) or cut off from git by hand: set it aside, never
        # delete it; whatever is in it stays readable.
        aside = path.with_name(f"{path.name}.broken-{time.time_ns()}")
        path.rename(aside)
        log.warning("worktree.set_aside", path=str(path), to=str(aside))
        run(repo, "worktree", "prune")  # the record of the folder just moved
    path.parent.mkdir(parents=True, exist_ok=True)
    # A `worktree add -b` killed while it created the branch left the branch's ref lock.
    killed_git.clear_locks(Path(str(repo.working_tree_dir or common.parent)), shared_only=True)
    if branch_exists(repo, branch):
        run(repo, "worktree", "add", "--quiet", str(path), branch)
    elif start is not None:
        run(repo, "worktree", "add", "--quiet", "-b", branch, str(path), start)
    else:
        raise GitError(f"branch '{branch}' does not exist; the task's worktree cannot be recreated")
    log.debug("worktree.add", path=str(path), branch=branch)


@contextmanager
def worktree_lock(repo: Repo) -> Iterator[None]:
    """One `git worktree add` / `remove` / `prune` of the hub's at a time (tasks set up and clean up
    concurrently): git reads every worktree's record while it adds one, and fails on a record another
    add is still writing ("failed to read .git/worktrees/<id>/commondir", seen by the kill bench)."""
    from filelock import FileLock, Timeout

    lock = FileLock(
        str(common_dir(repo) / "hub-worktree.lock"), timeout=MERGE_LOCK_SECONDS, is_singleton=False
    )
    try:
        lock.acquire()
    except Timeout:
        raise GitError(
            f"another task's worktree add or removal held the lock for {MERGE_LOCK_SECONDS:g} s"
        ) from None
    try:
        yield
    finally:
        lock.release()


def remove_worktree(repo: Repo, path: Path) -> None:
    """Remove a task's worktree (its leftovers, e.g. build output, with it) and git's record of it.

    Whatever a killed earlier removal (or add) left is finished first: a folder whose `.git` git
    already deleted is deleted the rest of the way (git refuses it: "validation failed"), git's
    "initializing" lock of an add that never finished is dropped, stale lock files are cleared."""
    from hub.repo import killed_git

    common = common_dir(repo)
    unfinished = killed_git.unfinished_add(common, path)
    if unfinished is not None:
        unfinished.unlink(missing_ok=True)
    with worktree_lock(repo):
        if path.exists() and not (path / ".git").exists():
            shutil.rmtree(path)
            log.warning("worktree.removal_finished", path=str(path))
        if path.exists():
            # --force: untracked build output of acceptance commands is the task's, not the user's.
            run(repo, "worktree", "remove", "--force", str(path))
        run(repo, "worktree", "prune")
        drop_orphan_views(common)  # its sandbox's view of git (objects included) goes with it


def delete_branch(repo: Repo, branch: str) -> None:
    """Delete a merged task's branch; a ref lock a killed `git branch -D` left is cleared first."""
    from hub.repo import killed_git

    killed_git.clear_locks(Path(str(repo.working_tree_dir or common_dir(repo).parent)), shared_only=True)
    if branch_exists(repo, branch):
        run(repo, "branch", "-D", branch)


# --- merging without touching the user's work ------------------------------------------------------------


def your_checkout(checkout: Path) -> str:
    """How a wait names the user's checkout: the main one is "your checkout"; a linked worktree of theirs
    (its `.git` is a file) is named by its path, or the person looks for local changes in the wrong one."""
    return f"your checkout {checkout}" if (checkout / ".git").is_file() else "your checkout"


class MergeRefused(GitError):
    """git would not merge into a checkout because uncommitted changes there would be overwritten."""

    def __init__(
        self, checkout: Path, files: list[str], detail: str, message: str | None = None, *, hint: str = ""
    ) -> None:
        self.checkout = checkout
        self.files = files
        where = ", ".join(files) if files else detail
        super().__init__(
            message or f"merge waits: {your_checkout(checkout)} has local changes in {where}", hint=hint
        )


MERGE_LOCK_SECONDS = 120.0


@contextmanager
def merge_lock(repo: Repo) -> Iterator[None]:
    """One merge into the repository's branches at a time (tasks finalize concurrently): a second
    merge would meet git's index.lock in the user's checkout, or move the base under the first."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(common_dir(repo) / "hub-merge.lock"), timeout=MERGE_LOCK_SECONDS, is_singleton=False)
    try:
        lock.acquire()
    except Timeout:
        raise GitError(f"another task's merge held the merge lock for {MERGE_LOCK_SECONDS:g} s") from None
    try:
        yield
    finally:
        lock.release()


def is_ancestor(repo: Repo, commit: str, ref: str) -> bool:
    import git

    try:
        repo.git.execute(["git", "merge-base", "--is-ancestor", commit, ref])
    except git.GitCommandError:
        return False
    return True


def merge_conflicts(repo: Repo, base_branch: str, commit: str) -> list[str] | None:
    """Files that conflict when `commit` merges into `base_branch` (None: it merges cleanly).

    `git merge-tree --write-tree` (git >= 2.38) merges in the object store only: no work tree, no index.
    """
    import git

    try:
        repo.git.execute(
            ["git", "merge-tree", "--write-tree", "--name-only", "--no-messages", base_branch, commit]
        )
    except git.GitCommandError as exc:
        if exc.status != 1:
            detail = (exc.stderr or "").strip().removeprefix("stderr: ").strip("'\n ")
            raise GitError(f"git merge-tree failed: {detail}") from None
        lines = str(exc.stdout or "").removeprefix("  stdout: ").strip("'\n ").splitlines()
        return [line for line in lines[1:] if line.strip()] or ["unknown files"]
    return None


def merge_without_checkout(repo: Repo, base_branch: str, commit: str, message: str) -> str:
    """Merge `commit` into `base_branch` that no work tree has checked out: tree from merge-tree, a merge
    commit from commit-tree, and the branch moved only if nobody moved it meanwhile."""
    old = commit_of(repo, base_branch)
    tree = run(repo, "merge-tree", "--write-tree", "--no-messages", old, commit).splitlines()[0]
    merge = run(repo, "commit-tree", tree, "-p", old, "-p", commit, "-m", message, as_hub=True)
    run(repo, "update-ref", "-m", message, f"refs/heads/{base_branch}", merge, old)
    return merge
