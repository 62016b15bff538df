"""Memory and processes bounded by the kernel, where this user may make cgroups (issue 38, item 4).

A cgroup v2 with the memory and pids controllers bounds what polling cannot see whole: memfds, tmpfs pages
and the processes of a nested namespace are all charged to it. Each sandboxed command then runs in a
child cgroup of its own (`memory.max` = `sandbox.limits.memory_mb`, `memory.swap.max` 0, `pids.max` =
THREADS_PER_PROCESS x `sandbox.limits.processes`: the kernel counts every thread, and cargo, a JVM or a
threaded test run has far more threads than processes; the processes themselves are counted from the
cgroup's `cgroup.procs` by `hub.safety.limits.Watch`), entered by a two-line shell that writes its own
pid to `cgroup.procs` and execs the sandbox, so nothing of the command runs outside it (if it cannot, it
exits ENTER_FAILED before the sandbox starts: a hub error, never the command's failure); the cgroup is
removed afterwards, and its `memory.events` (`oom_kill`) and `pids.events` (`max`) say whether the
kernel stopped it. A hub killed before it removed one leaves `cmd-<pid>-<n>`: the next hub to `take()`
the cgroup removes those whose pid is dead.

Where: the cgroup this process runs in (`/proc/self/cgroup`'s `0::` line) must be writable, offer both
controllers, and hold this process alone. The kernel's "no internal processes" rule forbids enabling
controllers for the children of a cgroup that holds processes itself, so the hub first moves itself into
a leaf, `<own>/hub`, then writes `+memory +pids` to `<own>/cgroup.subtree_control`; the commands' cgroups
are the leaf's siblings. `systemd-run --user --scope -p Delegate=yes hub ...` gives such a cgroup; a login
session's scope holds the shell too, and there the hub polls as before (`hub.safety.limits.Watch`). A hub
a hub started (a phase of `hub watch`) finds itself in the leaf already and uses its parent. Everything
here takes the cgroup file system's root as a parameter: the decision and the writes are tested against a
folder tree of the same shape.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hub.core.errors import HubError
from hub.core.log import get_logger
from hub.core.sandbox_config import SandboxLimits

log = get_logger(__name__)

CGROUP_FS = Path("/sys/fs/cgroup")
LEAF = "hub"
NEEDED = ("memory", "pids")
MIB = 1024 * 1024
# Writes its own pid into the cgroup (its first argument) and becomes the command (the rest): the same
# process, so everything the command starts is in the cgroup from its first instruction.
# Exit code of the shell when it cannot enter the cgroup: the sandbox never started, so bwrap wrote
# no --info-fd, which tells it apart from a command that exits with the same code.
ENTER_FAILED = 125
ENTER = f'echo $$ > "$0/cgroup.procs" || exit {ENTER_FAILED}; exec "$@"'
# Tasks (threads) pids.max and RLIMIT_NPROC leave room for, per process `sandbox.limits.processes` allows.
THREADS_PER_PROCESS = 8
# How long a removal waits for the kernel to reap a killed command's processes.
REMOVE_SECONDS = 2.0

_names = itertools.count(1)


class CgroupRefused(HubError):
    """A command could not be put in its cgroup (the kernel refused the write to `cgroup.procs`): the
    command never ran, so nothing is said about it."""


@dataclass(frozen=True)
class Delegation:
    """Where the commands' cgroups go (`base`), or why there is none (`base` None, `why` a sentence).
    `ready`: the hub is in `base/hub` and the controllers are on; otherwise `take` must move it first."""

    base: Path | None
    why: str
    ready: bool = False

    def said(self) -> str:
        """How memory and processes are bounded, for `hub doctor`."""
        if self.base is not None:
            return (
                f"each command in a cgroup of its own under {self.base} (memory.max, memory.swap.max 0, "
                "pids.max): memfds, tmpfs pages and nested namespaces counted"
            )
        return (
            "polled by the hub (resident memory, memfds, processes in the sandbox, a few times a second), "
            f"since {self.why}; for the kernel's bound, start the hub alone in a delegated cgroup: "
            "`systemd-run --user --scope -p Delegate=yes hub ...`"
        )


def v2_root() -> Path:
    """The cgroup v2 file system: mounted at /sys/fs/cgroup alone, or beside v1's controllers under
    `unified` (a hybrid layout)."""
    return CGROUP_FS if (CGROUP_FS / "cgroup.controllers").exists() else CGROUP_FS / "unified"


def delegation(root: Path | None = None, own: str | None = None, pid: int | None = None) -> Delegation:
    """Whether commands can be given cgroups under this process's own (`own`: the text of
    /proc/self/cgroup, read when None), and where; nothing is written."""
    root = v2_root() if root is None else root
    pid = os.getpid() if pid is None else pid
    if own is None:
        try:
            own = Path("/proc/self/cgroup").read_text(encoding="utf-8")
        except OSError as exc:
            return Delegation(None, f"/proc/self/cgroup cannot be read ({exc.strerror})")
    line = next((x for x in own.splitlines() if x.startswith("0::")), None)
    if line is None:
        return Delegation(None, "this process is in no cgroup v2 (a v1 hierarchy holds memory and pids)")
    folder = root / line[3:].strip().lstrip("/")
    if folder.name == LEAF and _enabled(folder.parent):
        return Delegation(folder.parent, f"cgroup v2 at {folder.parent}", ready=True)
    offered = _words(folder / "cgroup.controllers")
    missing = [c for c in NEEDED if c not in offered]
    if missing:
        return Delegation(None, f"the cgroup v2 {folder} offers no {' and no '.join(missing)} controller")
    if not all(os.access(folder / name, os.W_OK) for name in ("cgroup.procs", "cgroup.subtree_control")):
        return Delegation(None, f"the cgroup v2 {folder} is not delegated to this user (not writable)")
    others = [p for p in _words(folder / "cgroup.procs") if p != str(pid)]
    if others:
        return Delegation(
            None,
            f"the cgroup v2 {folder} holds {len(others)} other processes besides the hub (a login session's "
            "scope), so it cannot have child cgroups",
        )
    return Delegation(folder, f"cgroup v2 at {folder} (delegated, the hub alone in it)")


def _enabled(folder: Path) -> bool:
    words = _words(folder / "cgroup.subtree_control")
    return all(c in words for c in NEEDED)


def _words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return []


_LOCK = threading.Lock()
_TAKEN: dict[Path, Delegation] = {}


def take(root: Path | None = None, own: str | None = None, pid: int | None = None) -> Delegation:
    """`delegation()`, made ready: the hub moved into its leaf and the controllers enabled, once a
    process. A write the kernel refuses (a process started meanwhile, another hub) leaves the polling."""
    root = v2_root() if root is None else root
    with _LOCK:
        if root in _TAKEN:
            return _TAKEN[root]
        found = delegation(root, own, pid)
        if found.base is not None and not found.ready:
            try:
                leaf = found.base / LEAF
                leaf.mkdir(exist_ok=True)
                (leaf / "cgroup.procs").write_text(str(os.getpid() if pid is None else pid), encoding="ascii")
                (found.base / "cgroup.subtree_control").write_text(
                    " ".join(f"+{c}" for c in NEEDED), encoding="ascii"
                )
                found = Delegation(found.base, found.why, ready=True)
            except OSError as exc:
                log.warning("sandbox.cgroup_refused", base=str(found.base), error=str(exc))
                found = Delegation(None, f"the kernel refused to set up {found.base}: {exc.strerror or exc}")
        if found.base is not None:
            _remove_dead(found.base)
        _TAKEN[root] = found
        return found


def _remove_dead(base: Path) -> None:
    """Remove the commands' cgroups a killed hub left (`cmd-<pid>-<n>`, `pid` no longer running)."""
    try:
        names = [p for p in base.iterdir() if p.name.startswith("cmd-")]
    except OSError:
        return
    for path in names:
        pid = path.name.split("-")[1]
        if pid.isdigit() and not _running(int(pid)):
            CommandGroup(path, SandboxLimits()).remove()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive
    return True


