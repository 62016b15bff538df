"""Processes a killed hub leaves running, and their ending by the next phase of the same task.

A phase that starts a process which does not die with the hub (an unsandboxed acceptance command, the
judge command, a sandbox in the instant before bwrap arms its die-with-parent) records it in a pid file
in the task's folder while it runs, and removes the file when the process has ended. A phase that finds
such a file at its start (`Run`'s `running`) kills what it names, if that is still the same process (its
start time matches), so a task recovered after a SIGKILL never has two of them at work.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from hub.core.atomic import write_atomic
from hub.core.log import get_logger

log = get_logger(__name__)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def remember(pidfile: Path, pid: int, group: bool) -> None:
    """Record `pid` (the leader of its own process group when `group`), its start time and the host."""
    record = {"pid": pid, "start": start_time(pid), "group": group, "host": os.uname().nodename}
    write_atomic(pidfile, json.dumps(record))


def reap(pidfile: Path) -> bool:
    """Kill what `pidfile` names (its process group when recorded so), if it is still that process, and
    remove the file. True if one was killed."""
    try:
        recorded = json.loads(pidfile.read_text(encoding="utf-8"))
        pid, start = int(recorded["pid"]), recorded["start"]
    except OSError:
        return False
    except (ValueError, KeyError, TypeError):
        pidfile.unlink(missing_ok=True)  # names nothing it could be sure of: nothing is killed
        return False
    killed = False
    here = recorded.get("host", os.uname().nodename) == os.uname().nodename  # a pid means nothing elsewhere
    if here and start is not None and start_time(pid) == start:
        try:
            if recorded.get("group"):
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed = True
            log.warning("leftover.reaped", pid=pid, file=pidfile.name, why="left running by a killed hub")
        except ProcessLookupError:
            pass
        except PermissionError:
            # Another user's (a hub once run under sudo): not ours to end, and no reason to fail every
            # later phase of the task over it.
            log.warning("leftover.not_permitted", pid=pid, file=pidfile.name)
    pidfile.unlink(missing_ok=True)
    return killed
