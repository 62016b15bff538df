"""Issue 38, points 3 and 9: what the sandbox sees of git is only what the worktree's commands need, and
no PATH or VIRTUAL_ENV entry brings the checkout into it. Run against a checkout outside /tmp (conftest.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.phases.acceptance import jail_for, run_command
from hub.safety.sandbox import view

HEADER_TOKEN = "PLANTED-extraheader-Zq81Hv"
STASHED = "PLANTED-stashed-password-Lm40"
OTHER_TASK = "PLANTED-other-task-Rt55"
OTHER_BRANCH = "PLANTED-other-branch-Xk02"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def planted_git(ground: Any) -> Path:
    """A checkout with a token in a remote URL (conftest) and in an http.extraheader, a stash holding a
    password file, a branch and another task's worktree holding secrets; the task's worktree made as
    setup-task makes it (inside .git/hub-worktrees)."""
    checkout = ground.checkout
    _git(checkout, "config", "http.https://github.com/.extraheader", f"AUTHORIZATION: basic {HEADER_TOKEN}")
    _git(checkout, "checkout", "-q", "-b", "private")
    (checkout / "notes.txt").write_text(OTHER_BRANCH + "\n", encoding="utf-8")
    _git(checkout, "add", "notes.txt")
    _git(checkout, "commit", "-q", "-m", "private notes")
    _git(checkout, "checkout", "-q", "main")
    (checkout / "passwords.txt").write_text(STASHED + "\n", encoding="utf-8")
    _git(checkout, "stash", "push", "-q", "--include-untracked", "-m", "wip")
    other = checkout / ".git" / "hub-worktrees" / "other"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/other", str(other))
    (other / "secret.txt").write_text(OTHER_TASK + "\n", encoding="utf-8")
    worktree = checkout / ".git" / "hub-worktrees" / "t1"
    _git(checkout, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    return worktree


def test_model_code_reads_no_credential_stash_branch_or_other_worktree_from_git(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    worktree = planted_git(ground)
    common = ground.checkout / ".git"
    jail = jail_for(load_config(ground.checkout), worktree)
    command = (
        "git status --short; git log --oneline -1; "  # what the worktree's commands need still works
        "echo STATUS-DONE; "
        f"cat {common}/config; git config --list; git remote -v; "
        "git stash list; git stash show -p --include-untracked; "
        f"cat {common}/refs/stash {common}/logs/refs/stash; git log --all --oneline; git branch -a; "
        "git show private:notes.txt; git worktree list; "
        f"cat {common}/hub-worktrees/other/secret.txt {common}/worktrees/other/HEAD; "
        f"grep -r PLANTED {common} 2>/dev/null | grep -v objects/; echo DONE"
    )

    result = run_command(command, worktree, 60, jail)
    out = result.stdout + result.stderr

    assert "DONE" in result.stdout and "initial" in result.stdout, out
    assert "fatal" not in out.split("STATUS-DONE")[0], out
    assert leaks(out) == []
    for planted in (HEADER_TOKEN, STASHED, OTHER_TASK, OTHER_BRANCH, "x-access-token"):
        assert planted not in out
    assert "private" not in result.stdout and "hub/other" not in result.stdout
    # Nothing of it was changed: the user's stash and config are as they were.
    assert "wip" in _git(ground.checkout, "stash", "list")
    assert HEADER_TOKEN in (common / "config").read_text(encoding="utf-8")


def test_a_relative_path_entry_or_a_virtual_env_in_the_checkout_does_not_mount_the_checkout(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    worktree = planted_git(ground)
    checkout = ground.checkout
    (checkout / "bin").mkdir()
    (checkout / "tools").mkdir()
    env = {
        "HOME": str(ground.home),
        "PATH": f".:bin::tools:{checkout}/tools:{checkout}/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(checkout),
    }
    config = load_config(checkout)

    seen = view(worktree.resolve(), config.sandbox, env)

    assert not any(checkout.resolve() == p or checkout.resolve().is_relative_to(p) for p in seen.read), seen
    assert not any(p.is_relative_to(checkout.resolve()) for p in seen.read), seen
    jail = jail_for(config, worktree)
    result = run_command(f"cat {checkout}/.env; ls {checkout}; echo DONE", worktree, 60, jail)
    assert "DONE" in result.stdout and leaks(result.stdout + result.stderr) == []


def test_a_venv_inside_the_checkout_is_mounted_alone(ground: Any) -> None:
    checkout = ground.checkout
    worktree = planted_git(ground)
    venv = checkout / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    env = {"HOME": str(ground.home), "PATH": f"{venv}/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv)}

    seen = view(worktree.resolve(), load_config(checkout).sandbox, env)

    assert venv.resolve() in seen.read
    assert checkout.resolve() not in seen.read
