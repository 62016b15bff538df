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
from hub.core.sandbox_config import SandboxLimits
from hub.faces.doctor import check_sandbox
from hub.phases.acceptance import CommandResult, jail_for, run_command
from hub.repo import gitops, untrusted
from hub.safety.cgroup import delegation, take
from hub.safety.sandbox import Jail, prepare

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
    assert "bytes written in all: NOT enforced by the kernel, a walk of the files" in detail
    # Memory and processes: a cgroup where one is delegated, else polled, and said so with the reason.
    found = delegation()
    if found.base is None:
        assert "memory and processes: NOT enforced by the kernel, polled by the hub" in detail
        assert found.why in detail
    else:
        assert "memory and processes: enforced by the kernel, each command in a cgroup" in detail


def test_readme_says_where_the_limits_are_only_polled() -> None:
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())

    assert "not enforced by the kernel" in readme and "--disable-userns" in readme


def delegated(ground: Any, limits: SandboxLimits) -> tuple[Path, Jail]:
    """A folder tree of the cgroup file system's shape (`cgroupfs/hub.scope`, the hub alone in it), and a
    jail whose commands each get a cgroup there."""
    fs = ground.checkout / "cgroupfs"
    scope = fs / "hub.scope"
    scope.mkdir(parents=True)
    (scope / "cgroup.controllers").write_text("memory pids\n", encoding="ascii")
    (scope / "cgroup.procs").write_text("4242\n", encoding="ascii")
    (scope / "cgroup.subtree_control").write_text("", encoding="ascii")
    cgroups = take(fs, "0::/hub.scope\n", 4242)
    (ground.checkout / "hub.yaml").write_text("project: p\n", encoding="utf-8")
    config = load_config(ground.checkout).sandbox._replace(limits=limits)
    return scope, prepare(config, ground.checkout, [ground.checkout / ".git"], cgroups=cgroups)


def test_with_a_delegated_cgroup_each_command_runs_in_its_own_and_the_kernels_verdict_fails_it(
    ground: Any,
) -> None:
    # A folder tree of the cgroup file system's shape, where the command can write what the kernel would
    # (no kernel on this machine enforces it: no cgroup v2 here is delegated with memory and pids).
    scope, jail = delegated(ground, SandboxLimits(processes=40, memory_mb=64))
    oom = "for d in cgroupfs/hub.scope/cmd-*; do printf 'oom 1\\noom_kill 1\\n' > $d/memory.events; done"

    fine = run_command("echo fine", ground.checkout, 60, jail)
    killed = run_command(oom, ground.checkout, 60, jail)

    assert fine.ok, fine.stderr
    made = sorted(scope.glob("cmd-*"))
    assert len(made) == 2
    assert (made[0] / "memory.max").read_text(encoding="ascii") == str(64 * 1024 * 1024)
    # The kernel counts threads: a bound of 40 would fail a threaded test run of 3 processes.
    assert (made[0] / "pids.max").read_text(encoding="ascii") == "320"
    assert (made[0] / "cgroup.procs").read_text(encoding="ascii").strip().isdigit()
    assert not killed.ok
    assert killed.failure == (
        "resource_limit: more than 64 MiB of memory (sandbox.limits.memory_mb): the kernel ended it "
        "(cgroup memory.max)"
    )


def test_with_a_cgroup_the_processes_are_counted_there_not_its_threads(ground: Any) -> None:
    _, jail = delegated(ground, SandboxLimits(processes=40))
    # What the kernel would list with 41 processes in the command's cgroup; the command then waits to be
    # ended (its clock, 60 s, bounds the wait).
    crowd = "for d in cgroupfs/hub.scope/cmd-*; do seq 1000 1040 > $d/cgroup.procs; done; exec sleep 60"

    crowded = run_command(crowd, ground.checkout, 60, jail)
    # The code a shell that cannot enter its cgroup exits with, from a command whose sandbox stood: its own.
    own = run_command("exit 125", ground.checkout, 60, jail)

    assert own.exit_code == 125 and own.failure is None
    assert not crowded.timed_out
    assert crowded.failure == "resource_limit: more than 40 processes (sandbox.limits.processes)"
