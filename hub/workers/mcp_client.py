"""A synchronous MCP client over the async `mcp` SDK: stdio, streamable HTTP and SSE.

The SDK runs on a private event loop in a background thread, so callers (phases, the CLI) stay plain
synchronous code. One long-lived task owns the transport and the session (anyio cancel scopes must be
entered and left by the same task); each call is submitted to that loop and waited on with a deadline,
so neither a crashed nor a stalled server can hang the caller.

For stdio the child is spawned here (a `hub.repo.child.Child`, ended by its one kill policy) rather than by
the SDK's `stdio_client`, because a crash report needs what that helper hides: the process's exit code.
The loop reads and writes the child's pipes. The child gets only a minimal environment plus what the
caller passes (the SDK's own rule; `OLLAMA_HOST` must be passed explicitly), and its stderr goes to a log
file whose tail is quoted when it dies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.errors import MCPError, MCPServerCrashed, MCPTimeoutError
from hub.core.log import get_logger
from hub.repo.child import PIPE, Child
from hub.workers.worker_tools import ToolResult, ToolSpec

if TYPE_CHECKING:
    from types import TracebackType

    from mcp import ClientSession

    from hub.core.config import WorkerServer

log = get_logger(__name__)

# Mirrors the SDK's default child environment: nothing else leaks from ours into the server.
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
STOP_GRACE_SECONDS = 1.0  # after stdin closes, before SIGTERM; and again before SIGKILL
CRASH_REAP_SECONDS = 1.0  # how long a closed connection may wait for the exit code
STDERR_TAIL_BYTES = 4000
# The SDK enforces each call's timeout itself; this is the outer bound in case the loop is wedged.
OUTER_GRACE_SECONDS = 5.0


class MCPClient:
    """One connection to one MCP server; start it (or use `with`), call tools, stop it."""

    def __init__(
        self,
        transport: str = "stdio",
        *,
        command: Sequence[str] = (),
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str = "mcp",
        log_dir: str | Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        if transport not in ("stdio", "http", "sse"):
            raise MCPError(f"unknown MCP transport '{transport}' (expected stdio, http or sse)")
        if transport == "stdio" and not command:
            raise MCPError(f"MCP server '{name}': a stdio server needs a command")
        if transport != "stdio" and not url:
            raise MCPError(f"MCP server '{name}': an {transport} server needs a url")
        self.transport = transport
        self.command = tuple(command)
        self.url = url
        self.env = dict(env or {})
        self.cwd = cwd
        self.name = name
        self.startup_timeout = startup_timeout
        log_root = Path(log_dir) if log_dir is not None else Path(tempfile.gettempdir()) / "agent-hub-logs"
        self.stderr_log = log_root / f"mcp-{_safe(name)}.stderr.log"
        self._stderr_offset = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: concurrent.futures.Future[None] | None = None
        self._closing: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._process: Child | None = None
        self._closed_reason: str | None = None

    @classmethod
    def for_server(
        cls,
        server: WorkerServer,
        env: Mapping[str, str] | None = None,
        log_dir: str | Path | None = None,
        startup_timeout: float = 30.0,
    ) -> MCPClient:
        """A client for a configured worker server; `server.env` wins over `env` (it is more specific)."""
        command = server.command
        return cls(
            server.transport,
            command=command,
            url=server.url,
            env={**(env or {}), **server.env},
            name=server.name,
            log_dir=log_dir,
            startup_timeout=startup_timeout,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> MCPClient:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._session is not None and self._closed_reason is None

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (None for HTTP servers or before start)."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Connect (spawning the server for stdio) and complete the initialize handshake."""
        if self._loop is not None:
            return
        started = time.perf_counter()
        self._closed_reason = None
        self._process = None
        self._closing = asyncio.Event()  # binds to the loop on first use (3.10+), so it can be made here
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=_run_loop, args=(loop,), name=f"mcp-{self.name}", daemon=True)
        self._thread.start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._runner = asyncio.run_coroutine_threadsafe(self._run(ready), loop)
        try:
            ready.result(timeout=self.startup_timeout + OUTER_GRACE_SECONDS)
        except BaseException as exc:
            error = self._startup_error(exc)
            self.stop()
            log.debug("mcp.start_failed", server=self.name, error=str(error))
            raise error from exc
        log.debug("mcp.started", server=self.name, transport=self.transport, seconds=_secs(started))

    def stop(self) -> None:
        """Close the session and the transport; a stdio server gets stdin closed, then TERM, then KILL."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._closing is not None:
            loop.call_soon_threadsafe(self._closing.set)
        if self._runner is not None:
            with contextlib.suppress(BaseException):
                self._runner.result(timeout=4 * STOP_GRACE_SECONDS + OUTER_GRACE_SECONDS)
            if not self._runner.done():
                self._runner.cancel()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=OUTER_GRACE_SECONDS)
        self._loop = self._thread = self._runner = None
        self._closing = None
        self._session = None
        self._closed_reason = self._closed_reason or "stopped"
        log.debug("mcp.stopped", server=self.name)

    # -- calls -----------------------------------------------------------------------------------

    def list_tools(self, timeout: float = 30.0) -> list[ToolSpec]:
        """The tools the server offers."""
        result = self._call(lambda s: s.list_tools(), "tools/list", timeout)
        return [
            ToolSpec(name=t.name, description=t.description or "", input_schema=dict(t.input_schema or {}))
            for t in result.tools
        ]

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        timeout: float = 600.0,
        raise_on_error: bool = True,
    ) -> ToolResult:
        """Call one tool. A result flagged isError raises MCPError unless `raise_on_error` is False."""
        args = dict(arguments or {})
        log.debug("mcp.request", server=self.name, tool=name, arguments=_preview(args))
        started = time.perf_counter()

        def call(session: ClientSession) -> Any:
            return session.call_tool(name, args, read_timeout_seconds=timeout)

        result = self._call(call, f"tools/call {name}", timeout)
        texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
        out = ToolResult(
            text="\n".join(texts),
            is_error=bool(result.is_error),
            structured=result.structured_content,
            seconds=_secs(started),
        )
        log.debug(
            "mcp.response",
            server=self.name,
            tool=name,
            is_error=out.is_error,
            chars=len(out.text),
            seconds=out.seconds,
        )
        if out.is_error and raise_on_error:
            log.debug("mcp.tool_error", server=self.name, tool=name, error=out.text[:500])
            raise MCPError(f"MCP server '{self.name}': tool {name} failed: {out.text}")
        return out

    def _call(self, make: Any, what: str, timeout: float) -> Any:
        loop, session = self._loop, self._session
        if loop is None or session is None:
            raise MCPError(f"MCP server '{self.name}' is not started")
        if self._closed_reason is not None:
            raise self._crash_error(what)
        future = asyncio.run_coroutine_threadsafe(make(session), loop)
        try:
            return future.result(timeout=timeout + OUTER_GRACE_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.debug("mcp.timeout", server=self.name, request=what, seconds=timeout, outer=True)
            raise MCPTimeoutError(f"MCP server '{self.name}': {what} timed out after {timeout:g}s") from None
        except Exception as exc:
            raise self._translate(exc, what, timeout) from exc

    def _translate(self, exc: Exception, what: str, timeout: float) -> MCPError:
        from mcp import MCPError as SdkError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT  # mcp.types, not mcp_types: see _stdio

        if isinstance(exc, SdkError) and exc.code == REQUEST_TIMEOUT:
            log.debug("mcp.timeout", server=self.name, request=what, seconds=timeout)
            return MCPTimeoutError(
                f"MCP server '{self.name}': {what} timed out after {timeout:g}s", code=exc.code
            )
        if (isinstance(exc, SdkError) and exc.code == CONNECTION_CLOSED) or self._closed_reason is not None:
            self._closed_reason = self._closed_reason or "connection closed"
            return self._crash_error(what)
        if isinstance(exc, SdkError):
            log.debug("mcp.error", server=self.name, request=what, code=exc.code, error=exc.message)
            return MCPError(f"MCP server '{self.name}': {what}: {exc.message}", code=exc.code)
        log.debug("mcp.error", server=self.name, request=what, error=repr(exc))
        return MCPError(f"MCP server '{self.name}': {what}: {exc!r}")

    def _crash_error(self, what: str) -> MCPServerCrashed:
        exit_code = self._exit_code(wait=CRASH_REAP_SECONDS)
        tail = self.stderr_tail()
        if self.transport == "stdio":
            status = f"exited with code {exit_code}" if exit_code is not None else "closed its connection"
        else:
            status = f"closed the connection ({self._closed_reason})"
        message = f"MCP server '{self.name}' {status} during {what}"
        if tail:
            message += f"; stderr ends with:\n{tail[-800:]}"
        log.debug(
            "mcp.crashed", server=self.name, request=what, exit_code=exit_code, log=str(self.stderr_log)
        )
        return MCPServerCrashed(message, exit_code=exit_code, stderr_tail=tail)

    def _exit_code(self, wait: float) -> int | None:
        return self._process.wait(wait) if self._process is not None else None

    def stderr_tail(self, limit: int = STDERR_TAIL_BYTES) -> str:
        """The end of what the stdio server wrote to stderr since this client started it."""
        if self._process is None:
            return ""  # an HTTP server's stderr is not ours to read
        try:
            with self.stderr_log.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(self._stderr_offset, size - limit))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    # -- the loop side ---------------------------------------------------------------------------

    def _startup_error(self, exc: BaseException) -> MCPError:
        if isinstance(exc, MCPError):
            return exc
        if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
            return MCPTimeoutError(
                f"MCP server '{self.name}' did not finish the initialize handshake in {self.startup_timeout:g}s"
            )
        cause = _root_cause(exc)
        if self.transport == "stdio" and self._process is not None:
            exit_code = self._exit_code(wait=CRASH_REAP_SECONDS)
            tail = self.stderr_tail()
            return MCPServerCrashed(
                f"MCP server '{self.name}' ({' '.join(self.command)}) failed to start"
                + (f": exited with code {exit_code}" if exit_code is not None else f": {cause!r}")
                + (f"; stderr ends with:\n{tail[-800:]}" if tail else ""),
                exit_code=exit_code,
                stderr_tail=tail,
            )
        if isinstance(cause, OSError) and self.transport == "stdio":
            return MCPError(f"MCP server '{self.name}': cannot run {' '.join(self.command)}: {cause}")
        return MCPError(
            f"MCP server '{self.name}' ({self.url or ' '.join(self.command)}): cannot connect: {cause!r}"
        )

    async def _run(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            async with self._transport() as (read, write):
                # Imported once the stdio server is spawned: both processes spend most of their
                # start-up importing mcp, and on two cores they can do it at the same time.
                from mcp import ClientSession

                async with ClientSession(read, write) as session:
                    await self._hold(session, ready)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                log.debug("mcp.transport_closed", server=self.name, error=repr(exc))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise

    async def _hold(self, session: ClientSession, ready: concurrent.futures.Future[None]) -> None:
        """Initialize, say so, and keep the session open until stop()."""
        import anyio

        assert self._closing is not None
        with anyio.fail_after(self.startup_timeout):
            await session.initialize()
        self._session = session
        ready.set_result(None)
        await self._closing.wait()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.transport == "stdio":
            async with self._stdio() as streams:
                yield streams
        elif self.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            # A model call may keep the response stream silent for many minutes: the session's per-call
            # timeout is the clock, so the HTTP read timeout is off.
            async with (
                httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=None)) as http,
                streamable_http_client(str(self.url), http_client=http) as streams,
            ):
                yield streams
        else:
            from mcp.client.sse import sse_client

            async with sse_client(str(self.url), timeout=30.0, sse_read_timeout=24 * 3600.0) as streams:
                yield streams

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[Any, Any]]:
        import anyio

        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ} | self.env
        self.stderr_log.parent.mkdir(parents=True, exist_ok=True)
        with self.stderr_log.open("ab") as errlog:
            self._stderr_offset = errlog.tell()
            # Unbuffered pipes: the loop reads and writes their descriptors itself.
            child = Child(
                list(self.command), env=env, cwd=self.cwd, stdin=PIPE, stdout=PIPE, stderr=errlog, bufsize=0
            )
        self._process = child
        log.debug("mcp.spawned", server=self.name, pid=child.pid, command=list(self.command))
        # mcp.types is the SDK's mirror of its own dependency mcp_types (the same objects): the hub
        # depends on mcp, not on how mcp splits itself into packages. After the spawn: see _run.
        from mcp.shared.message import SessionMessage
        from mcp.types import jsonrpc_message_adapter

        loop = asyncio.get_running_loop()
        stdout = asyncio.StreamReader()
        try:
            read_pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stdout), child.proc.stdout
            )
            write_pipe, write_protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, child.proc.stdin
            )
        except BaseException:
            child.end()  # not yet in the block below that stops it
            raise
        stdin = asyncio.StreamWriter(write_pipe, write_protocol, None, loop)
        read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

        async def reader() -> None:
            async with read_in:
                buffer = b""
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    while chunk := await stdout.read(65536):
                        *lines, buffer = (buffer + chunk).split(b"\n")
                        for line in lines:
                            if not line.strip():
                                continue
                            try:
                                item: SessionMessage | Exception = SessionMessage(
                                    jsonrpc_message_adapter.validate_json(line, by_name=False)
                                )
                            except ValueError as exc:
                                log.error(
                                    "mcp.bad_line",
                                    server=self.name,
                                    line=line[:200].decode("utf-8", "replace"),
                                )
                                item = exc
                            await read_in.send(item)
            # EOF: the read stream closes and the session fails every pending request at once.
            self._closed_reason = self._closed_reason or "server closed stdout"

        async def writer() -> None:
            async with write_out:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    async for message in write_out:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        stdin.write(data.encode("utf-8") + b"\n")
                        await stdin.drain()

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_out, write_in
            finally:
                with anyio.CancelScope(shield=True):
                    self._closed_reason = self._closed_reason or "stopping"
                    await _stop_process(child, write_pipe)
                    read_pipe.close()
                    for stream in (read_out, write_in, read_in, write_out):
                        await stream.aclose()
                tg.cancel_scope.cancel()


async def _stop_process(child: Child, stdin: asyncio.WriteTransport) -> None:
    """Close stdin and wait up to STOP_GRACE_SECONDS for the server to exit; then end its process group
    (SIGTERM, STOP_GRACE_SECONDS more, SIGKILL)."""
    import anyio

    stdin.close()
    deadline = anyio.current_time() + STOP_GRACE_SECONDS
    while not child.exited() and anyio.current_time() < deadline:
        await anyio.sleep(0.01)  # the loop goes on meanwhile: it closes the pipe, it reads the last lines
    child.end(STOP_GRACE_SECONDS)


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def _root_cause(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _preview(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "mcp"


def _secs(started: float) -> float:
    return round(time.perf_counter() - started, 4)
