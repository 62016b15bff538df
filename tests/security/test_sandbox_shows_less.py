"""Issue 38, point 13: the sandbox shows no host path in its init's command line (bwrap reads its options
from a memfd) and none of the host's network interfaces (of /sys only the CPUs are there), while programs
still count the processors. Against a checkout outside /tmp (conftest.py)."""

from __future__ import annotations

from typing import Any

from hub.core.config import load_config
from hub.phases.acceptance import CommandResult, jail_for, run_command


def run(ground: Any, command: str) -> CommandResult:
    (ground.checkout / "hub.yaml").write_text("project: p\n", encoding="utf-8")
    return run_command(command, ground.checkout, 60, jail_for(load_config(ground.checkout), ground.checkout))


def test_the_sandboxs_init_shows_no_mount_of_the_host(ground: Any) -> None:
    result = run(ground, "tr '\\0' ' ' < /proc/1/cmdline")

    assert "bwrap" in result.stdout and "--args" in result.stdout
    assert "--ro-bind" not in result.stdout and str(ground.tool) not in result.stdout
    assert str(ground.home / ".local") not in result.stdout


def test_the_options_fd_is_closed_before_the_command_runs(ground: Any) -> None:
    result = run(ground, "ls /proc/self/fd /proc/1/fd")

    assert sorted(set(result.stdout.split()) - {"/proc/self/fd:", "/proc/1/fd:"}) <= [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
    ]
    assert "bwrap-args" not in run(ground, "ls -l /proc/1/fd /proc/self/fd").stdout


def test_the_hosts_network_interfaces_are_not_shown_and_the_cpus_are(ground: Any) -> None:
    result = run(ground, "ls /sys/class/net 2>/dev/null; tail -n +3 /proc/net/dev; echo cpus=$(nproc)")

    names = [line.split(":")[0].strip() for line in result.stdout.splitlines() if ":" in line]
    assert names == ["lo"]
    assert "eth0" not in result.stdout and "cpus=" in result.stdout and "cpus=\n" not in result.stdout
