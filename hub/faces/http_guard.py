"""What keeps `hub mcp serve --transport http` serving when clients misbehave (issue 28, point 10).

- **Idle connections close.** uvicorn arms its keep-alive clock only after a response: a connection
  that never sends a request, or sends half a header and stops, was kept for ever, and a few hundred
  of them used up the process's descriptors. `GuardedH11` gives every connection a deadline from its
  opening (and from each response's end) to its next complete request, its body included (a POST whose
  body stops half-way is closed too); data that trickles in does not move it.
- **Out of descriptors: 503, and one log line a minute.** asyncio's accept loop meets an EMFILE by
  logging a traceback and re-arming itself once per pending accept, up to the backlog each time: a server
  at its limit wrote hundreds of MB of them and was too busy to close the connections that would have
  freed descriptors. `GuardedSocket` keeps two descriptors in reserve: on EMFILE it lets them go,
  accepts each waiting connection, answers `503 Service Unavailable` with `Retry-After`, closes it,
  takes them back, and tells asyncio there is nothing more to accept; the condition is logged once per
  minute with a count.
- **No client holds them all** (issue 38, item 13): 1,024 idle connections held by one client left no
  one served. `Connections` caps the connections open from one peer address (`--max-per-client`) and
  in all (`--max-connections`, by default head-room below the descriptor limit, so the 503 above is the
  last resort, not the rule). A connection past a cap makes room by closing the oldest *idle* connection
  (of that peer, or of anyone at the total cap): a flood of held connections evicts itself, and a client
  that asks is served. A connection whose request is still arriving counts as idle: on loopback every
  local client shares one address, and stalled uploads must not lock the others out. When every
  connection is busy with a request, the new one is answered 503. Each server has its own counts
  (`serve` gives it a subclass of `GuardedH11`): two in one process do not share them.

Imported only by the HTTP transport (it loads uvicorn).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import time
from collections.abc import Iterable
from typing import Any, Protocol

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
MAX_PER_CLIENT = 64
MAX_CONNECTIONS = 1024
# Descriptors kept free of connections: the hub's own files, git and worker pipes, the sandbox's pipes.
HEADROOM_MIN = 64
FULL_BODY = b"too many connections are busy; retry later\r\n"
FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(FULL_BODY)
) + FULL_BODY


def default_max_connections(soft_limit: int | None = None) -> int:
    """The total cap when none is given: MAX_CONNECTIONS, or less, so that an eighth of the descriptor
    soft limit (at least HEADROOM_MIN) stays free for everything else the hub opens."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft_limit - max(HEADROOM_MIN, soft_limit // 8)))


class Connection(Protocol):
    def idle(self) -> bool:
        """No request in flight: closing it loses nothing the client was waiting for."""

    def evict(self) -> None: ...


