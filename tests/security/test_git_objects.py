"""Issue 38, point 3: the sandbox sees only the git objects its task can reach. A raw walk of the objects
folder (every object git can list, every loose file inflated, every pack read) finds none of the user's
stash, other branches, other tasks' commits or dangling blobs. Run against a checkout outside /tmp."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import load_config
from hub.phases.acceptance import jail_for, run_command
from hub.repo import gitops
from hub.repo.sandbox_views import SANDBOX_VIEWS

STASHED = "OBJSECRET-stashed-password-Qw19"
DANGLING = "OBJSECRET-dangling-blob-Hn42"
BRANCH = "OBJSECRET-other-branch-Zp07"
OTHER_TASK = "OBJSECRET-other-task-Vb63"
SECRETS = (STASHED, DANGLING, BRANCH, OTHER_TASK)

# Everything the objects folder holds, as a model's code would read it: loose objects inflated, each
# pack's objects by its index, and every zlib stream at every offset of every file, whatever its name.
RAW_WALK = """
import pathlib, subprocess, sys, zlib
objects = pathlib.Path(sys.argv[1])
out = []
for path in sorted(p for p in objects.rglob("*") if p.is_file()):
    data = path.read_bytes()
    out.append(data.decode("latin-1"))
    for start in range(len(data)):
        try:
            out.append(zlib.decompressobj().decompress(data[start:]).decode("latin-1"))
        except zlib.error:
            pass
    if path.suffix == ".idx":
        listed = subprocess.run(["git", "verify-pack", "-v", str(path)], capture_output=True, text=True).stdout
        oids = [line.split()[0] for line in listed.splitlines() if len(line.split()) > 3]
        shown = subprocess.run(["git", "cat-file", "--batch"], input="\\n".join(oids) + "\\n",
                               capture_output=True, text=True, errors="replace").stdout
        out.append(shown)
print("\\n".join(out))
print("RAW-WALK-DONE", len(out))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, errors="replace", check=True
    ).stdout


def planted_objects(checkout: Path) -> Path:
    """A stash holding a password file, a dangling blob, a branch and another task's commit, each with a
    secret in the user's object store; the task's worktree made as setup-task makes it."""
    _git(checkout, "checkout", "-q", "-b", "private")
    (checkout / "notes.txt").write_text(BRANCH + "\n", encoding="utf-8")
    _git(checkout, "add", "notes.txt")
    _git(checkout, "commit", "-q", "-m", "private notes")
    _git(checkout, "checkout", "-q", "main")
    (checkout / "passwords.txt").write_text(STASHED + "\n", encoding="utf-8")
    _git(checkout, "stash", "push", "-q", "--include-untracked", "-m", "wip")
    (checkout / "draft.txt").write_text(DANGLING + "\n", encoding="utf-8")
    _git(checkout, "hash-object", "-w", "draft.txt")  # added once, never committed
    (checkout / "draft.txt").unlink()
    other = checkout / ".git" / "hub-worktrees" / "other"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/other", str(other))
    (other / "secret.txt").write_text(OTHER_TASK + "\n", encoding="utf-8")
    _git(other, "add", "secret.txt")
    _git(other, "commit", "-q", "-m", "other task's work")
    worktree = checkout / ".git" / "hub-worktrees" / "t1"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    _git(checkout, "update-server-info")  # info/refs: every ref's name, for dumb HTTP
    return worktree


