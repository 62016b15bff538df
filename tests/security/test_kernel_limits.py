"""Issue 38, point 4: the ways around `sandbox.limits` are closed, by the kernel where it offers a bound (no
nested user namespace, a read-only root, sized tmpfs), by the watch where it does not (memfds counted, a
folder named `.git` counted and cleaned), and `hub doctor` says which is which. Against a checkout outside
/tmp (conftest.py)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.faces.doctor import check_sandbox
from hub.phases.acceptance import CommandResult, jail_for, run_command
from hub.repo import gitops, untrusted
from hub.safety.limits import cgroup_v2_delegated

PY = shlex.quote(sys.executable)


def run(ground: Any, command: str, **limits: int) -> CommandResult:
    inline = ", ".join(f"{k}: {v}" for k, v in limits.items())
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  limits: {{{inline}}}\n", encoding="utf-8"
    )
    return run_command(command, ground.checkout, 120, jail_for(load_config(ground.checkout), ground.checkout))


def py(code: str) -> str:
    return f"{PY} -c {shlex.quote(code)}"


def test_a_nested_user_namespace_is_refused(ground: Any) -> None:
    result = run(
        ground, "unshare -U true && echo NESTED-USER; unshare -Urp --fork true && echo NESTED-PID; echo done"
    )

    assert "done" in result.stdout
    assert "NESTED" not in result.stdout


def test_the_sandboxs_root_holds_nothing_written(ground: Any) -> None:
    result = run(ground, "head -c 1000000 /dev/zero > /hog && echo WROTE; mkdir /x && echo MADE; echo done")

    assert "done" in result.stdout and "WROTE" not in result.stdout and "MADE" not in result.stdout


def test_memory_held_in_a_memfd_ends_with_a_resource_limit_failure(ground: Any) -> None:
    hog = (
        "import os, time\nfd = os.memfd_create('hog')\n"
        "for i in range(40):\n    os.write(fd, b'y' * (8 << 20)); time.sleep(0.02)\ntime.sleep(60)"
    )

    result = run(ground, py(hog), memory_mb=64)

    assert not result.timed_out
    assert result.failure == "resource_limit: more than 64 MiB of memory (sandbox.limits.memory_mb)"


def test_a_folder_named_git_is_counted_against_the_disk_limit_and_emptied(ground: Any) -> None:
    filler = (
        "import os, time\nos.makedirs('deep/.git', exist_ok=True)\n"
        "for i in range(40):\n    open(f'deep/.git/blob{i}', 'wb').write(b'x' * (1 << 20))\ntime.sleep(60)"
    )

    result = run(ground, py(filler), disk_mb=16)

    assert result.failure == "resource_limit: 16 MiB written or more (sandbox.limits.disk_mb)"
    assert list((ground.checkout / "deep" / ".git").glob("blob*")) == []


def test_a_folder_named_git_a_command_left_in_a_worktree_is_removed(ground: Any) -> None:
    worktree = ground.root / "wt"
    subprocess.run(["git", "-C", str(ground.checkout), "worktree", "add", "-q", str(worktree)], check=True)
    (worktree / "src" / ".git").mkdir()
    (worktree / "src" / ".git" / "stash.bin").write_bytes(b"x" * 1000)

    removed = untrusted.remove_ignored(gitops.open_repo(worktree))

    assert "src/.git/" in removed and not (worktree / "src" / ".git").exists()
    assert (worktree / ".git").is_file() and (worktree / "src" / "app.py").is_file()


def test_doctor_says_which_limits_the_kernel_enforces_and_never_claims_one_it_does_not(ground: Any) -> None:
    (ground.checkout / "hub.yaml").write_text("project: p\n", encoding="utf-8")

    detail = check_sandbox(load_config(ground.checkout)).detail

    assert "nested user namespaces: enforced by the kernel" in detail
    assert "/tmp and /dev/shm: enforced by the kernel" in detail
    # The hub does not put commands in a cgroup: memory and processes are polled wherever it runs.
    assert "memory and processes: NOT enforced by the kernel, polled by the hub" in detail
    delegated = "is delegated here, but the hub does not use one yet"
    assert (delegated in detail) == cgroup_v2_delegated()


def test_readme_says_where_the_limits_are_only_polled() -> None:
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())

    assert "not enforced by the kernel" in readme and "--disable-userns" in readme