class Connections:
    """The open connections by peer address, oldest first, and the caps (see the module's docstring)."""

    def __init__(self, per_client: int, total: int, clock: Any = time.monotonic) -> None:
        self.per_client = per_client
        self.total = total
        self.clock = clock
        # Both oldest first (dicts keep their order): the peer of each connection, each peer's connections.
        self.every: dict[Connection, str] = {}
        self.by_peer: dict[str, dict[Connection, None]] = {}
        self.evicted = 0
        self.refused = 0
        self.logged_at: float | None = None
        # Descriptors besides the open connections': accepted by the listening socket and not yet made
        # connections, evicted and not yet closed (asyncio does both turns later).
        self.pending = 0
        self.closing: set[Connection] = set()

    def has_room(self) -> bool:
        """Whether the listening socket may accept one more now."""
        held = len(self.every) + len(self.closing) + self.pending
        return held < self.total or not (self.pending or self.closing)

    def admit(self, conn: Connection, peer: str) -> bool:
        """Count `conn` in, closing the oldest idle connection that makes room for it; False (not
        counted) when none can: every connection in its way is busy."""
        self.pending = max(0, self.pending - 1)
        same = self.by_peer.get(peer, {})
        crowd: Iterable[Connection] | None = None
        if len(same) >= self.per_client:
            crowd = same
        elif len(self.every) >= self.total:
            crowd = self.every
        if crowd is not None:
            victim = next((c for c in crowd if c.idle()), None)
            if victim is None:
                self.refused += 1
                self._report(
                    peer, "every connection in its way was busy with a request: the new one was answered 503"
                )
                return False
            self.forget(victim)
            self.closing.add(victim)
            victim.evict()
            self.evicted += 1
            self._report(peer, "the oldest idle connection was closed to make room")
        self.by_peer.setdefault(peer, {})[conn] = None
        self.every[conn] = peer
        return True

    def forget(self, conn: Connection) -> None:
        """Count `conn` out (closed, or evicted); a second call does nothing."""
        self.closing.discard(conn)
        peer = self.every.pop(conn, None)
        if peer is None:
            return
        same = self.by_peer[peer]
        del same[conn]
        if not same:
            del self.by_peer[peer]

    def _report(self, peer: str, done: str) -> None:
        now = self.clock()
        if self.logged_at is None or now - self.logged_at >= LOG_EVERY_SECONDS:
            log.warning(
                "mcp.http.connection_cap",
                peer=peer,
                open=len(self.every),
                per_client=self.per_client,
                total=self.total,
                evicted=self.evicted,
                refused=self.refused,
                detail=f"a client holding many connections open; {done}",
                hint="--max-per-client and --max-connections raise the caps if a real client needs more",
            )
            self.logged_at = now


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each next request (see the module's docstring)."""

    idle_seconds = IDLE_SECONDS
    # Not `connections`: uvicorn keeps its own set of them under that name. One per server: `serve`
    # subclasses this class for each, so that its sockets and its connections share one count.
    admission = Connections(MAX_PER_CLIENT, MAX_CONNECTIONS)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else "?"
        if not self.admission.admit(self, peer):
            transport.write(FULL)
            transport.close()
            return
        self._deadline = self.loop.time() + self.idle_seconds
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.admission.forget(self)
        super().connection_lost(exc)

    def idle(self) -> bool:
        return self._idle() and not self.transport.is_closing()

    def evict(self) -> None:
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # cancels the clock; a complete request starts a cycle
        if self._idle():
            self._arm()  # a partial request or body: the same deadline, not a new one

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._deadline = self.loop.time() + self.idle_seconds
        if not self.transport.is_closing():
            self._arm()

    def _idle(self) -> bool:
        # A request cut before its headers ended has no cycle yet, one whose body is still arriving has
        # one: idle both, nothing the client waits for is lost by closing them.
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _arm(self) -> None:
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_at(self._deadline, self._expire)

    def _expire(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # Mid-request h11 refuses to send ConnectionClosed (uvicorn's handler would raise): the
            # transport's close ends the cycle as a disconnect.
            self.transport.close()
        else:
            self.timeout_keep_alive_handler()


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
    to asyncio as "nothing more to accept" (BlockingIOError): the queue is empty, nothing spins.

    asyncio also accepts everything waiting (up to the backlog) a few turns before any of it is made a
    connection, so the caps would close connections only after a flood had taken every descriptor. So no
    more is accepted than the room left under the total cap, counting the accepted connections not yet
    made (`Connections.pending`); at least one, so that a full server still answers and the
    level-triggered loop does not spin. The rest waits in the kernel's queue."""

    guard: OutOfDescriptors
    admission: Connections

    def accept(self) -> tuple[socket.socket, Any]:
        if not self.admission.has_room():
            raise BlockingIOError(errno.EAGAIN, "no room under the connection cap until connections are made")
        try:
            accepted = super().accept()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            self.guard.refuse_waiting(self, exc)
            raise BlockingIOError(
                errno.EAGAIN, "out of descriptors; the waiting clients were answered 503"
            ) from None
        self.admission.pending += 1
        return accepted


def listening_socket(
    host: str, port: int, backlog: int, admission: Connections | None = None
) -> GuardedSocket:
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
    sock.admission = admission if admission is not None else GuardedH11.admission
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    # uvicorn's own words: it prints them only when it binds the socket itself.
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port
    )
    return sock


async def serve(
    server: Any,
    idle_seconds: float = IDLE_SECONDS,
    per_client: int = MAX_PER_CLIENT,
    total: int | None = None,
) -> None:
    """Run a `uvicorn.Server` (configured with `http=GuardedH11`) on a GuardedSocket, at most `per_client`
    connections from one address and `total` in all (default: `default_max_connections()`)."""
    admission = Connections(per_client, total or default_max_connections())
    protocol = type("GuardedH11", (GuardedH11,), {"idle_seconds": idle_seconds, "admission": admission})
    config = server.config
    config.http = protocol
    if config.loaded:
        config.http_protocol_class = protocol
    sock = listening_socket(config.host, config.port, config.backlog, admission)
    await server.serve(sockets=[sock])
