"""What keeps `hub mcp serve --transport http` serving when clients misbehave (issue 28, point 10).

- **Idle connections close.** uvicorn arms its keep-alive clock only after a response: a connection
  that never sends a request, or sends half a header and stops, was kept for ever, and a few hundred
  of them used up the process's descriptors. `GuardedH11` gives every connection a deadline from its
  opening (and from each response's end) to its next complete request; data that trickles in does not
  move it.
- **Out of descriptors: 503, and one log line a minute.** asyncio's accept loop meets an EMFILE by
  logging a traceback and re-arming itself once per pending accept, up to the backlog each time: a server
  at its limit wrote hundreds of MB of them and was too busy to close the connections that would have
  freed descriptors. `GuardedSocket` keeps two descriptors in reserve: on EMFILE it lets them go,
  accepts each waiting connection, answers `503 Service Unavailable` with `Retry-After`, closes it,
  takes them back, and tells asyncio there is nothing more to accept; the condition is logged once per
  minute with a count.

Imported only by the HTTP transport (it loads uvicorn).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from hub.core.errors import ConfigError
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
    """What the listening socket does when accepting finds no free descriptor: let the reserve go, answer
    every waiting client 503, take the reserve back, and log the condition once per minute."""

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

    def refuse_waiting(self, listening: socket.socket, exc: OSError) -> None:
        while self.reserve:
            os.close(self.reserve.pop())
        try:
            for _ in range(MAX_ANSWERED):
                try:
                    conn, _ = socket.socket.accept(listening)
                except OSError:
                    break
                with conn:
                    self.refused += 1
                    try:
                        conn.setblocking(False)
                        conn.send(UNAVAILABLE)
                    except OSError:
                        pass
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


class GuardedSocket(socket.socket):
    """The listening socket. asyncio's accept loop, on EMFILE, logs a traceback and re-arms itself once
    per pending accept (up to the backlog each time), which flooded the log and starved the connections
    whose closing would have freed descriptors. Here an EMFILE answers the waiting clients 503 and reads
    to asyncio as "nothing more to accept" (BlockingIOError): the queue is empty, nothing spins."""

    guard: OutOfDescriptors

    def accept(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            self.guard.refuse_waiting(self, exc)
            raise BlockingIOError(
                errno.EAGAIN, "out of descriptors; the waiting clients were answered 503"
            ) from None


def listening_socket(host: str, port: int, backlog: int) -> GuardedSocket:
    """The listening GuardedSocket, listening before the line that says so (clients wait for it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = GuardedSocket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.guard = OutOfDescriptors()
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    # uvicorn's own words: it prints them only when it binds the socket itself.
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port
    )
    return sock


async def serve(server: Any, idle_seconds: float = IDLE_SECONDS) -> None:
    """Run a `uvicorn.Server` (configured with `http=GuardedH11`) on a GuardedSocket."""
    GuardedH11.idle_seconds = idle_seconds
    config = server.config
    await server.serve(sockets=[listening_socket(config.host, config.port, config.backlog)])
