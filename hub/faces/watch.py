"""`hub watch`: run whatever phase is due whenever `_handoff/` changes, until SIGINT or SIGTERM.

Phases run in a child process (`hub next --until-idle`, which also applies a waiting judge report, runs
the due phase of every task, up to `limits.parallel_tasks` or `--jobs` at once, and goes on while that
moves tasks on, so the child's start-up, imports and worker servers are paid once per burst, not once per
phase), rather than in this process:

- A phase is built as a short, restartable command; the watcher drives exactly the path cron drives.
- The child's exit releases everything the phase held (the OS lock, worker server processes, sockets,
  memory), and a phase that dies hard cannot take the watcher with it.
- Stopping stays simple and safe. The child runs in a process group of its own, so a terminal's Ctrl-C
  reaches only the watcher, which then decides: it closes the child's stdin (no new round starts, see
  `hub next --stop-on-eof`), the running phases get `--grace` seconds to finish; then
  it gets SIGINT (a KeyboardInterrupt: a judge command's process group is killed, workers are closed, and
  the contract stays in its `*_in_progress` state, which the next run records as `interrupted` and
  retries); SIGKILL follows if it still has not gone. A second signal skips the grace.

The price is the child's start-up, once per burst (bench/bench_task.py, driver `until-idle`).
Whether anything is due is decided here, in-process, with the same `due()` that `hub next` uses, so a
file event that changes nothing costs a JSON read, not a process.

Waiting uses file-system events (`watchfiles`, on the handoff folder and each task's folder), or
polling when events are unavailable or `--poll` is given, with a re-check every `--interval` seconds
for what only time changes (a judge's deadline). Changes the hub makes for its own bookkeeping (the lock
files, the transition log, runs/, logs/, archive/, temp files) are ignored, and a phase that made no
progress is not retried until something relevant changes or its back-off runs out, so a failing phase
cannot spin. A child whose phases only waited (a task's lock busy, a merge waiting on the person's
checkout) made no progress either, though it rewrote files: it is tried again every `--interval`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.core.errors import HubError, describe
from hub.core.log import get_logger
from hub.core.notify_config import LOG_FILE as NOTIFY_LOG
from hub.phases.context import Context
from hub.phases.next import due_jobs, idle_reason
from hub.phases.status import active_contract, free_task_slots
from hub.repo.child import PIPE, Child
from hub.state.backlog import next_task

log = get_logger(__name__)

# Bookkeeping at the top of the folder; dotfiles (locks, owner and pid files, temps) are ignored anyway.
IGNORED_NAMES = frozenset({"transition.ndjson", "transition.ndjson.1", "README.md", NOTIFY_LOG})
IGNORED_DIRS = frozenset({"runs", "logs", "archive"})
POLL_SECONDS = 0.5
STEP_MS = 20  # watchfiles yields once no new change has come for this long
MAX_BACKOFF_SECONDS = 600.0
MAX_BURST = 100  # phases in a row without a pause; a safety valve, not a limit a task should reach
KILL_AFTER_SECONDS = 10.0  # after SIGINT, before SIGKILL
CHILD_POLL_SECONDS = 0.1


def relevant(handoff_dir: Path, path: str | Path) -> bool:
    """Whether a change at `path` may make a phase due (the hub's own bookkeeping is not)."""
    try:
        rel = Path(path).relative_to(handoff_dir)
    except ValueError:
        return False
    if not rel.parts or rel.parts[0] in IGNORED_DIRS:
        return False
    # A task's own files live in tasks/<task_id>/ (its runs/ below that is bookkeeping).
    if rel.parts[0] == "tasks":
        if len(rel.parts) == 2:
            return True  # a task folder created or removed
        if len(rel.parts) != 3:
            return False
    elif len(rel.parts) > 1:
        return False
    return rel.name not in IGNORED_NAMES and not rel.name.startswith(".")


def fingerprint(handoff_dir: Path) -> str:
    """A digest of the relevant files' names, sizes and modification times."""
    digest = hashlib.sha1()
    entries: list[os.DirEntry[str]] = []
    folders = [handoff_dir]
    with contextlib.suppress(OSError):
        folders += sorted(p for p in (handoff_dir / "tasks").iterdir() if p.is_dir())
    for folder in folders:
        try:
            entries += sorted(os.scandir(folder), key=lambda e: e.name)
        except FileNotFoundError:
            continue
    for entry in entries:
        if not entry.is_file() or not relevant(handoff_dir, Path(entry.path)):
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        digest.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def decide(ctx: Any) -> tuple[list[str] | None, str]:
    """The `hub` subcommand to run now (None: nothing is due) and why."""
    jobs, halted = due_jobs(ctx)
    if jobs:
        # "phase: task" first, as `_known` and the log line read it.
        return ["next"], "; ".join(f"{phase}: task {bound.task_id}" for bound, phase, _ in jobs)
    ready = next_task(ctx.handoff, ctx.clock)
    if ready["task"] is not None and free_task_slots(ctx)[0] > 0:
        return ["next"], f"promote-backlog: {ready['task']['id']}"
    if halted:
        return None, "; ".join(halted) + " (then `hub resume`)"
    ids = ctx.handoff_root.task_ids()
    if not ids:
        return None, f"no active task; backlog: {ready['why']}"
    return None, idle_reason(ctx, ids)


@dataclass
class PhaseRun:
    """What one child phase did."""

    command: list[str]
    exit_code: int
    seconds: float
    outcome: dict[str, Any]

    @property
    def phases(self) -> list[dict[str, Any]]:
        """One dict per phase the child ran (several tasks, or rounds of --until-idle); [] if it said
        nothing (it failed before printing an outcome)."""
        ran = (self.outcome.get("data") or {}).get("ran")
        if isinstance(ran, list) and len(ran) > 1 and all(isinstance(r, dict) for r in ran):
            return ran
        return [self.outcome] if self.outcome else []

    @property
    def only_waited(self) -> bool:
        """Every phase it ran found its task's lock busy (75) or its merge waiting on the person's
        checkout: the files it rewrote say so, they are not progress. Either is retried every interval,
        not at once (a merge wait would otherwise run a child after child for hours) and not with a
        growing back-off (the person's commit, which ends a merge wait, changes nothing we watch)."""
        if not self.phases:
            return self.exit_code == 75  # a busy lock refused before the phase said anything

        def waited(phase: dict[str, Any]) -> bool:
            return phase.get("exit_code", self.exit_code) == 75 or "merge_wait" in (phase.get("data") or {})

        return all(waited(phase) for phase in self.phases)


class _EventWaiter:
    """Wakes on relevant file-system events in the handoff folder (watchfiles, in a thread)."""

    def __init__(self, folder: Path, stop: threading.Event, wake: threading.Event) -> None:
        import watchfiles

        self.folder = folder
        self.stop = stop
        self.wake = wake
        self.changed = False
        self.failed: BaseException | None = None
        self._watchfiles = watchfiles
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-watch-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for _changes in self._watchfiles.watch(
                self.folder,
                watch_filter=lambda _change, path: relevant(self.folder, path),
                debounce=400,
                step=STEP_MS,
                stop_event=self.stop,
                rust_timeout=250,
                yield_on_timeout=True,
                raise_interrupt=False,
                recursive=True,  # tasks/<task_id>/ holds each task's files; `relevant` filters
            ):
                self._ready.set()
                if _changes:
                    self.changed = True
                    self.wake.set()
        except BaseException as exc:  # the watcher thread must report, not die silently
            self.failed = exc
            self.wake.set()
        finally:
            self._ready.set()

    def wait_ready(self, seconds: float) -> None:
        # The first (empty) yield comes once the OS watch is in place; changes before it would be lost.
        self._ready.wait(seconds)

    def wait(self, seconds: float) -> bool:
        self.wake.wait(max(0.0, seconds))
        self.wake.clear()
        changed, self.changed = self.changed, False
        return changed

    def close(self) -> None:
        self._thread.join(timeout=2.0)


class _PollWaiter:
    """Wakes when the relevant files' fingerprint changes, checked every POLL_SECONDS."""

    def __init__(self, folder: Path, stop: threading.Event, wake: threading.Event) -> None:
        self.folder = folder
        self.stop = stop
        self.wake = wake
        self.failed: BaseException | None = None
        self.last = fingerprint(folder)

    def wait(self, seconds: float) -> bool:
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            remaining = deadline - time.monotonic()
            if self.wake.wait(max(0.0, min(POLL_SECONDS, remaining))):
                self.wake.clear()
                return False
            current = fingerprint(self.folder)
            if current != self.last:
                self.last = current
                return True
            if remaining <= 0:
                return False

    def close(self) -> None:
        pass


class Watcher:
    """The loop behind `hub watch`. `run()` returns 0 once stopped by `request_stop()` or a signal."""

    def __init__(
        self,
        repo_root: Path,
        handoff_dir: Path | None = None,
        *,
        poll: bool = False,
        interval: float = 30.0,
        grace: float = 10.0,
        hub_argv: Sequence[str] | None = None,
        child_env: dict[str, str] | None = None,
        on_phase: Callable[[PhaseRun], None] | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.repo_root = repo_root
        self.handoff_dir = handoff_dir
        self.poll = poll
        self.interval = max(0.1, interval)
        self.grace = max(0.0, grace)
        self.hub_argv = list(hub_argv or (sys.executable, "-m", "hub"))
        self.child_env = child_env
        self.on_phase = on_phase
        self.on_wait = on_wait
        self.stop = threading.Event()
        self.hurry = threading.Event()
        self.wake = threading.Event()
        self.phases_run = 0

    # --- stopping ---------------------------------------------------------------------------------------

    def request_stop(self, signum: int | None = None, _frame: Any = None) -> None:
        if self.stop.is_set():
            self.hurry.set()
        self.stop.set()
        self.wake.set()

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, self.request_stop)
        return previous

    # --- the loop ---------------------------------------------------------------------------------------

    def context(self) -> Any:
        return Context(load_config(self.repo_root, self.handoff_dir))

    def run(self) -> int:
        previous = self._install_signals()
        try:
            return self._loop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _loop(self) -> int:
        ctx = self.context()
        folder = ctx.handoff.dir
        folder.mkdir(parents=True, exist_ok=True)
        waiter = self._waiter(folder)
        log.info("watch.start", handoff=str(folder), events=isinstance(waiter, _EventWaiter), pid=os.getpid())
        blocked: tuple[str, float] | None = (
            None  # (fingerprint after a phase that made no progress, retry at)
        )
        backoff = self.interval
        waited = False  # the last child's phases only waited (a busy lock, a merge wait)
        burst = 0
        said = ""
        try:
            while not self.stop.is_set():
                if waiter.failed is not None:
                    log.warning("watch.events_failed", error=str(waiter.failed), fallback="polling")
                    waiter.close()
                    waiter = _PollWaiter(folder, self.stop, self.wake)
                try:
                    ctx = self.context()
                    command, why = decide(ctx)
                except HubError as exc:
                    command, why = None, f"cannot read the state: {describe(exc)}"
                before = fingerprint(folder)
                held_back = blocked is not None and blocked[0] == before and time.monotonic() < blocked[1]
                if command is not None and held_back:
                    again = "checking again" if waited else "retrying after a failure"
                    command, why = None, f"{why} ({again})"
                if command is None:
                    if why != said:
                        log.info("watch.waiting", why=why)
                        said = why
                    if self.on_wait is not None:
                        self.on_wait(why)
                    burst = 0
                    timeout = self.interval
                    if blocked is not None:
                        timeout = min(timeout, max(0.0, blocked[1] - time.monotonic()))
                    waiter.wait(timeout)
                    continue
                said = ""
                run = self._run_child(command, _known(ctx, why))
                if self.stop.is_set():
                    break
                after = fingerprint(folder)
                if after != before and not run.only_waited:
                    blocked, backoff = None, self.interval
                    burst += 1
                    if burst >= MAX_BURST:
                        log.warning("watch.burst", phases=burst, pause_seconds=self.interval)
                        burst = 0
                        waiter.wait(self.interval)
                    continue
                # No progress: wait for something relevant to change, or for the back-off.
                waited = run.only_waited
                retry = self.interval if waited else backoff
                blocked = (after, time.monotonic() + retry)
                if not run.only_waited:
                    backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                waiter.wait(retry)
        finally:
            waiter.close()
        log.info("watch.stopped", phases=self.phases_run)
        return 0

    def _waiter(self, folder: Path) -> _EventWaiter | _PollWaiter:
        if not self.poll:
            try:
                waiter = _EventWaiter(folder, self.stop, self.wake)
                waiter.wait_ready(5.0)
                if waiter.failed is None:
                    return waiter
                log.warning("watch.events_unavailable", error=str(waiter.failed), fallback="polling")
            except Exception as exc:  # no watchfiles, no inotify: polling works everywhere
                log.warning("watch.events_unavailable", error=str(exc), fallback="polling")
        return _PollWaiter(folder, self.stop, self.wake)

    # --- one phase ----------------------------------------------------------------------------------------

    def _argv(self, command: list[str]) -> list[str]:
        argv = [*self.hub_argv, "--repo", str(self.repo_root)]
        if self.handoff_dir is not None:
            argv += ["--handoff", str(self.handoff_dir)]
        if command == ["next"]:
            # One child goes on while it moves tasks on, paying its start-up, imports and worker servers
            # once per burst instead of once per phase; it starts no new round once we close its stdin.
            command = [*command, "--until-idle", "--stop-on-eof"]
        return [*argv, *command, "--json"]

    def _run_child(self, command: list[str], known: Mapping[str, Any] | None = None) -> PhaseRun:
        """Run one phase as a child; log one line with what it did, or, when it failed without an
        outcome, the phase, task and state the watcher saw and the child's own error message."""
        known = known or {}
        started = time.monotonic()
        log.debug("watch.spawn", command=command)
        with (
            tempfile.TemporaryFile(mode="w+", encoding="utf-8") as out,
            tempfile.TemporaryFile(mode="w+b") as err,
            Child(
                self._argv(command),
                cwd=self.repo_root,
                env=self.child_env,
                stdin=PIPE,  # closed when stopping: `--stop-on-eof`
                stdout=out,
                stderr=err,
            ) as child,
        ):
            try:
                code = self._wait_child(child, command)
            finally:
                child.close_stdin()
            out.seek(0)
            text = out.read()
            err.seek(0)
            errors = err.read()
        # The child's logs and messages still reach our stderr, after it ends, in their own order.
        sys.stderr.buffer.write(errors)
        sys.stderr.flush()
        failure = _error_line(errors.decode("utf-8", "replace")) if code not in (0, 4) else ""
        seconds = round(time.monotonic() - started, 3)
        try:
            outcome = json.loads(text) if text.strip() else {}
        except ValueError:
            outcome = {"message": text.strip()[-500:]}
        if not isinstance(outcome, dict):
            outcome = {}
        run = PhaseRun(command, code, seconds, outcome)
        # A child that ran several phases (several tasks, or rounds of --until-idle): a line for each.
        entries = run.phases or [outcome]
        several = len(entries) > 1
        for entry in entries:
            self.phases_run += 1
            log.info(
                "watch.phase",
                phase=(entry.get("data") or {}).get("ran")
                or entry.get("phase")
                or known.get("phase")
                or command[0],
                task=entry.get("task_id") or known.get("task"),
                **{"from": entry.get("from") or known.get("state")},
                to=entry.get("to"),
                exit=entry.get("exit_code", code) if several else code,
                seconds=seconds,
                message=entry.get("message") or failure or _exit_meaning(code),
            )
        if self.on_phase is not None:
            self.on_phase(run)
        return run

    def _wait_child(self, child: Child, command: list[str]) -> int:
        grace_until: float | None = None
        interrupted_at: float | None = None
        while True:
            code = child.wait(CHILD_POLL_SECONDS)
            if code is not None:
                return code
            if not self.stop.is_set():
                continue
            now = time.monotonic()
            if grace_until is None:
                grace_until = now + self.grace
                log.info("watch.stopping", waiting_for=" ".join(command), grace_seconds=self.grace)
                child.close_stdin()  # finish the phases running, start no new ones
            if self.hurry.is_set():
                grace_until = now
            if interrupted_at is None and now >= grace_until:
                log.info("watch.interrupting", pid=child.pid)
                child.interrupt()
                interrupted_at = now
            elif interrupted_at is not None and now - interrupted_at > KILL_AFTER_SECONDS:
                log.warning("watch.killing", pid=child.pid)
                child.end()
                return int(child.proc.returncode)


def _known(ctx: Any, why: str) -> dict[str, Any]:
    """The task, its state and the due phase as the watcher saw them before starting a child."""
    try:
        contract = active_contract(ctx)
    except HubError:
        contract = None
    phase = why.split(":", 1)[0]
    if contract is None:
        return {"phase": phase}
    return {"phase": phase, "task": contract["task_id"], "state": contract["status"]}


def _error_line(stderr: str) -> str:
    """The child's own error message (`hub: ...`), the last one if several."""
    lines = [line[len("hub: ") :] for line in stderr.splitlines() if line.startswith("hub: ")]
    return lines[-1] if lines else ""


def _exit_meaning(code: int) -> str:
    return {
        0: "done",
        1: "failed (the error is above)",
        3: "the task was not in a state this phase accepts",
        4: "halted: a person is needed",
        75: "another phase holds the lock",
    }.get(code, f"exit {code}")


def watch(
    repo_root: Path,
    handoff_dir: Path | None = None,
    *,
    poll: bool = False,
    interval: float = 30.0,
    grace: float = 10.0,
    child_log_level: str = "WARNING",
    child_log_format: str | None = None,
    jobs: int | None = None,
) -> int:
    """Run the watcher in this process until SIGINT/SIGTERM; returns the exit code (0).

    The phases' own logs are kept at WARNING by default so that the watcher's line is the one line per
    phase; pass DEBUG to see everything.
    """
    env = {**os.environ, "HUB_LOG_LEVEL": child_log_level}
    if child_log_format:
        env["HUB_LOG_FORMAT"] = child_log_format
    if jobs is not None:
        env["HUB_PARALLEL_TASKS"] = str(jobs)
    return Watcher(repo_root, handoff_dir, poll=poll, interval=interval, grace=grace, child_env=env).run()
