"""hub.repo.child: a child runs in a group of its own, its clock and its end reach the whole group, and its
pid file lasts exactly as long as it runs."""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from hub.repo import leftovers
from hub.repo.child import PIPE, Child

# Prints "ready" once its SIGTERM handler stands; on SIGTERM says goodbye and exits 3. The goodbye is an
# os.write: the parent reads "ready" while print() may still be inside stdout's flush, and a handler
# that printed then would re-enter the buffered writer (RuntimeError, exit 1; seen under load).
POLITE = (
    "import os, signal, sys, time\n"
    "def bye(*_):\n"
    "    os.write(1, b'bye\\n')\n"
    "    sys.exit(3)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
# Ignores SIGTERM.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"


@contextlib.contextmanager
def ready(code: str) -> Iterator[tuple[Child, IO[str]]]:
    """A Python child that has said "ready", and its stdout. The pipe is closed even when the test fails:
    one left to the garbage collector is a ResourceWarning raised in whichever test runs then."""
    with Child([sys.executable, "-c", code], stdout=PIPE, text=True) as child:
        assert child.proc.stdout is not None
        with child.proc.stdout as out:
            assert out.readline() == "ready\n"
            yield child, out


def closed_within(fd: int, seconds: float) -> bool:
    """Whether every writer of the pipe `fd` is gone (end of file) within `seconds`."""
    ready, _, _ = select.select([fd], [], [], seconds)
    return bool(ready) and os.read(fd, 100) == b""


def test_a_child_leads_a_session_and_a_process_group_of_its_own() -> None:
    with Child(["sleep", "60"]) as child:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        assert os.getsid(child.pid) == child.pid


def test_the_clock_ends_the_child_and_what_it_started_in_its_group() -> None:
    # The background sleep holds stdout open: end of file is its death too.
    with Child(["sh", "-c", "sleep 60 & exec sleep 60"], stdout=PIPE) as child:
        assert child.proc.stdout is not None
        with child.proc.stdout as out:
            with child.clock(0.2):
                code = child.proc.wait()
            assert child.timed_out and code == -9
            assert closed_within(out.fileno(), 10)


def test_a_child_done_before_its_clock_has_not_timed_out() -> None:
    with Child(["true"]) as child, child.clock(60):
        assert child.proc.wait() == 0
    assert not child.timed_out


def test_with_a_grace_the_child_gets_sigterm_first_and_may_say_goodbye() -> None:
    with ready(POLITE) as (child, out):
        child.end(grace=30)
        assert child.proc.returncode == 3
        assert out.read() == "bye\n"


def test_a_child_that_ignores_sigterm_is_killed_when_its_grace_runs_out() -> None:
    with ready(STUBBORN) as (child, _):
        child.end(grace=0.2)
        assert child.proc.returncode == -9


def test_without_a_grace_the_child_is_killed_at_once() -> None:
    with ready(POLITE) as (child, out):
        child.end()
        assert child.proc.returncode == -9
        assert out.read() == ""


def test_the_pid_file_names_the_group_while_it_runs_and_goes_with_the_block(tmp_path: Path) -> None:
    pidfile = tmp_path / ".judge.pid"
    with Child(["sleep", "60"]) as child:
        child.remember(pidfile)
        record = json.loads(pidfile.read_text(encoding="utf-8"))
        assert record["pid"] == child.pid and record["group"] is True
        assert record["start"] == leftovers.start_time(child.pid)
    assert not pidfile.exists()
    assert child.proc.returncode == -9


def test_an_error_in_the_block_ends_the_child_and_removes_its_pid_file(tmp_path: Path) -> None:
    pidfile = tmp_path / ".sandbox.pid"
    with pytest.raises(KeyboardInterrupt), Child(["sleep", "60"]) as child:
        child.remember(pidfile)
        raise KeyboardInterrupt
    assert child.proc.returncode == -9
    assert not pidfile.exists()


def test_what_a_killed_hub_left_running_is_reaped_from_its_pid_file(tmp_path: Path) -> None:
    pidfile = tmp_path / ".judge.pid"
    with Child(["sleep", "60"]) as child:
        child.remember(pidfile)
        # The next phase of a task whose hub died: the file is all it has.
        assert leftovers.reap(pidfile) is True
        assert child.wait(10) == -9
