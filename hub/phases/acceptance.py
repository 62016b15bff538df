"""Running the contract's acceptance commands: in the sandbox (`hub.sandbox`), each in its own process
group, with a timeout that kills the whole tree."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hub.config import Config
from hub.log import get_logger
from hub.sandbox import Jail, prepare
from hub.trust import control_paths

log = get_logger("hub.phase")

TAIL = 4000


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> dict[str, object]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timed_out": self.timed_out,
        }

    def feedback(self) -> str:
        what = "timed out" if self.timed_out else f"exited {self.exit_code}"
        out = (
            self.stdout[-TAIL:] + ("\n" if self.stdout and self.stderr else "") + self.stderr[-TAIL:]
        ).strip()
        return f"$ {self.command}\n({what})\n{out}"


def run_command(command: str, cwd: Path, timeout: float, jail: Jail | None = None) -> CommandResult:
    """Run one shell command (in `jail` when given); on timeout kill its whole process group, so no child
    outlives it. In the sandbox the command also has a PID namespace of its own: killing bwrap ends
    every process in it, even one that left the process group with setsid."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        jail.argv(command, cwd) if jail else command,
        shell=jail is None,
        env=dict(jail.env) if jail else None,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        timed_out = True
    return CommandResult(
        command, proc.returncode, stdout or "", stderr or "", time.perf_counter() - started, timed_out
    )


def jail_for(config: Config) -> Jail:
    """The sandbox acceptance commands run in, for this configuration; logged, so the phase log says
    whether commands were sandboxed. Raises SandboxUnavailable under `sandbox: required`."""
    protected = [config.repo_root / p for p in control_paths(config)]
    jail = prepare(config.sandbox, config.repo_root, protected)
    log.info("acceptance.sandbox", sandboxed=jail.sandboxed, mode=str(config.sandbox.mode), detail=jail.why)
    return jail
