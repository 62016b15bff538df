"""A model call as it happens (issue 27: a real call takes minutes and printed nothing).

On a terminal (`hub.core.log.on_terminal`: stderr is one and the logs are console text), every call in
flight shows one line that updates in place: role, model, elapsed, tokens so far and tokens/s, or what it
waits for (a GPU slot, the model server). The log lines still print, above it. On a pipe, under cron or
with JSON logs nothing is drawn: the logs stay as they are.

The same state goes to the task's folder (`.call.json`, rewritten when the call starts, waits or goes on
waiting, and with its tokens at most once a second), so `hub status` in another process shows the call
too (`call_line`).

rich draws the line (`rich.live.Live`): it keeps the line below whatever else is written to stderr and
redraws it, which a hand-written carriage return does not; it is imported only when a terminal shows one.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from hub.core.atomic import write_atomic
from hub.core.log import on_terminal

FILE_EVERY = 1.0  # seconds between rewrites of .call.json for new tokens
CALL_FILE = ".call.json"  # in the task's folder, while a call of the task runs


@dataclass
class Call:
    """One model call in flight, as the line and `.call.json` show it."""

    role: str
    model: str
    path: Path | None  # the task's .call.json (None: not written)
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    waiting: str | None = None
    tokens: int = 0
    first_token: float | None = None
    written: float = 0.0

    def waits_for(self, what: str | None) -> None:
        """The call waits for `what` ("a GPU slot", "the model server ...") or, with None, goes on."""
        self.waiting = what
        self._write()

    def progress(self, tokens: int) -> None:
        """`tokens` generated so far (the streamed pieces: one per token on Ollama and /v1)."""
        now = time.monotonic()
        if self.first_token is None and tokens:
            self.first_token = now
        first = not self.tokens and tokens
        self.tokens = tokens
        if first or now - self.written >= FILE_EVERY:
            self._write()

    def line(self, now: float | None = None) -> str:
        return call_line(self.as_dict(), now_elapsed=(now or time.monotonic()) - self.started)

    def as_dict(self) -> dict[str, Any]:
        rate = None
        if self.first_token is not None and self.tokens > 1:
            rate = round(self.tokens / max(time.monotonic() - self.first_token, 0.001), 1)
        return {
            "role": self.role,
            "model": self.model,
            "started_at": self.started_at,
            "waiting": self.waiting,
            "tokens": self.tokens,
            "tokens_per_second": rate,
        }

    def _write(self) -> None:
        self.written = time.monotonic()
        if self.path is not None:
            with contextlib.suppress(OSError):  # the view is a courtesy: a full disk must not fail the call
                write_atomic(self.path, json.dumps(self.as_dict()))


def call_line(call: dict[str, Any], now_elapsed: float | None = None) -> str:
    """`implementer qwen2.5-coder:7b  42 s  310 tokens  7.4 tokens/s`, or what the call waits for."""
    elapsed = now_elapsed
    if elapsed is None:
        try:
            started = datetime.fromisoformat(str(call.get("started_at")))
            elapsed = (datetime.now(UTC) - started).total_seconds()
        except ValueError:
            elapsed = 0.0
    head = f"{call.get('role')} {call.get('model')}  {elapsed:.0f} s"
    if call.get("waiting"):
        return f"{head}  waiting for {call['waiting']}"
    tokens = int(call.get("tokens") or 0)
    if not tokens:
        return f"{head}  no tokens yet"
    rate = call.get("tokens_per_second")
    return f"{head}  {tokens} tokens" + (f"  {rate} tokens/s" if rate else "")


def read_call(path: Path) -> dict[str, Any] | None:
    """A call in flight as its `.call.json` says (None: none, or unreadable)."""
    try:
        call = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return call if isinstance(call, dict) else None


class Shown(Protocol):
    """What the screen draws a line of: a call of this process (`Call`) or another's (`_FileCall`)."""

    def line(self, now: float | None = None) -> str: ...


class _FileCall:
    """A call another process runs, as its `.call.json` says (`hub eval` shows its `hub next`'s)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last = read_call(path) or {}

    def line(self, now: float | None = None) -> str:
        self.last = read_call(self.path) or self.last  # gone or half-written: the last one read stands
        return f"{self.path.parent.name}: {call_line(self.last)}"


class _Screen:
    """The one rich Live of the process, showing a line per call in flight (phases of several tasks
    run in threads at once; rich allows one live display at a time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[Shown] = []
        self.live: Any = None

    def __rich__(self) -> Any:
        from rich.text import Text

        with self.lock:
            now = time.monotonic()
            return Text("\n".join(call.line(now) for call in self.calls), style="dim")

    def add(self, call: Shown) -> None:
        with self.lock:
            self.calls.append(call)
            if self.live is not None:
                return
            from rich.console import Console
            from rich.live import Live

            self.live = Live(
                self,
                console=Console(stderr=True),
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
            )
        self.live.start()

    def remove(self, call: Shown) -> None:
        with self.lock:
            self.calls.remove(call)
            live = self.live if not self.calls else None
            if live is not None:
                self.live = None
        if live is not None:
            live.stop()


_SCREEN = _Screen()


@contextmanager
def live_call(role: str, model: str, path: Path | None) -> Iterator[Call]:
    """Show the call while it runs (on a terminal) and keep `path` (.call.json) saying what it does."""
    call = Call(role, model, path)
    call.waits_for(None)
    shown = on_terminal()
    if shown:
        _SCREEN.add(call)
    try:
        yield call
    finally:
        if shown:
            _SCREEN.remove(call)
        if path is not None:
            path.unlink(missing_ok=True)


@contextmanager
def watch_calls(tasks: Path, every: float = 0.5) -> Iterator[None]:
    """While the block runs, on a terminal, a line for each call in flight in another process, read
    from the `.call.json` of each task folder under `tasks` (`hub eval`: its `hub next` runs with its
    stderr in a log file, so it draws nothing itself). Off a terminal, nothing."""
    if not on_terminal():
        yield
        return
    stop = threading.Event()
    shown: dict[Path, _FileCall] = {}

    def poll() -> None:
        while not stop.wait(every):
            found = set(tasks.glob(f"*/{CALL_FILE}"))
            for path in found - shown.keys():
                shown[path] = _FileCall(path)
                _SCREEN.add(shown[path])
            for path in shown.keys() - found:
                _SCREEN.remove(shown.pop(path))

    watcher = threading.Thread(target=poll, name="hub-watch-calls", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        for call in shown.values():
            _SCREEN.remove(call)
