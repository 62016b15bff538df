"""Running the contract's acceptance commands: in the sandbox (`hub.safety.sandbox`), each in its own process
group, with a timeout that kills the whole tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from hub.state.contract import AcceptanceResult

from hub.core.config import Config
from hub.core.faults import crash_point
from hub.core.log import get_logger
from hub.repo import leftovers
from hub.safety.sandbox import Jail, absent, prepare, remove_created
from hub.safety.trust import control_paths

log = get_logger(__name__)

TAIL = 4000
# Bytes of each stream the hub keeps (the end of it): a command printing for as long as its clock runs
# must not fill the hub's memory (400 MB printed held 1.2 GB resident when all of it was kept).
CAPTURE = 256 * 1024


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


def run_command(
    command: str, cwd: Path, timeout: float, jail: Jail | None = None, pidfile: Path | None = None
) -> CommandResult:
    """Run one shell command (in `jail` when given); on timeout kill its whole process group, so no child
    outlives it. In the sandbox the command also has a PID namespace of its own: killing bwrap ends
    every process in it, even one that left the process group with setsid. `pidfile` records the
    sandbox's init (unsandboxed: the command's group) while it runs, for the task's next phase to end
    should the hub be killed meanwhile (hub.repo.leftovers): bwrap arms its die-with-parent only after it has
    forked, and unsandboxed nothing dies with the hub."""
    started = time.perf_counter()
    sandboxed = jail is not None and jail.sandboxed
    # bwrap writes to --info-fd once the sandbox stands (its die-with-parent armed) and closes it: until
    # then a kill of the hub could leave a sandbox starting up without a parent to die with.
    info_read, info_write = os.pipe() if sandboxed else (-1, -1)
    were_absent = absent(jail.guarded) if jail else []
    try:
        proc = subprocess.Popen(
            jail.argv(command, cwd, info_fd=info_write if sandboxed else None) if jail else command,
            shell=jail is None,
            env=dict(jail.env) if jail else None,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            pass_fds=(info_write,) if sandboxed else (),
        )
    finally:
        if sandboxed:
            os.close(info_write)
    if sandboxed:
        with os.fdopen(info_read, "rb") as info:
            _remember(pidfile, info.read())
    else:
        # Unsandboxed, the command's process group is what a later phase can still end.
        _remember(pidfile, json.dumps({"child-pid": proc.pid, "group": True}).encode())
    crash_point("acceptance:running")
    assert proc.stdout is not None and proc.stderr is not None
    readers = [_Tail(proc.stdout), _Tail(proc.stderr)]
    try:
        proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        timed_out = True
    stdout, stderr = (reader.text() for reader in readers)
    if pidfile is not None:
        pidfile.unlink(missing_ok=True)
    exit_code = proc.returncode
    created = remove_created(were_absent)
    if created:
        names = ", ".join(
            sorted(p.relative_to(cwd).as_posix() if p.is_relative_to(cwd) else str(p) for p in created)
        )
        stderr += (
            f"\nhub: the command created the hub's control files {names}; removed, and the command fails"
        )
        log.warning("acceptance.control_files_created", paths=names)
        exit_code = exit_code or 1
    return CommandResult(command, exit_code, stdout, stderr, time.perf_counter() - started, timed_out)


class _Tail:
    """Reads a stream to its end on a thread of its own, keeping only its last CAPTURE bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.kept = bytearray()
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(65536):
                self.kept += chunk
                if len(self.kept) > 2 * CAPTURE:
                    del self.kept[:-CAPTURE]

    def text(self) -> str:
        # Unsandboxed, a child that left the process group may hold the pipe open past the kill: what
        # it wrote so far is the answer, and the hub does not wait for it.
        self.thread.join(timeout=5)
        return bytes(self.kept[-CAPTURE:]).decode("utf-8", errors="replace")


def jail_for(config: Config, work_root: Path | None = None) -> Jail:
    """The sandbox acceptance commands run in, for this configuration; logged, so the phase log says
    whether commands were sandboxed. Raises SandboxUnavailable under `sandbox: required`. `work_root`:
    the task's worktree, the one folder the commands may write (default: the repository)."""
    root = work_root or config.repo_root
    protected = [root / p for p in control_paths(config)]
    jail = prepare(config.sandbox, root, protected)
    log.info("acceptance.sandbox", sandboxed=jail.sandboxed, mode=str(config.sandbox.mode), detail=jail.why)
    return jail


def _remember(pidfile: Path | None, info: bytes) -> None:
    """Record the sandbox's init (its host pid), or the unsandboxed command's group, while it runs."""
    if pidfile is None:
        return
    try:
        data = json.loads(info)
        pid = int(data["child-pid"])
    except (ValueError, KeyError, TypeError):
        return
    leftovers.remember(pidfile, pid, group=bool(data.get("group")))
