"""Bounds on one sandboxed command (issue 28): processes, memory, bytes written (`sandbox.limits`).

bwrap has no resource limits of its own, and cgroups need a delegated hierarchy most machines do not
give an unprivileged user (where one is, `hub.safety.cgroup` bounds memory and threads, and the watch
counts the processes in the cgroup and walks the disk). So two layers:

- rlimits set before bwrap starts (`prlimit --` in front of it), inherited by everything it runs: RLIMIT_FSIZE (no
  file grows past `disk_mb`: the writer gets SIGXFSZ), RLIMIT_DATA (no process maps more than four
  times `memory_mb`) and, for a hub not run by root (the kernel never applies it to root), RLIMIT_NPROC
  (it counts threads: room for THREADS_PER_PROCESS a process, as the cgroup's pids.max);
- `Watch`, a thread that polls the sandbox's PID namespace a few times a second: the processes in it,
  their resident memory together, and the bytes of the files in the writable root changed since the
  command started. Past a limit it ends the whole sandbox and says which limit; `remove_written` then
  deletes the untracked files the command wrote.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hub.core.log import get_logger
from hub.core.sandbox_config import SandboxLimits
from hub.safety.cgroup import THREADS_PER_PROCESS, processes

log = get_logger(__name__)

MIB = 1024 * 1024
POLL = 0.2  # seconds between two looks at the processes and memory
DISK_EVERY = 5  # polls between two walks of the writable root (each walk costs a directory scan)
WALK_ENTRIES = 200_000  # a walk stops there: a huge tree costs a bounded scan
PAGE = os.sysconf("SC_PAGE_SIZE")
# The shell reports a command killed by SIGXFSZ (a file past RLIMIT_FSIZE) as 128 + 25.
XFSZ_EXITS = {-signal.SIGXFSZ, 128 + signal.SIGXFSZ}
# RLIMIT_DATA is a backstop against one huge allocation, above what the watch measures (resident memory
# of all processes together), so that the watch is what ends a command and names the limit.
DATA_FACTOR = 4


def rlimits(limits: SandboxLimits) -> Callable[[], None]:
    """The function Popen runs in the child before bwrap: the per-process layer of the limits, where
    `prlimit` (util-linux) is missing. A preexec function makes Popen fork instead of vfork (~13 ms a
    command measured), so `prlimit_argv` is preferred."""
    disk, data, nproc = _values(limits)

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
        if nproc is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return apply


def prlimit_argv(prlimit: str, limits: SandboxLimits) -> list[str]:
    """The same limits as a `prlimit ... --` prefix, which execs bwrap in place (same pid)."""
    disk, data, nproc = _values(limits)
    argv = [prlimit, f"--fsize={disk}", f"--data={data}"]
    if nproc is not None:
        argv.append(f"--nproc={nproc}")
    return [*argv, "--"]


def _values(limits: SandboxLimits) -> tuple[int, int, int | None]:
    # RLIMIT_NPROC counts threads, like the cgroup's pids.max: the same room for a threaded command
    # (cargo, a JVM); the watch counts the processes.
    room = limits.processes * THREADS_PER_PROCESS
    nproc = own_tasks(os.getuid()) + room if os.getuid() != 0 else None
    return limits.disk_mb * MIB, DATA_FACTOR * limits.memory_mb * MIB, nproc


def own_tasks(uid: int, proc: str = "/proc") -> int:
    """The tasks (threads) of user `uid` now: RLIMIT_NPROC counts them all, not only the sandbox's."""
    count = 0
    for name in os.listdir(proc):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"{proc}/{name}").st_uid == uid:
                    count += len(os.listdir(f"{proc}/{name}/task"))
    return count


