"""Issue 38, item 4: where a cgroup v2 is delegated, each sandboxed command gets one of its own with the
memory and process limits, and the kernel's verdict is read back. This machine (like most) delegates none:
the decision and every write are tested against a folder tree of the cgroup file system's shape; the
kernel's side (enforcement, `cgroup.kill`, removal of a cgroup with its control files) was not run here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.core.sandbox_config import SandboxLimits
from hub.safety.cgroup import ENTER_FAILED, CgroupRefused, CommandGroup, command_group, delegation, take

PID = 4242
SCOPE = "user.slice/user-1000.slice/user@1000.service/app.slice/hub.scope"


def cgroup_fs(root: Path, procs: str = f"{PID}\n", controllers: str = "cpu io memory pids") -> Path:
    """A cgroup v2 tree with the scope a `systemd-run --user --scope -p Delegate=yes` gives."""
    folder = root / SCOPE
    folder.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids hugetlb\n", encoding="ascii")
    (folder / "cgroup.controllers").write_text(controllers + "\n", encoding="ascii")
    (folder / "cgroup.procs").write_text(procs, encoding="ascii")
    (folder / "cgroup.subtree_control").write_text("", encoding="ascii")
    return folder


def test_a_process_outside_cgroup_v2_or_without_the_controllers_gets_no_cgroup_and_the_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n", encoding="ascii")

    v1 = delegation(tmp_path, "4:memory:/x\n8:pids:/\n", PID)
    hybrid = delegation(tmp_path, "4:memory:/x\n0::/\n", PID)

    assert v1.base is None and "no cgroup v2" in v1.why
    assert hybrid.base is None and "offers no memory and no pids controller" in hybrid.why
    assert "systemd-run --user --scope -p Delegate=yes" in hybrid.said()


def test_a_delegated_cgroup_holding_the_hub_alone_is_taken_the_hub_moved_into_a_leaf(tmp_path: Path) -> None:
    scope = cgroup_fs(tmp_path)

    found = take(tmp_path, f"0::/{SCOPE}\n", PID)

    assert found.base == scope and found.ready
    # No internal processes: the hub leaves the cgroup whose children get the controllers.
    assert (scope / "hub" / "cgroup.procs").read_text(encoding="ascii") == str(PID)
    assert (scope / "cgroup.subtree_control").read_text(encoding="ascii") == "+memory +pids"
    assert "cgroup of its own under" in found.said()


def test_a_cgroup_shared_with_other_processes_is_left_untouched(tmp_path: Path) -> None:
    scope = cgroup_fs(tmp_path, procs=f"977\n{PID}\n")

    found = take(tmp_path, f"0::/{SCOPE}\n", PID)

    assert found.base is None and "1 other processes" in found.why
    assert not (scope / "hub").exists()
    assert (scope / "cgroup.subtree_control").read_text(encoding="ascii") == ""


def test_a_hub_started_by_a_hub_uses_the_cgroups_set_up_before_it(tmp_path: Path) -> None:
    scope = cgroup_fs(tmp_path, procs="")
    (scope / "cgroup.subtree_control").write_text("memory pids\n", encoding="ascii")
    (scope / "hub").mkdir()

    found = delegation(tmp_path, f"0::/{SCOPE}/hub\n", PID)

    assert found.base == scope and found.ready


def test_a_commands_cgroup_holds_its_limits_and_says_what_the_kernel_stopped(tmp_path: Path) -> None:
    group = command_group(tmp_path, SandboxLimits(processes=50, memory_mb=64, disk_mb=8))
    assert group is not None

    assert (group.path / "memory.max").read_text(encoding="ascii") == str(64 * 1024 * 1024)
    assert (group.path / "memory.swap.max").read_text(encoding="ascii") == "0"
    # The kernel counts every thread: cargo, a JVM, a threaded pytest have far more than processes.
    assert (group.path / "pids.max").read_text(encoding="ascii") == "400"
    assert group.stopped() is None
    (group.path / "pids.events").write_text("max 3\n", encoding="ascii")
    assert "more than 400 tasks, threads counted (8 x sandbox.limits.processes)" in str(group.stopped())
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n", encoding="ascii")
    assert "more than 64 MiB of memory (sandbox.limits.memory_mb): the kernel ended it" in str(
        group.stopped()
    )


def test_the_command_is_in_its_cgroup_from_its_first_instruction(tmp_path: Path) -> None:
    group = command_group(tmp_path, SandboxLimits())
    assert group is not None

    done = subprocess.run(
        group.wrap(["/bin/sh", "-c", "echo $$"]), capture_output=True, text=True, check=True
    )

    # The same process: the wrapper wrote its pid, then became the command.
    assert (group.path / "cgroup.procs").read_text(encoding="ascii").strip() == done.stdout.strip()


def test_a_command_that_cannot_enter_its_cgroup_does_not_run_and_is_the_hubs_error(tmp_path: Path) -> None:
    group = command_group(tmp_path, SandboxLimits())
    assert group is not None
    (group.path / "cgroup.procs").mkdir()  # a write the kernel refuses

    done = subprocess.run(group.wrap(["/bin/sh", "-c", "echo RAN"]), capture_output=True, text=True)

    assert done.returncode == ENTER_FAILED and "RAN" not in done.stdout
    # Not the command's failure (tests_failed against the model): the hub's, with what to do.
    with pytest.raises(CgroupRefused) as refused:
        group.refused(done.returncode, started=False)
    assert "it did not run" in str(refused.value) and "Delegate=yes" in refused.value.hint
    group.refused(ENTER_FAILED, started=True)  # the sandbox stood: the command's own exit code


def test_the_cgroups_a_killed_hub_left_are_removed_by_the_next_hub(tmp_path: Path) -> None:
    scope = cgroup_fs(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = scope / f"cmd-{gone.pid}-3"
    left.mkdir()
    running = scope / f"cmd-{os.getpid()}-1"
    running.mkdir()

    take(tmp_path, f"0::/{SCOPE}\n", PID)

    assert not left.exists()
    assert running.exists()  # a hub still running owns it


def test_without_cgroup_kill_the_processes_listed_in_the_cgroup_are_killed(tmp_path: Path) -> None:
    (tmp_path / "cmd").mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as held:
        (tmp_path / "cmd" / "cgroup.procs").write_text(f"{held.pid}\n", encoding="ascii")

        CommandGroup(tmp_path / "cmd", SandboxLimits()).remove()

        assert held.wait(timeout=10) == -9