def test_a_raw_walk_of_the_sandboxs_objects_finds_no_stash_branch_other_task_or_dangling_blob(
    ground: Any,
) -> None:
    checkout = ground.checkout
    worktree = planted_objects(checkout)
    common = checkout / ".git"
    # The planted objects are all there to find, outside the sandbox.
    everything = _git(checkout, "cat-file", "--batch-all-objects", "--batch")
    assert all(secret in everything for secret in SECRETS)
    jail = jail_for(load_config(checkout), worktree)
    assert run_command("git status --short", worktree, 60, jail).ok  # the base, as the preflight sees it
    (worktree / "src" / "app.py").write_text('def greet(name):\n    return "hi " + name\n', encoding="utf-8")
    gitops.checkpoint(gitops.open_repo(worktree), "task's own change")
    (worktree / "src" / "app.py").write_text('def greet(name):\n    return "hey " + name\n', encoding="utf-8")
    _git(worktree, "add", "src/app.py")  # staged, not committed: `git diff --cached` needs its blob
    walk = worktree / "walk_probe.py"
    walk.write_text(RAW_WALK, encoding="utf-8")
    view = (
        "git status --short; git diff; git diff --cached; git log --oneline; git log -1 --format=%s; "
        f"cat {common}/info/refs {common}/objects/info/packs; echo DONE"
    )
    # What the probe prints is kept to its tail: only what matters of it comes out of the sandbox, in
    # words (whole, the redactor would hide a find, and redaction is not what keeps these out).
    probe = (
        "{ git cat-file --batch-all-objects --batch; git stash list; git stash show -p --include-untracked; "
        "git log --all -p; git fsck --lost-found --unreachable --no-reflogs; "
        f"{sys.executable} {walk} {common}/objects; }} 2>&1 "
        "| grep -a -o -E 'OBJSECRET-[A-Za-z0-9-]+|RAW-WALK-DONE [0-9]+' | sort -u | tr - ' '; echo DONE"
    )

    seen = run_command(view, worktree, 120, jail)
    probed = run_command(probe, worktree, 120, jail)

    found = probed.stdout + probed.stderr
    assert "DONE" in probed.stdout and "RAW WALK DONE" in probed.stdout, found
    assert [secret for secret in SECRETS if secret.replace("-", " ") in found or secret in found] == []
    # What the task's own commands need still works: its change, its own commit, its base.
    assert seen.ok and "DONE" in seen.stdout, seen.stdout + seen.stderr
    assert "fatal" not in seen.stderr and "error" not in seen.stdout, seen.stdout + seen.stderr
    assert "M  src/app.py" in seen.stdout and '+    return "hey " + name' in seen.stdout
    assert "task's own change" in seen.stdout and "initial" in seen.stdout
    assert "private" not in seen.stdout and "hub/other" not in seen.stdout and "stash" not in seen.stdout
    # The user's stash is as it was.
    assert "wip" in _git(checkout, "stash", "list")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_store_that_cannot_be_updated_costs_the_command_no_open_files_and_no_error(ground: Any) -> None:
    checkout = ground.checkout
    worktree = checkout / ".git" / "hub-worktrees" / "t1"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    store = checkout / ".git" / SANDBOX_VIEWS / "t1" / "objects"
    store.parent.mkdir(parents=True)
    store.write_text("a file where the store's folder goes\n", encoding="utf-8")
    jail = jail_for(load_config(checkout), worktree)
    before = _open_fds()

    done = [run_command("echo RAN", worktree, 60, jail) for _ in range(3)]

    assert all(result.ok and "RAN" in result.stdout for result in done)
    assert _open_fds() == before

    # An updater that fails outright fails the call, and still leaves no descriptor open.
    def failing() -> None:
        raise PermissionError("the store's folder is not writable")

    for _ in range(3):
        with pytest.raises(PermissionError):
            run_command("echo RAN", worktree, 60, dataclasses.replace(jail, git_objects=failing))
    assert _open_fds() == before


def test_git_log_in_the_sandbox_works_when_the_store_was_first_built_after_the_jail(ground: Any) -> None:
    checkout = ground.checkout
    (checkout / "second.txt").write_text("two\n", encoding="utf-8")
    _git(checkout, "add", "second.txt")
    _git(checkout, "commit", "-q", "-m", "second")  # the base has a parent the store does not hold
    worktree = checkout / ".git" / "hub-worktrees" / "t1"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    store = checkout / ".git" / SANDBOX_VIEWS / "t1" / "objects"
    store.parent.mkdir(parents=True)
    store.write_text("in the way while the jail is prepared\n", encoding="utf-8")
    jail = jail_for(load_config(checkout), worktree)
    store.unlink()

    logged = run_command("git log --format=%s", worktree, 60, jail)

    assert logged.ok and logged.stdout.split() == ["second"], logged.stdout + logged.stderr
