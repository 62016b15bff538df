"""What the sandbox's own git object store costs a task (issue 38, item 3): its first build, the
update after a checkpoint, and a command's check when nothing moved.

    .venv/bin/python bench/bench_git_objects.py [--clone PATH] [--files N] [--commits N] [--json]

Two repositories: a clone of a real project (`--clone`, default the first of humanize, toolz and
tenacity found under `../history-data/`; skipped if none) and a synthetic one made by `git fast-import`
(`--files` files in 200 folders, `--commits` commits of 5 files each). In each, a task's worktree is made
as setup-task makes it and `hub.safety.git_objects.task_objects` is timed: the first build (HEAD's tree,
shallow), an incremental update after one commit of 5 files, and the call when nothing changed (every
sandboxed command makes it). For comparison, what the same store would cost holding the whole history
reachable from HEAD (`git rev-list --objects HEAD | git pack-objects`): the reason the store is shallow.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hub.repo.sandbox_views import SANDBOX_VIEWS
from hub.safety.git_objects import task_objects
from hub.safety.git_view import git_folders

HISTORY = Path(__file__).resolve().parents[2] / "history-data"
FOLDERS = 200
TOUCHED = 5


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, check=True)
    return done.stdout.decode(errors="replace")


def synthetic(repo: Path, files: int, commits: int) -> None:
    """A repository of `files` files and `commits` commits, each after the first changing TOUCHED."""
    rnd = random.Random(1)
    stream = bytearray()
    for number in range(commits):
        message = f"commit {number}\n".encode()
        stream += b"commit refs/heads/main\n"
        stream += f"committer A <a@example.invalid> {1_600_000_000 + number} +0000\n".encode()
        stream += f"data {len(message)}\n".encode() + message
        for index in range(files) if number == 0 else [rnd.randrange(files) for _ in range(TOUCHED)]:
            words = " ".join(f"w{rnd.randrange(5000)}" for _ in range(300))
            data = f"# file {index} version {number}\n{words}\n".encode()
            stream += f"M 100644 inline d{index % FOLDERS}/f{index}.py\ndata {len(data)}\n".encode()
            stream += data + b"\n"
    stream += b"done\n"
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "fast-import", "--done", "--quiet", stdin=bytes(stream))
    git(repo, "reset", "-q", "--hard", "main")


def measure(checkout: Path, runs: int) -> dict[str, Any]:
    """The store's costs for a task's worktree of `checkout`, and the whole-history store's."""
    worktree = checkout / ".git" / "hub-worktrees" / "bench"
    git(checkout, "worktree", "add", "-q", "-b", "hub/bench", str(worktree))
    folders = git_folders(worktree)
    assert folders is not None
    gitdir, common = folders
    own = common / SANDBOX_VIEWS / gitdir.name

    def timed() -> float:
        started = time.perf_counter()
        task_objects(worktree, common, gitdir, own)
        return time.perf_counter() - started

    def size() -> int:
        return sum(p.stat().st_size for p in (own / "objects").rglob("*") if p.is_file())

    first = timed()
    first_bytes = size()
    idle = statistics.median(timed() for _ in range(runs))
    tracked = git(worktree, "ls-files").split()
    for name in random.Random(2).sample(tracked, min(TOUCHED, len(tracked))):
        with (worktree / name).open("a", encoding="utf-8") as handle:
            handle.write("# changed by the task\n")
    git(worktree, "commit", "-q", "-a", "-m", "the task's change")
    update = timed()
    whole = Path(tempfile.mkdtemp(dir=checkout.parent))
    started = time.perf_counter()
    walk = subprocess.Popen(["git", "rev-list", "--objects", "HEAD"], cwd=worktree, stdout=subprocess.PIPE)
    subprocess.run(
        ["git", "pack-objects", "-q", str(whole / "pack")],
        cwd=worktree,
        stdin=walk.stdout,
        capture_output=True,
        check=True,
    )
    walk.wait()
    full = time.perf_counter() - started
    full_bytes = sum(p.stat().st_size for p in whole.iterdir())
    shutil.rmtree(whole)
    return {
        "objects_in_repository": int(git(checkout, "count-objects", "-v").split("in-pack: ")[1].split()[0]),
        "commits": int(git(checkout, "rev-list", "--count", "HEAD").strip()),
        "files": len(tracked),
        "first_build_s": first,
        "first_build_mb": first_bytes / 1e6,
        "update_after_commit_s": update,
        "unchanged_check_ms": idle * 1000,
        "whole_history_s": full,
        "whole_history_mb": full_bytes / 1e6,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", type=Path, default=None)
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    source = args.clone or next(
        (HISTORY / name for name in ("humanize", "toolz", "tenacity") if (HISTORY / name / ".git").exists()),
        None,
    )
    root = Path(tempfile.mkdtemp(prefix="hub-bench-git-objects-"))
    figures: dict[str, Any] = {}
    try:
        if source is not None:
            clone = root / source.name
            git(root, "clone", "-q", "--no-local", str(source), str(clone))
            figures[f"clone of {source.name}"] = measure(clone, args.runs)
        big = root / "synthetic"
        started = time.perf_counter()
        synthetic(big, args.files, args.commits)
        figures["synthetic"] = {**measure(big, args.runs), "made_in_s": time.perf_counter() - started}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for name, row in figures.items():
        print(
            f"{name}: {row['commits']:,} commits, {row['files']:,} files, {row['objects_in_repository']:,} objects\n"
            f"  shallow store: first build {row['first_build_s']:.2f} s ({row['first_build_mb']:.1f} MB), "
            f"after a commit {row['update_after_commit_s'] * 1000:.0f} ms, "
            f"unchanged {row['unchanged_check_ms']:.2f} ms per command\n"
            f"  whole history reachable from HEAD: {row['whole_history_s']:.2f} s ({row['whole_history_mb']:.1f} MB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
