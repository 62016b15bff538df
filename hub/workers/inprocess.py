"""The hub's own worker inside the hub's process (a worker server with `transport: inprocess`).

`hub worker serve` over stdio costs a phase a process, the MCP SDK's import on both sides (0.6-1.9 s
each: mostly its type models) and a handshake, for one prompt. The in-process worker calls the same
tool bodies (hub/workers/worker_tools.py) with the same arguments and hands back the same result text, so the
WorkerClient drives it exactly as it drives a server over MCP: the same dialect, clocks, limits and
error mapping. What differs is only what "the server" means here:

- No SDK and no process: nothing to spawn, no handshake; a phase that never calls a model pays nothing.
- A call runs in a thread of its own and is waited on with the call's timeout, as an MCP request is:
  a provider that hangs past every clock of its own cannot hang the phase (`MCPTimeoutError`; the
  thread is left to finish, as the SDK's server abandons a cancelled tool's thread).
- A refused call (bad arguments, an unknown tool, an unreachable Ollama for `ollama_list_models`) is
  an isError result with the SDK's wording.
- Any other exception in a tool is this worker crashing: `MCPServerCrashed` naming the exception, its
  traceback in the log and the crash's stderr tail; the worker is stopped, so the next call starts a
  fresh one (a new provider), as a stdio server that died is restarted.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from hub.core.errors import MCPError, MCPServerCrashed, MCPTimeoutError
from hub.core.log import get_logger
from hub.workers import worker_tools

log = get_logger(__name__)

TRACEBACK_TAIL_CHARS = 4000


def ollama_provider(ollama_host: str) -> worker_tools.Provider:
    # Here, not at the top: the provider loads httpx, which a phase that calls no model never needs.
    from hub.workers.ollama import OllamaProvider

    return OllamaProvider(ollama_host)


class InProcessWorker:
    """The worker's tools in this process, with the part of MCPClient's interface the WorkerClient uses."""

    transport = "inprocess"
    pid = None  # no process of its own

    def __init__(
        self,
        name: str,
        ollama_host: str,
        provider_factory: Callable[[str], worker_tools.Provider] = ollama_provider,
    ) -> None:
        self.name = name
        self.ollama_host = ollama_host
        self.provider_factory = provider_factory
        self._provider: worker_tools.Provider | None = None
        self._crash_tail = ""
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._provider is not None

    def start(self) -> None:
        with self._lock:
            if self._provider is None:
                self._provider = self.provider_factory(self.ollama_host)
                log.debug("worker.inprocess_started", server=self.name, ollama=self.ollama_host)

    def stop(self) -> None:
        with self._lock:
            provider, self._provider = self._provider, None
        if provider is not None:
            provider.close()

    def stderr_tail(self) -> str:
        """The traceback of the last crash (the in-process counterpart of a server's stderr)."""
        return self._crash_tail

    def list_tools(self, timeout: float = 30.0) -> list[worker_tools.ToolSpec]:
        if not self.running:
            raise MCPError(f"MCP server '{self.name}' is not started")
        # ollama_run's argument names, as the SDK publishes them: the WorkerClient reads `turns` there.
        schema = {"type": "object", "properties": {a: {} for a in worker_tools.RUN_ARGUMENTS}}
        return [
            worker_tools.ToolSpec(
                name=n,
                description=worker_tools.DESCRIPTIONS[n],
                input_schema=schema if n == "ollama_run" else {},
            )
            for n in worker_tools.TOOL_NAMES
        ]

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        timeout: float = 600.0,
        raise_on_error: bool = True,
    ) -> worker_tools.ToolResult:
        """Call one tool, waiting at most `timeout` seconds. A result flagged isError raises MCPError
        unless `raise_on_error` is False."""
        provider = self._provider
        if provider is None:
            raise MCPError(f"MCP server '{self.name}' is not started")
        args = dict(arguments or {})
        started = time.perf_counter()
        future: concurrent.futures.Future[worker_tools.ToolResult] = concurrent.futures.Future()

        def body() -> None:
            try:
                future.set_result(worker_tools.ToolResult(text=worker_tools.call(provider, name, args)))
            except worker_tools.ToolFailure as exc:
                future.set_result(worker_tools.ToolResult(text=str(exc), is_error=True))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=body, name=f"worker-{self.name}-{name}", daemon=True).start()
        try:
            result = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            log.debug("mcp.timeout", server=self.name, request=f"tools/call {name}", seconds=timeout)
            raise MCPTimeoutError(
                f"MCP server '{self.name}': tools/call {name} timed out after {timeout:g}s"
            ) from None
        except Exception as exc:
            raise self._crashed(provider, name, exc) from exc
        result = worker_tools.ToolResult(
            text=result.text, is_error=result.is_error, seconds=round(time.perf_counter() - started, 4)
        )
        if result.is_error and raise_on_error:
            raise MCPError(f"MCP server '{self.name}': tool {name} failed: {result.text}")
        return result

    def _crashed(self, provider: worker_tools.Provider, tool: str, exc: Exception) -> MCPServerCrashed:
        """A tool raised what no tool should: report it as a crash and stop, so the next call restarts."""
        tail = "".join(traceback.format_exception(exc))[-TRACEBACK_TAIL_CHARS:].strip()
        self._crash_tail = tail
        log.error("worker.crashed", server=self.name, tool=tool, error=repr(exc), traceback=tail)
        with self._lock:
            if self._provider is provider:
                self._provider = None
        provider.close()
        return MCPServerCrashed(
            f"MCP server '{self.name}' (in-process) crashed during tools/call {tool}: "
            f"{type(exc).__name__}: {exc}",
            stderr_tail=tail,
        )