class Watch:
    """Polls one running sandbox (its init's host pid) against `limits`; `kill` ends it past one.
    `exceeded` then says which, in a sentence. With `cgroup` (the command's), the kernel bounds memory
    and threads: the processes are counted from the cgroup, and the disk walked."""

    def __init__(
        self,
        limits: SandboxLimits,
        init_pid: int,
        root: Path,
        kill: Callable[[], None],
        cgroup: Path | None = None,
    ) -> None:
        self.limits = limits
        self.cgroup = cgroup
        self.root = root
        self.kill = kill
        self.started = time.time_ns()
        self.exceeded: str | None = None
        self._used_at_start = self._used()
        self._stop = threading.Event()
        try:
            self._namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
        except OSError:
            self._namespace = ""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; one last look at the disk, for a command that wrote its bomb and ended between
        two walks."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self.exceeded is None:
            self.exceeded = self.check_disk()

    def _run(self) -> None:
        polls = 0
        while not self._stop.wait(POLL):
            polls += 1
            found = self._check(disk=polls % DISK_EVERY == 0)
            if found:
                self.exceeded = found
                log.warning("sandbox.resource_limit", limit=found)
                self.kill()
                return

    def _check(self, disk: bool) -> str | None:
        if self.cgroup is not None:
            # pids.max counts threads too and sits well above this: the process limit is read here.
            if processes(self.cgroup) > self.limits.processes:
                return f"more than {self.limits.processes} processes (sandbox.limits.processes)"
            return self.check_disk() if disk else None
        pids = self._pids()
        if len(pids) > self.limits.processes:
            return f"more than {self.limits.processes} processes (sandbox.limits.processes)"
        # A memfd's pages belong to no process's resident set until mapped: counted by the file's size.
        resident = sum(_resident(pid) for pid in pids) + _memfd_bytes(pids)
        if resident > self.limits.memory_mb * MIB:
            return f"more than {self.limits.memory_mb} MiB of memory (sandbox.limits.memory_mb)"
        if disk:
            return self.check_disk()
        return None

    def check_disk(self) -> str | None:
        # The file system's own count first: a walk of the tree costs a stat a file (140 ms for a
        # checkout with a .venv), the used blocks nothing. Only a growth of the limit or more is walked.
        used, before = self._used(), self._used_at_start
        # Half the limit: another process freeing space meanwhile must not hide a command's writes.
        if used is not None and before is not None and used - before < self.limits.disk_mb * MIB // 2:
            return None
        if self.written() >= self.limits.disk_mb * MIB:
            return f"{self.limits.disk_mb} MiB written or more (sandbox.limits.disk_mb)"
        return None

    def _pids(self) -> list[int]:
        if not self._namespace:
            return []
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{name}/ns/pid") == self._namespace:
                        found.append(int(name))
        return found

    def _used(self) -> int | None:
        """Bytes in use on the writable root's file system (other writers only make it larger)."""
        try:
            info = os.statvfs(self.root)
        except OSError:
            return None  # unknown: the walk decides
        return (info.f_blocks - info.f_bfree) * info.f_frsize

    def written(self) -> int:
        """Bytes in the files of the writable root changed since the command started (git metadata aside)."""
        return sum(size for _, size in _changed(self.root, self.started))


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _memfd_bytes(pids: list[int]) -> int:
    """The bytes held in the memfds the processes have open, each file once."""
    files: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    files[(info.st_dev, info.st_ino)] = info.st_size
    return sum(files.values())


def _changed(root: Path, since_ns: int) -> list[tuple[Path, int]]:
    """The files under `root` whose inode changed at or after `since_ns` (ctime: a command cannot set it
    back), with their sizes; links not followed, at most WALK_ENTRIES entries. Only the root's own `.git`
    is skipped (a read-only mount, or a worktree's link file): a folder named `.git` the command made
    deeper down is its writing like any other (issue 38)."""
    found: list[tuple[Path, int]] = []
    seen = 0
    stack = [str(root)]
    while stack and seen < WALK_ENTRIES:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    if not (entry.name == ".git" and folder == str(root)):
                        stack.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
                if info.st_ctime_ns >= since_ns:
                    found.append((Path(entry.path), info.st_blocks * 512 or info.st_size))
    return found


def remove_written(root: Path, since_ns: int) -> list[str]:
    """Delete the files under `root` the command wrote that git does not track (what a disk bomb left);
    tracked files are the task's and stay for the restore that follows every command. Returns them."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout
        tracked = {os.fsdecode(p) for p in listed.split(b"\0") if p}
    except (OSError, subprocess.SubprocessError):
        tracked = set()
    removed = []
    for path, _ in _changed(root, since_ns):
        rel = path.relative_to(root).as_posix()
        if rel not in tracked:
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(rel)
    return sorted(removed)
