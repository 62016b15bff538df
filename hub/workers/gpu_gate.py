"""The GPU gate: never more model calls at once per server than its slots, and the loaded model first.

A model server holds one or two models; each switch reloads weights (5-60 s for a 7-32B model), and so
does a changed `num_ctx`. So a call waits for a free slot (`ollama.slots`, Ollama's
OLLAMA_NUM_PARALLEL) on one of the servers (`ollama.hosts`), and while calls for what a server ran last
are waiting, other calls let them go first: a backlog runs its implementer calls back to back, then its
reviews, instead of alternating. What a server has loaded is a model *and* its `num_ctx` (`Loaded`):
the same model with another window is a reload too, so it counts as a switch.

Slots are OS file locks in `_handoff/gpu/`, so separate processes (cron loops, `hub watch`, a person's
command) share them and a killed process frees its slot. The record of what each server ran last is the
hub's own (`gpu/<server>.json`), written by the call that holds the slot. The preference between models
is kept in-process (the threads of one `hub next`), where a backlog is drained; across processes the
slots still hold. A call waits at most until its deadline (the role's total clock): then it is a
`gpu_queue` timeout, a stall strike like any other, never a wait without end under the task's lock.

A server whose call failed as an outage (WorkerUnavailable: refused, reset, 5xx) is marked down
(`gpu/<server>.down.json`, shared across processes like the rest) and skipped while another server is
not: the outage wait (hub/workers/outage.py) then tries again on a live one, a second later instead of
after the whole `server_wait_minutes`. A down server comes back once its mark has run out (DOWN_FIRST
seconds, doubling to DOWN_MAX) and it answers a probe (`GET /api/tags`); a call that succeeds on it
clears the mark. With every server down, they are tried in their usual order: the outage is the
caller's to wait out.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from hub.core.atomic import write_atomic
from hub.core.errors import WorkerTimeout, WorkerUnavailable
from hub.core.log import get_logger

log = get_logger(__name__)

POLL_SECONDS = 0.05
DOWN_FIRST = 5.0
DOWN_MAX = 60.0
PROBE_TIMEOUT = 2.0


@dataclass(frozen=True)
class Host:
    """One model server and how many generations it runs at once."""

    url: str
    slots: int = 1

    @property
    def key(self) -> str:
        return hashlib.sha1(self.url.encode()).hexdigest()[:12]


class Loaded(NamedTuple):
    """What a server holds after a call: the model and the window it was loaded with. Ollama reloads the
    weights when either changes; a `num_ctx` of None (the server's default) equals only None, since the
    hub cannot know which window the default is."""

    model: str
    num_ctx: int | None


def order_hosts(
    hosts: Sequence[Host], want: Loaded, last: dict[str, Loaded | None], down: frozenset[str] = frozenset()
) -> list[Host]:
    """Servers to try for `want`, best first: one that ran it last, then an idle one, then the rest;
    servers marked down are left out while any other is not. Pure: `last` maps a server's key to what it
    ran last (None: nothing yet), `down` holds the keys of servers marked down."""

    def rank(host: Host) -> int:
        ran = last.get(host.key)
        return 0 if ran == want else 1 if ran is None else 2

    live = [h for h in hosts if h.key not in down]
    return sorted(live or hosts, key=rank)


@dataclass(frozen=True)
class Down:
    """A server's outage mark: when it was first seen, how many calls and probes failed since, and
    until when it is skipped (wall-clock seconds: the mark is shared between processes)."""

    since: float
    failures: int
    until: float
    error: str = ""


def probe(url: str) -> bool:
    """Does the Ollama server at `url` answer `GET /api/tags` with 200?"""
    import httpx

    try:
        return httpx.get(f"{url.rstrip('/')}/api/tags", timeout=PROBE_TIMEOUT).status_code == 200
    except httpx.HTTPError:
        return False


def should_defer(want: Loaded, host_last: Loaded | None, waiting: Counter[Loaded]) -> bool:
    """Whether a call for `want` lets others go first on a server that last ran `host_last`: yes while
    calls for what it has loaded are waiting (a switch now would reload it for them afterwards). Pure."""
    return host_last is not None and host_last != want and waiting[host_last] > 0


# Set by the first Ctrl-C of a `hub next` whose phases run in threads (hub/phases/next.py): the running
# calls finish, and one still waiting for a slot never starts (issue 36: a queued call started 78 s after
# the Ctrl-C). It ends its phase as a Ctrl-C in the main thread would; the next run recovers the task.
_stopping = threading.Event()


def stop_new_calls(stop: bool = True) -> None:
    """From now on (or, with False, again) calls waiting for a slot in this process start no more."""
    if stop:
        _stopping.set()
    else:
        _stopping.clear()


def _refuse_if_stopping(model: str) -> None:
    if _stopping.is_set():
        log.warning("gpu.call_not_started", model=model, why="Ctrl-C: no model call starts any more")
        raise KeyboardInterrupt


# Calls waiting in this process, per gate folder: (model, num_ctx) -> how many.
_waiting: dict[Path, Counter[Loaded]] = {}
_waiting_lock = threading.Lock()


class Gate:
    """The slots of every configured server, shared through lock files in `folder`."""

    def __init__(
        self,
        folder: Path,
        hosts: Sequence[Host],
        on_queued: Callable[[str], None] | None = None,
        probe: Callable[[str], bool] = probe,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder = folder
        self.hosts = list(hosts)
        # Told once a call is counted as waiting (for watchers and tests: an event, never a sleep).
        self.on_queued = on_queued
        self.probe = probe
        self.clock = clock

    def _record(self, host: Host) -> Path:
        return self.folder / f"{host.key}.json"

    def _down_record(self, host: Host) -> Path:
        return self.folder / f"{host.key}.down.json"

    def down(self, host: Host) -> Down | None:
        """The server's outage mark (None: not marked, or a record that does not parse)."""
        try:
            data = json.loads(self._down_record(host).read_text(encoding="utf-8"))
            return Down(float(data["since"]), int(data["failures"]), float(data["until"]), str(data["error"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def mark_down(self, host: Host, error: str) -> Down:
        """Note a failed call or probe: skip the server for DOWN_FIRST seconds, doubling per failure."""
        now = self.clock()
        old = self.down(host)
        failures = (old.failures if old else 0) + 1
        mark = Down(
            old.since if old else now, failures, now + min(DOWN_MAX, DOWN_FIRST * 2 ** (failures - 1)), error
        )
        write_atomic(self._down_record(host), json.dumps(mark.__dict__))
        log.warning(
            "gpu.host_down", host=host.url, failures=failures, skip_seconds=round(mark.until - now, 1)
        )
        return mark

    def mark_up(self, host: Host) -> None:
        path = self._down_record(host)
        if path.exists():
            path.unlink(missing_ok=True)
            log.info("gpu.host_back", host=host.url)

    def skipped(self) -> frozenset[str]:
        """Keys of the servers to leave out now: marked down, and either still within their mark or
        failing the probe once it has run out (which renews the mark)."""
        out = set()
        for host in self.hosts:
            mark = self.down(host)
            if mark is None:
                continue
            now = self.clock()
            # A mark never lasts longer than DOWN_MAX: one further off was written by a clock since stepped
            # back (issue 35), and would keep the server out for as long as the step.
            if now < mark.until <= now + DOWN_MAX:
                out.add(host.key)
            elif self.probe(host.url):
                self.mark_up(host)
            else:
                self.mark_down(host, "no answer to GET /api/tags")
                out.add(host.key)
        return frozenset(out)

    def loaded(self, host: Host) -> Loaded | None:
        """What `host` ran last, from the hub's record (None: no record, or one that does not parse)."""
        try:
            record = json.loads(self._record(host).read_text(encoding="utf-8"))
            model, num_ctx = record.get("model"), record.get("num_ctx")
        except (OSError, ValueError, AttributeError):
            return None
        if not model:
            return None
        return Loaded(str(model), num_ctx if isinstance(num_ctx, int) else None)

    def held(self, host: Host) -> int:
        """How many of `host`'s slots are held now, by any process (the caller's own included)."""
        from filelock import FileLock, Timeout

        n = 0
        for i in range(host.slots):
            lock = FileLock(str(self.folder / f"{host.key}.{i}.lock"), timeout=0, is_singleton=False)
            try:
                lock.acquire()
            except Timeout:
                n += 1
            else:
                lock.release()
        return n

    @contextmanager
    def slot(self, model: str, num_ctx: int | None, deadline: float) -> Iterator[Host]:
        """Hold one slot on the best server for `model` with `num_ctx` until the call ends; yields the
        server."""
        from filelock import FileLock, Timeout

        want = Loaded(model, num_ctx)
        self.folder.mkdir(parents=True, exist_ok=True)
        with _waiting_lock:
            waiting = _waiting.setdefault(self.folder.resolve(), Counter())
            waiting[want] += 1
        if self.on_queued is not None:
            self.on_queued(model)
        started = time.monotonic()
        held: FileLock | None = None
        chosen: Host | None = None
        counted = True
        queued = False
        try:
            while held is None:
                _refuse_if_stopping(model)
                last = {h.key: self.loaded(h) for h in self.hosts}
                down = self.skipped() if len(self.hosts) > 1 else frozenset()
                for host in order_hosts(self.hosts, want, last, down):
                    with _waiting_lock:
                        defer = should_defer(want, last[host.key], waiting)
                    if defer:
                        continue
                    for n in range(host.slots):
                        lock = FileLock(
                            str(self.folder / f"{host.key}.{n}.lock"), timeout=0, is_singleton=False
                        )
                        try:
                            lock.acquire()
                        except Timeout:
                            continue
                        held, chosen = lock, host
                        break
                    if held is not None:
                        break
                if held is None:
                    if time.monotonic() >= deadline:
                        raise WorkerTimeout("gpu_queue", round(time.monotonic() - started, 1))
                    if not queued:
                        log.info("gpu.queued", model=model, servers=len(self.hosts))
                        queued = True
                    time.sleep(POLL_SECONDS)
            _refuse_if_stopping(model)  # a Ctrl-C as the slot came free
            with _waiting_lock:
                waiting[want] -= 1
                counted = False
            assert chosen is not None
            write_atomic(self._record(chosen), json.dumps({"model": model, "num_ctx": num_ctx}))
            log.debug("gpu.slot", model=model, host=chosen.url, waited=round(time.monotonic() - started, 3))
            try:
                yield chosen
            except WorkerUnavailable as exc:
                if len(self.hosts) > 1:
                    self.mark_down(chosen, str(exc)[:300])
                raise
            if len(self.hosts) > 1:
                self.mark_up(chosen)
        finally:
            if counted:
                with _waiting_lock:
                    waiting[want] -= 1
            if held is not None:
                held.release()


def gate_for(handoff_dir: Path, hosts: Sequence[Host]) -> Gate:
    return Gate(handoff_dir / "gpu", hosts)
