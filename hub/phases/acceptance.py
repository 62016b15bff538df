"""Running the contract's acceptance commands, each in its own process group with a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hub.contract import AcceptanceResult

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

    def summary(self) -> AcceptanceResult:
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


def run_command(command: str, cwd: Path, timeout: float) -> CommandResult:
    """Run one shell command; on timeout kill its whole process group, so no child outlives it."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        shell=True,
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
