"""A child process the hub starts and must be able to end: acceptance commands, the judge command, MCP stdio
servers, `hub watch`'s phase runs. One lifecycle for all of them:

- it runs in a session (and so a process group) of its own: a stop reaches its children too, and a
  terminal's Ctrl-C reaches only the hub, which then decides;
- `clock` ends it at its deadline, from a timer (`Popen.wait(timeout)` polls with sleeps of up to 50 ms,
  which a short command paid on top of its run), and says so in `timed_out`;
- `end` is the one kill policy: `grace` seconds after a SIGTERM to the group for the child to exit (none
  for code the hub does not trust), then SIGKILL to whatever is left in the group;
- `remember` records it in a pid file while it runs, for the task's next phase to end should the hub be
  killed meanwhile (`hub.repo.leftovers`); leaving the `with` block ends the group and removes the file.

One kind is not ended by the hub: a detached child (`detach`, the notifier of issue 37) is given its
input, left to run under its own clock, and only reaped, so a hanging one never holds a phase.

How a caller first *asks* a child to stop (closing its stdin, a SIGINT to a hub child) is the caller's:
that is a request in the child's own protocol, not a kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hub.repo import leftovers

if TYPE_CHECKING:
    from types import TracebackType

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
EXIT_POLL_SECONDS = 0.01  # how often a grace period looks whether the child has exited

Stream = int | IO[Any] | None


class Child:
    """One child process in a session of its own, started at construction. Use it in a `with` block: its
    end ends the group (`end(grace)`) and removes the pid file."""

    def __init__(
        self,
        argv: Sequence[str] | str,
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: Stream = DEVNULL,
        stdout: Stream = None,
        stderr: Stream = None,
        shell: bool = False,
        text: bool = False,
        bufsize: int = -1,
        pass_fds: Sequence[int] = (),
        preexec_fn: Callable[[], None] | None = None,
        grace: float = 0.0,
    ) -> None:
        self.grace = grace
        self.timed_out = False
        self.pidfile: Path | None = None
        self.proc: subprocess.Popen[Any] = subprocess.Popen(
            argv,
            shell=shell,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            encoding="utf-8" if text else None,
            errors="replace" if text else None,
            bufsize=bufsize,
            pass_fds=tuple(pass_fds),
            preexec_fn=preexec_fn,
            start_new_session=True,
        )
        self.pid = self.proc.pid

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Also when the child exited by itself: what it left in its group goes with it.
        self.end(self.grace)
        if self.pidfile is not None:
            self.pidfile.unlink(missing_ok=True)

    # --- while it runs --------------------------------------------------------------------------------

    def remember(self, pidfile: Path | None, pid: int | None = None, group: bool = True) -> None:
        """Record `pid` (default: this child, the leader of its group) in `pidfile` until the `with` block
        ends; nothing when `pidfile` is None. A file that cannot be written raises, and the block's end
        still ends the child: it never runs unrecorded beside the failure it causes."""
        if pidfile is None:
            return
        self.pidfile = pidfile
        leftovers.remember(pidfile, self.pid if pid is None else pid, group=group)

    @contextlib.contextmanager
    def clock(self, seconds: float) -> Iterator[None]:
        """Within the block, the child is ended (`end(grace)`) once `seconds` have passed; `timed_out`
        says whether it was. The block's own waiting (`proc.wait()`, `proc.communicate(...)`) returns then."""

        def expire() -> None:
            self.timed_out = True
            self.end(self.grace)

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            timer.join()  # an end under way finishes before the caller reads what the child left

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, waiting up to `timeout` seconds (None: until it exits); None if still running."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def exited(self) -> bool:
        """Whether the child has exited, reaped or not (without reaping it: `proc` still gets its code)."""
        if self.proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True  # reaped meanwhile by another thread's wait

    def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def interrupt(self) -> None:
        """SIGINT to the child alone, as a terminal's Ctrl-C asks a hub to stop (its own children are its
        to end)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)

    # --- the one kill policy ----------------------------------------------------------------------------

    def end(self, grace: float = 0.0) -> None:
        """End the child and every process left in its group, and reap it (`proc.returncode`).

        With `grace`, SIGTERM goes to the group first and the child has up to `grace` seconds to exit
        (its group gets no more once it has); then SIGKILL to the group. Without, SIGKILL at once: for
        code the hub does not trust, which could trap a SIGTERM to run past its clock."""
        if grace > 0 and not self.exited():
            _signal_group(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while not self.exited() and time.monotonic() < deadline:
                time.sleep(EXIT_POLL_SECONDS)
        _signal_group(self.pid, signal.SIGKILL)
        self.proc.wait()


def detach(argv: Sequence[str], data: bytes, output: Path, env: Mapping[str, str] | None = None) -> int:
    """Start `argv` in a session of its own with `data` on its stdin and its output appended to `output`;
    return its pid without waiting. It keeps its own clock: the hub never ends it, and a daemon thread
    only reaps it, so neither a phase nor the hub's exit waits for it. Its stdout and stderr are never
    the hub's: cron and a test's `capture_output` wait for those to close."""
    if len(data) > DETACH_INPUT_BYTES:
        raise ValueError(f"{len(data)} bytes for a detached child's stdin; at most {DETACH_INPUT_BYTES}")
    with output.open("ab") as sink:
        proc = subprocess.Popen(
            argv, stdin=PIPE, stdout=sink, stderr=sink, env=env, start_new_session=True, close_fds=True
        )
    assert proc.stdin is not None
    # Within a pipe's buffer: the write returns at once whether or not the child ever reads it; a child
    # that exited unread leaves a broken pipe (the close still closes the file).
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    return proc.pid


# Linux's pipe buffer: a larger stdin could block the write until the child reads.
DETACH_INPUT_BYTES = 60_000


def _signal_group(pgid: int, signum: int) -> None:
    # The group outlives its leader while members remain; its id is not reused until it is empty.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
