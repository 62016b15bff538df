"""The `_handoff/` folder: its paths, the OS lock, the transition log, report files and the archive."""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from hub.core.atomic import write_atomic
from hub.core.errors import ContractInvalid, LockBusy
from hub.core.log import get_logger
from hub.state import store
from hub.state.contract import Contract, HistoryEntry, iso
from hub.state.machine import HALT_EVENT, RESUME_EVENT
from hub.state.task import Task, TransitionLine, cumulative_cost

log = get_logger(__name__)

ROTATE_BYTES = 5 * 1024 * 1024

# Files that belong to the active task and move to archive/<task_id>/ when it ends.
TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")
TASK_FILES = (
    "TASK_CONTRACT.json",
    "REVIEW_REQUEST.md",
    "REVIEW_IN_PROGRESS.md",
    "JUDGE_REPORT.json",
    "JUDGE_REPORT.md",
    "REBUTTAL.md",
    "STALL_REPORT.md",
)


def check_task_id(task_id: str) -> str:
    """`task_id` if it is one (letters, digits, `.`, `_`, `-`, starting with a letter or digit), else
    ContractInvalid naming it."""
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise ContractInvalid("task_id", "$", f"{task_id!r} is not a task id (letters, digits, . _ -)")
    return task_id


class Handoff:
    """Paths inside one handoff folder, bound to one task (`task_id`) or to none.

    A task's own files live in `tasks/<task_id>/` (contract, reports, halt file, `runs/`, its lock);
    the folder itself keeps what all tasks share: STATUS.md, transition.ndjson, backlog, notes, archive.
    Unbound, the task paths are the old single-task layout's (the folder itself), which only
    `migrate_legacy` reads.

    A plain class rather than a dataclass, as `hub status` builds one (see `hub.core.config`)."""

    __slots__ = ("dir", "halt_name", "task_id")

    def __init__(self, dir: Path, halt_name: str = "ERIK_HALT.md", task_id: str | None = None) -> None:
        # Every face reaches a task's folder through here: a task id from outside (`--task`, an MCP
        # tool's task_id) names a folder inside tasks/ and nothing else (`../../x`, `/abs`: refused).
        if task_id is not None:
            check_task_id(task_id)
        self.dir, self.halt_name, self.task_id = dir, halt_name, task_id

    def __repr__(self) -> str:
        return f"Handoff({str(self.dir)!r}, {self.halt_name!r}, {self.task_id!r})"

    def for_task(self, task_id: str | None) -> Handoff:
        return Handoff(self.dir, self.halt_name, task_id)

    @property
    def tasks_dir(self) -> Path:
        return self.dir / "tasks"

    @property
    def task_dir(self) -> Path:
        return self.tasks_dir / self.task_id if self.task_id else self.dir

    @property
    def contract(self) -> Path:
        return self.task_dir / "TASK_CONTRACT.json"

    @property
    def lock_file(self) -> Path:
        return self.task_dir / ".hub.lock"

    @property
    def lock_owner(self) -> Path:
        return self.task_dir / ".hub.lock.owner"

    @property
    def transitions(self) -> Path:
        return self.dir / "transition.ndjson"

    @property
    def status_file(self) -> Path:
        return self.dir / "STATUS.md"

    @property
    def status_lock(self) -> Path:
        return self.dir / ".status.lock"

    @property
    def review_request(self) -> Path:
        return self.task_dir / "REVIEW_REQUEST.md"

    @property
    def review_in_progress(self) -> Path:
        return self.task_dir / "REVIEW_IN_PROGRESS.md"

    @property
    def judge_report_json(self) -> Path:
        return self.task_dir / "JUDGE_REPORT.json"

    @property
    def judge_report_md(self) -> Path:
        return self.task_dir / "JUDGE_REPORT.md"

    @property
    def rebuttal(self) -> Path:
        return self.task_dir / "REBUTTAL.md"

    @property
    def stall_report(self) -> Path:
        return self.task_dir / "STALL_REPORT.md"

    @property
    def halt_report(self) -> Path:
        return self.task_dir / self.halt_name

    @property
    def backlog(self) -> Path:
        return self.dir / "backlog.json"

    @property
    def notes(self) -> Path:
        return self.dir / "notes.json"

    @property
    def archive(self) -> Path:
        return self.dir / "archive"

    @property
    def sandbox_pid(self) -> Path:
        # Per task: several tasks' acceptance commands run at once, each in its own sandbox.
        return self.task_dir / ".sandbox.pid"

    @property
    def cleanup_failed(self) -> Path:
        # A merged task whose worktree or branch could not be removed: why (`hub status` shows it).
        return self.task_dir / "CLEANUP_FAILED.txt"

    @property
    def judge_pid(self) -> Path:
        # The judge command's process group while it runs (hub.repo.leftovers).
        return self.task_dir / ".judge.pid"

    def runs(self, task_id: str) -> Path:
        """A task's provenance records: in its folder while it lives, in the archive after."""
        # A task id from outside (hub_log over MCP, --task) must name a folder inside tasks/, nothing else.
        check_task_id(task_id)
        live = self.tasks_dir / task_id
        archived = self.archive / task_id / "runs"
        return archived if not live.is_dir() and archived.is_dir() else live / "runs"

    def ensure(self) -> None:
        self.task_dir.mkdir(parents=True, exist_ok=True)

    def task_ids(self) -> list[str]:
        """Every task with a contract in tasks/, by id (ids start with the project and a timestamp)."""
        migrate_legacy(self)
        try:
            found = [p.parent.name for p in self.tasks_dir.glob("*/TASK_CONTRACT.json")]
        except OSError:
            return []
        return sorted(found)

    def lost_ids(self) -> list[str]:
        """Task folders in tasks/ whose contract is gone (deleted by hand, or lost with a disk): reported,
        not passed over in silence (issue 35). A folder younger than LOST_AFTER_SECONDS may be a `hub new`
        between claiming its folder and saving its contract."""
        now = time.time()
        lost = []
        try:
            folders = [p for p in self.tasks_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        except OSError:
            return []
        for folder in folders:
            try:
                if (
                    folder / "TASK_CONTRACT.json"
                ).exists() or now - folder.stat().st_mtime < LOST_AFTER_SECONDS:
                    continue
            except OSError:
                continue  # archived meanwhile
            lost.append(folder.name)
        return sorted(lost)


# How old a task folder without a contract must be to count as lost (see Handoff.lost_ids).
LOST_AFTER_SECONDS = 60.0


def migrate_legacy(hand: Handoff) -> str | None:
    """Move a task left in the old single-task layout (_handoff/TASK_CONTRACT.json) into tasks/<id>/.

    Returns the task id moved, or None. Runs on first use; says so once on stderr."""
    legacy = hand.dir / "TASK_CONTRACT.json"
    if not legacy.is_file():
        return None
    try:
        task_id = str(json.loads(legacy.read_text(encoding="utf-8"))["task_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: left where it is, for a person (hub status names it)
    if not task_id or "/" in task_id or task_id.startswith("."):
        return None
    target = hand.for_task(task_id).task_dir
    target.mkdir(parents=True, exist_ok=True)
    for name in (*TASK_FILES, hand.halt_name):
        source = hand.dir / name
        if source.exists() and name != "TASK_CONTRACT.json":
            os.replace(source, target / name)
    runs = hand.dir / "runs" / task_id
    if runs.is_dir() and not (target / "runs").exists():
        os.replace(runs, target / "runs")
    try:
        os.replace(legacy, target / "TASK_CONTRACT.json")  # last: the move is done once this is
    except FileNotFoundError:
        return None  # another process migrated it at the same moment
    log.warning("handoff.migrated", task=task_id, to=str(target), note="old single-task layout moved")
    return task_id


# --- the OS lock --------------------------------------------------------------------------------------


def hostname() -> str:
    # os.uname() is what socket.gethostname() reads on POSIX, without importing socket (~4 ms).
    return os.uname().nodename


def holder_id() -> str:
    return f"{hostname()}:{os.getpid()}"


@contextmanager
def phase_lock(handoff: Handoff, phase: str, now: datetime) -> Iterator[None]:
    """Hold `.hub.lock` for the whole phase, or raise LockBusy (exit 75) at once.

    The kernel drops the lock when the process dies, so a lock that can be taken proves that any
    phase which held it before is gone.
    """
    from filelock import FileLock, Timeout

    if handoff.task_id is None:
        handoff.ensure()
    elif not handoff.task_dir.is_dir():
        raise _gone(handoff)  # archived by a run that won the task, or never was: nothing is created
    lock = FileLock(str(handoff.lock_file), timeout=0, is_singleton=False)
    try:
        lock.acquire()
    except Timeout:
        if _archived(handoff):  # the lock of a husk another loser made and a third removed
            raise _gone(handoff) from None
        raise LockBusy(f"another phase is running ({_owner_text(handoff)})", hint="try later") from None
    except (FileNotFoundError, FileExistsError):
        # filelock makes the folder (pathlib's mkdir: EEXIST, then not a folder) and opens the file in
        # it: either fails when the folder is moved to the archive in between.
        if not _archived(handoff):
            raise
        raise _gone(handoff) from None
    if _archived(handoff):
        # Archived between the look and the lock: filelock made the folder again to hold its lock file.
        # Leave no husk behind (runs() and `hub log` would read it in place of the archive).
        lock.release()
        _remove_husk(handoff)
        raise _gone(handoff)
    try:
        # The owner goes in a file of its own: filelock truncates the lock file on open. No fsync: it is
        # for display only, and a phase started in the same instant as this one waits for it to appear.
        owner = {"pid": os.getpid(), "host": hostname(), "phase": phase, "since": iso(now)}
        tmp = handoff.lock_owner.with_name(f"{handoff.lock_owner.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(owner), encoding="utf-8")
            os.replace(tmp, handoff.lock_owner)
        except OSError:
            # A full disk or a read-only folder: the phase's own writes fail next, naming the file;
            # a half-written temp file must not be left behind (one a minute under cron).
            tmp.unlink(missing_ok=True)
            raise
        yield
    finally:
        handoff.lock_owner.unlink(missing_ok=True)
        # Do not remove the lock file itself: https://github.com/tox-dev/py-filelock/issues/31
        lock.release()


def _archived(handoff: Handoff) -> bool:
    """A task's contract gone from its folder: archived by the run that won it (the contract is only
    ever replaced atomically, so a live task's never goes missing)."""
    return handoff.task_id is not None and not handoff.contract.exists()


def _gone(handoff: Handoff) -> ContractInvalid:
    # What loading the missing contract would raise: `hub next` takes it for a race it lost.
    return ContractInvalid(str(handoff.contract), "$", "no such file")


def _remove_husk(handoff: Handoff) -> None:
    """Remove a task folder holding nothing but lock files; a folder with anything else stays."""
    for leftover in (handoff.lock_file, handoff.lock_owner):
        leftover.unlink(missing_ok=True)
    with suppress(OSError):  # not empty (a person's or another run's files): not ours to remove
        handoff.task_dir.rmdir()


OWNER_WAIT_SECONDS = 0.5


def _owner_text(handoff: Handoff) -> str:
    # The holder writes its owner file just after taking the lock, so a phase started in the same
    # instant can find no file yet, or the one a killed holder left: wait (bounded) for the live one.
    deadline = time.monotonic() + OWNER_WAIT_SECONDS
    while True:
        owner = lock_owner(handoff)
        if owner is not None and "pid" in owner and "since" in owner:
            return f"{owner.get('phase', 'a phase')}, pid {owner['pid']}, since {owner['since']}"
        if time.monotonic() >= deadline:
            return "pid unknown"
        time.sleep(0.005)


def _alive(owner: dict[str, Any]) -> bool:
    if owner.get("host") != hostname():
        return True  # cannot tell from here
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LockOwner(TypedDict):
    """Who holds a task's OS lock: its owner file (`hub status` shows it as `running`)."""

    pid: int
    host: str
    phase: str
    since: str


def lock_owner(handoff: Handoff) -> LockOwner | None:
    """Who holds the OS lock right now, as its owner file says (None if free or unknown).

    A phase killed with SIGKILL leaves its owner file behind; an owner whose process is gone (on
    this host) is not shown as running.
    """
    try:
        owner = json.loads(handoff.lock_owner.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        return cast(LockOwner, owner) if isinstance(owner, dict) and _alive(owner) else None
    except (KeyError, TypeError, ValueError):
        return None


# --- transitions ---------------------------------------------------------------------------------------


def advance(
    contract: Contract,
    event: str,
    now: datetime,
    reason: str | None = None,
    resume_to: str | None = None,
) -> TransitionLine:
    """Apply `event` to the contract in memory (pure) and return the transition record."""
    return Task(contract).advance(event, now, reason, resume_to)


def record(
    handoff: Handoff,
    contract: Contract,
    event: str,
    now: datetime,
    reason: str | None = None,
    resume_to: str | None = None,
) -> Contract:
    """Apply an event, save the contract atomically, then append the line to transition.ndjson."""
    return save_transition(handoff, contract, advance(contract, event, now, reason, resume_to), now)


def save_transition(handoff: Handoff, contract: Contract, line: TransitionLine, now: datetime) -> Contract:
    """Save a contract a transition (`line`) was just applied to, then append the line to the log."""
    store.save(handoff.contract, contract, now)
    for missing in unlogged(handoff, contract):
        append_transition(handoff, missing)
    append_transition(handoff, line)
    # Not `event=`: structlog takes the message as its `event` argument.
    log.debug(
        "handoff.transition",
        task=contract["task_id"],
        on=line["event"],
        old=line["old_status"],
        new=line["new_status"],
    )
    return contract


TAIL_BYTES = 64 * 1024


def unlogged(handoff: Handoff, contract: Contract) -> list[TransitionLine]:
    """History entries (before the newest) that transition.ndjson lacks.

    The contract is saved before its line is appended, so a phase killed between the two leaves the
    history one entry ahead of the log; the next transition writes the missing lines first.
    """
    history = contract["history"][:-1]
    if not history:
        return []
    try:
        with handoff.transitions.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        size, tail = 0, []
    keys = [(h["timestamp"], h["event"], h["from"], h["to"]) for h in history]
    for raw in reversed(tail):
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(item, dict) or item.get("task_id") != contract["task_id"]:
            continue
        key = (item.get("timestamp"), item.get("event"), item.get("old_status"), item.get("new_status"))
        if key not in keys:
            return []  # the log knows something the history does not: do not guess
        start = len(keys) - keys[::-1].index(key)
        return [_line_from_history(contract, h) for h in history[start:]]
    # Nothing of this task in what was read: repair only if that was the whole file.
    if size > TAIL_BYTES:
        return []
    return [_line_from_history(contract, h) for h in history]


def _line_from_history(contract: Contract, entry: HistoryEntry) -> TransitionLine:
    return {
        "timestamp": entry["timestamp"],
        "task_id": contract["task_id"],
        "event": entry["event"],
        "old_status": entry["from"],
        "new_status": entry["to"],
        "status_reason": entry.get("reason"),
        "attempt": entry.get("attempt"),
        "cumulative_cost_usd": cumulative_cost(contract),
        "repaired": True,
    }


def append_transition(handoff: Handoff, line: TransitionLine) -> None:
    path = handoff.transitions
    # Every task appends to the one log: an exclusive flock on it makes the size check, the rotation and
    # the append one step, so two tasks rotating at once cannot throw away the other's rotated file.
    while True:
        with path.open("a", encoding="utf-8") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                if not _same_file(handle.fileno(), path):
                    continue  # rotated away while we waited for the lock: append to the new file
                if os.fstat(handle.fileno()).st_size >= ROTATE_BYTES:
                    os.replace(path, path.with_name(path.name + ".1"))
                    continue
                # at_ns orders lines and provenance records written in the same second (`hub log --task`).
                stamped = {**line, "at_ns": time.time_ns()}
                handle.write(json.dumps(stamped, ensure_ascii=False) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
                return
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), path.stat()
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def read_transitions(handoff: Handoff, task_id: str | None = None) -> list[TransitionLine]:
    """Every transition line (rotated file first); lines that are not JSON are skipped."""
    lines: list[TransitionLine] = []
    for path in (handoff.transitions.with_name(handoff.transitions.name + ".1"), handoff.transitions):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        for raw in text.splitlines():
            try:
                item = json.loads(raw)
            except ValueError:
                continue
            if task_id is None or item.get("task_id") == task_id:
                lines.append(item)
    return lines


# --- report files -------------------------------------------------------------------------------------


def write_report(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def archive_task(handoff: Handoff, task_id: str) -> Path:
    """Move the task's folder to archive/<task_id>/ (its reports, contract and runs/)."""
    source = handoff.for_task(task_id).task_dir
    target = handoff.archive / task_id
    handoff.archive.mkdir(parents=True, exist_ok=True)
    if target.exists():  # an archive of the same id from before: keep both
        target = handoff.archive / f"{task_id}.{time.time_ns()}"
    os.replace(source, target)
    return target


NUMBERED = re.compile(r"^(\d{3,})-")


def number_of(name: str) -> int | None:
    """The NNN prefix of a runs/ file name (three digits or more: 999 is followed by 1000), else None."""
    match = NUMBERED.match(name)
    return int(match.group(1)) if match else None


def next_number(folder: Path) -> int:
    """The next free NNN prefix in a runs/<task_id>/ folder (records and set-aside reports share it).
    Past 999 the prefix grows a digit; a three-digit glob had 1000 overwrite 1000 forever."""
    numbers = (number_of(p.name) for p in folder.iterdir()) if folder.is_dir() else iter(())
    return 1 + max((n for n in numbers if n is not None), default=0)


def reserve(folder: Path, suffix: str) -> Path:
    """A new numbered file `NNN-<suffix>` created empty and exclusively, so two writers never share one."""
    while True:
        target = folder / f"{next_number(folder):03d}-{suffix}"
        try:
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return target
        except FileExistsError:
            continue


def set_aside(handoff: Handoff, path: Path, task_id: str, label: str) -> Path | None:
    """Move a report that has been dealt with into runs/<task_id>/, numbered, instead of deleting it."""
    if not path.exists():
        return None
    folder = handoff.runs(task_id)
    folder.mkdir(parents=True, exist_ok=True)
    target = reserve(folder, f"{label}{path.suffix}")
    os.replace(path, target)
    return target


__all__ = [
    "HALT_EVENT",
    "RESUME_EVENT",
    "Handoff",
    "LockOwner",
    "TransitionLine",
    "advance",
    "append_transition",
    "archive_task",
    "phase_lock",
    "read_transitions",
    "record",
]
