"""What a killed git leaves behind, and clearing it: lock files (found by reading the git directories,
not by running git) once no live git works in the repository, and a merge of the hub's own left half done."""

from __future__ import annotations

import os
from pathlib import Path

from hub.core.errors import GitError
from hub.core.log import get_logger
from hub.repo import gitops

log = get_logger(__name__)

# Lock files git creates beside what it is changing; a git killed mid-way leaves them, and every later
# git command that needs one fails ("Unable to create '.../index.lock': File exists").
TOP_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")


def git_dirs(work_root: Path) -> tuple[Path, Path] | None:
    """(git dir, common dir) of a work tree without running git; None when there is no .git."""
    dot = work_root / ".git"
    if dot.is_dir():
        return dot, dot
    if not dot.is_file():
        return None
    text = dot.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    git_dir = (work_root / text.removeprefix("gitdir:").strip()).resolve()
    common_file = git_dir / "commondir"
    common = (
        (git_dir / common_file.read_text(encoding="utf-8").strip()).resolve()
        if common_file.is_file()
        else git_dir
    )
    return git_dir, common


def leftover_locks(work_root: Path) -> list[Path]:
    """The lock files in the work tree's git dir, its common dir and the shared refs."""
    dirs = git_dirs(work_root)
    if dirs is None:
        return []
    git_dir, common = dirs
    found = [d / name for d in {git_dir, common} for name in TOP_LOCKS if (d / name).exists()]
    refs = common / "refs"
    if refs.is_dir():
        found += sorted(refs.rglob("*.lock"))
    return found


def live_git_in(work_root: Path, proc: Path = Path("/proc")) -> list[int] | None:
    """Process ids of live git processes working in this repository; None when that cannot be known
    (no /proc: not Linux), in which case no lock may be cleared."""
    if not proc.is_dir():
        return None
    roots = [work_root.resolve()]
    dirs = git_dirs(work_root)
    if dirs:
        roots += [d.resolve() for d in dirs]
        # Every worktree of the repository shares its refs: a git in any of them may hold a ref lock.
        for gitdir_file in (dirs[1] / "worktrees").glob("*/gitdir"):
            try:
                roots.append(Path(gitdir_file.read_text(encoding="utf-8").strip()).resolve().parent)
            except OSError:
                continue
        roots.append(dirs[1].resolve().parent)  # the main work tree, seen from a linked worktree
    live = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "comm").read_text(encoding="utf-8").startswith("git"):
                continue
            # Our own helpers (GitPython's cat-file) hold no lock of a killed git.
            if int((entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1]) == os.getpid():
                continue
        except (OSError, ValueError, IndexError):
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


def clear_leftovers(work_root: Path) -> list[str]:
    """Remove the lock files a killed git left, and abort a merge the hub itself left half done. Called
    under the hub's OS lock, so no hub phase is running git here; a lock is only removed when no live
    git process works in the repository, otherwise GitError names the lock and what to do."""
    done: list[str] = []
    locks = leftover_locks(work_root)
    if locks:
        live = live_git_in(work_root)
        if live is None or live:
            who = (
                "a running git (pid " + ", ".join(map(str, live)) + ")" if live else "git (cannot tell here)"
            )
            raise GitError(
                f"{locks[0]} exists and may be held by {who}: wait for it to finish, or if no git is "
                f"running in {work_root}, delete {', '.join(str(p) for p in locks)}"
            )
        for lock in locks:
            lock.unlink(missing_ok=True)
            done.append(f"removed {lock} left by a killed git")
    dirs = git_dirs(work_root)
    if dirs and (dirs[0] / "MERGE_HEAD").exists():
        message = (
            (dirs[0] / "MERGE_MSG").read_text(encoding="utf-8", errors="replace")
            if (dirs[0] / "MERGE_MSG").exists()
            else ""
        )
        if "[TASK: " not in message:
            raise GitError(
                f"a merge is in progress in {work_root} that the hub did not start: finish it "
                "(`git commit`) or abandon it (`git merge --abort`)"
            )
        gitops.run(gitops.open_repo(work_root), "merge", "--abort")
        done.append("aborted the hub's own merge left half done by a kill")
    for line in done:
        log.warning("git.recovered", detail=line)
    return done