@dataclass(frozen=True)
class CommandGroup:
    """One command's cgroup."""

    path: Path
    limits: SandboxLimits

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv`, entering this cgroup before it runs."""
        return ["/bin/sh", "-c", ENTER, str(self.path), *argv]

    def stopped(self) -> str | None:
        """What the kernel stopped, in the words of a `resource_limit` failure, or None."""
        if _count(self.path / "memory.events", "oom_kill"):
            return (
                f"more than {self.limits.memory_mb} MiB of memory (sandbox.limits.memory_mb): the kernel "
                "ended it (cgroup memory.max)"
            )
        if _count(self.path / "pids.events", "max"):
            return (
                f"more than {self.limits.processes * THREADS_PER_PROCESS} tasks, threads counted "
                f"({THREADS_PER_PROCESS} x sandbox.limits.processes): the kernel refused a new process or "
                "thread (cgroup pids.max)"
            )
        return None

    def refused(self, exit_code: int, started: bool) -> None:
        """Raise CgroupRefused when the command exited ENTER_FAILED before its sandbox `started`."""
        if exit_code == ENTER_FAILED and not started:
            raise CgroupRefused(
                f"the command could not be put in its cgroup {self.path} (the kernel refused the write to "
                "cgroup.procs); it did not run",
                hint="start the hub alone in a cgroup delegated to this user "
                "(`systemd-run --user --scope -p Delegate=yes hub ...`), or outside one to have it polled",
            )

    def remove(self) -> bool:
        """Remove the cgroup once its processes are gone (killed first: by `cgroup.kill`, or each pid in
        `cgroup.procs` where the kernel is older than 5.14); False when it could not be (logged)."""
        try:
            _write(self.path / "cgroup.kill", "1")
        except OSError:
            for pid in _words(self.path / "cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + REMOVE_SECONDS
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError as exc:
                # EBUSY: processes the kernel has not reaped yet; anything else will not pass by waiting.
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    log.warning("sandbox.cgroup_left", path=str(self.path), error=str(exc))
                    return False
                time.sleep(0.01)


def command_group(base: Path, limits: SandboxLimits) -> CommandGroup | None:
    """A fresh cgroup under `base` with `limits` set, or None (logged) when the kernel refuses one."""
    path = base / f"cmd-{os.getpid()}-{next(_names)}"
    try:
        path.mkdir()
        (path / "memory.max").write_text(str(limits.memory_mb * MIB), encoding="ascii")
        (path / "pids.max").write_text(str(limits.processes * THREADS_PER_PROCESS), encoding="ascii")
    except OSError as exc:
        log.warning("sandbox.cgroup_unmade", path=str(path), error=str(exc))
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    # No swap for it where the kernel accounts swap (without, memory.swap.max is absent: none to bound).
    with contextlib.suppress(OSError):
        (path / "memory.swap.max").write_text("0", encoding="ascii")
    return CommandGroup(path, limits)


def _write(path: Path, text: str) -> None:
    """Write to a control file that must exist already (cgroupfs makes none on open)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def processes(path: Path) -> int:
    """The processes (not threads) in the cgroup at `path`."""
    return len(_words(path / "cgroup.procs"))


def _count(path: Path, key: str) -> int:
    for line in _words_lines(path):
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _words_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
