"""What keeps `hub mcp serve --transport http` serving when clients misbehave (issue 28, point 10).

- **Idle connections close.** uvicorn arms its keep-alive clock only after a response: a connection
  that never sends a request, or sends half a header and stops, was kept for ever, and a few hundred
  of them used up the process's descriptors. `GuardedH11` gives every connection a deadline from its
  opening (and from each response's end) to its next complete request; data that trickles in does not
  move it.
- **Out of descriptors: 503, and one log line a minute.** asyncio's accept loop can only log an
  EMFILE, with a traceback, and retry a second later; a server at its limit wrote hundreds of MB of them.
  `OutOfDescriptors` keeps two descriptors in reserve: on EMFILE it lets them go, accepts the waiting
  connection, answers `503 Service Unavailable` with `Retry-After`, closes it, and takes them back; the
  condition is logged once per minute with a count.

Imported only by the HTTP transport (it loads uvicorn).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from hub.core.log import get_logger

log = get_logger(__name__)

IDLE_SECONDS = 30.0
LOG_EVERY_SECONDS = 60.0
BODY = b"the hub is out of file descriptors; retry later\r\n"
UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY)
) + BODY
# Connections answered per EMFILE report: asyncio retries its own accept a second later.
MAX_ANSWERED = 100


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each next request (see the module's docstring)."""

    idle_seconds = IDLE_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = self.loop.time() + self.idle_seconds
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # cancels the clock; a complete request starts a cycle
        if self._idle():
            self._arm()  # a partial request: the same deadline, not a new one

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._deadline = self.loop.time() + self.idle_seconds
        if not self.transport.is_closing():
            self._arm()

    def _idle(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_at(self._deadline, self.timeout_keep_alive_handler)


class OutOfDescriptors:
    """The event loop's exception handler for `socket.accept() out of system resource`: answers the
    waiting client 503 from a reserve of descriptors and logs the condition once per minute."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self.reserve: list[int] = []
        self.refused = 0
        self.logged_at: float | None = None
        self._take_reserve()

    def _take_reserve(self) -> None:
        while len(self.reserve) < 2:
            try:
                self.reserve.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                return

    def _release_reserve(self) -> None:
        while self.reserve:
            os.close(self.reserve.pop())

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        listening = context.get("socket")
        if not (isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)) or listening is None:
            loop.default_exception_handler(context)
            return
        self._release_reserve()
        try:
            self._answer_unavailable(listening.fileno())
        finally:
            self._take_reserve()
        now = self.clock()
        if self.logged_at is None or now - self.logged_at >= LOG_EVERY_SECONDS:
            log.error(
                "mcp.http.out_of_descriptors",
                refused=self.refused,
                detail=str(exc),
                hint="idle connections close by themselves; raise `ulimit -n` if real clients hit this",
            )
            self.logged_at = now
            self.refused = 0

    def _answer_unavailable(self, fd: int) -> None:
        """Accept the connections waiting (as many as the reserve allows) and answer each 503."""
        try:
            listening = socket.socket(fileno=os.dup(fd))
        except OSError:
            return
        try:
            listening.setblocking(False)
            for _ in range(MAX_ANSWERED):
                try:
                    conn, _ = listening.accept()
                except OSError:
                    return
                with conn:
                    self.refused += 1
                    try:
                        conn.setblocking(False)
                        conn.send(UNAVAILABLE)
                    except OSError:
                        pass
        finally:
            listening.close()


async def serve(server: Any, idle_seconds: float = IDLE_SECONDS) -> None:
    """Run a `uvicorn.Server` (configured with `http=GuardedH11`) with the out-of-descriptors handler."""
    GuardedH11.idle_seconds = idle_seconds
    asyncio.get_running_loop().set_exception_handler(OutOfDescriptors())
    await server.serve()
