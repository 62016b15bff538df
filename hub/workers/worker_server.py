"""`hub worker serve`: an MCP server in front of Ollama, speaking the original ollama-mcp contract.

Tools:
- `ollama_run{model, prompt, task_type?, options?, tools?, turns?}` -> text JSON `{stdout, stderr, exitCode,
  error?, metadata}`; `tools` and `turns` carry agent mode's tools and turns, the model's calls come back
  in `metadata.tool_calls` (hub extensions: hub/workers/worker_tools.py)
- `ollama_list_models{}` -> text JSON `{"models": [names]}`
- `ollama_chat{model, messages, options?}` -> the same result shape as `ollama_run`

`options` holds `system`, `temperature`, `num_predict`, `num_ctx` and `timeout` (total, in ms, as in the
original), plus two hub extensions for the other clocks: `first_token_timeout` and `stall_timeout` (ms).

Where a failure goes:
- The model call failed (Ollama unreachable, model missing, a clock ran out, the prompt does not fit,
  a broken stream): a normal result with `exitCode != 0`, the message in `stderr` and `error`, and
  `metadata.error_type` naming the hub error (`WorkerTimeout`, `ModelNotFound`, ...) so a client can
  rebuild it. A timeout uses exitCode -1 and `metadata.timed_out: true` as the original did, and keeps
  any partial output in `stdout`; everything else uses exitCode 1.
- The call itself was wrong (bad arguments) or the server broke: an MCP tool error (`isError`).
- `ollama_list_models` has no result shape to carry a failure: an unreachable Ollama is a tool error
  naming it, as in the original.

Unlike the original, `model` is required (this server does no routing by `task_type`; it only echoes
`task_type` in the metadata), and `options.system` goes to Ollama as a system message, not glued onto
the prompt.

Nothing but protocol goes to stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from hub.core.config import normalize_ollama_host
from hub.core.log import configure, get_logger
from hub.workers import worker_tools
from hub.workers.worker_tools import Provider

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = get_logger(__name__)


class RunOptions(BaseModel):
    """Generation options; timeouts are milliseconds. Unknown keys are ignored, as the original did.
    The SDK publishes this as the tool's input schema; the limits are `worker_tools.OPTIONS`' (a test holds
    them equal), which check the options again."""

    model_config = ConfigDict(extra="ignore")
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    num_predict: int | None = Field(default=None, gt=0)
    num_ctx: int | None = Field(default=None, ge=256)
    timeout: float | None = Field(default=None, gt=0, description="total timeout, ms")
    first_token_timeout: float | None = Field(default=None, gt=0, description="ms (hub extension)")
    stall_timeout: float | None = Field(default=None, gt=0, description="ms (hub extension)")
    load_timeout: float | None = Field(default=None, gt=0, description="ms (hub extension)")
    token_scale: float | None = Field(default=None, gt=0, description="the model's token calibration")
    max_chars: int | None = Field(default=None, gt=0, description="cut the answer past this (hub extension)")
    cached_chars: int | None = Field(
        default=None,
        ge=0,
        description="the prompt's start an earlier call sent, maybe cached (hub extension)",
    )


class Message(BaseModel):
    """One chat message, as ollama_chat takes them."""

    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


SERVER_NAME = "agent-hub-worker"
SERVER_VERSION = "0.1.0"
DEFAULT_HTTP_PORT = 8765


def build_server(provider: Provider, name: str = SERVER_NAME) -> MCPServer:
    """The worker MCP server over a provider (tests pass FakeOllama-backed or fake providers): each
    tool's body is hub.workers.worker_tools', which the in-process worker calls too."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name, version=SERVER_VERSION, instructions="Run prompts on local Ollama models.")

    async def in_thread(body: Callable[[], str]) -> str:
        try:
            return await anyio.to_thread.run_sync(body, abandon_on_cancel=True)
        except worker_tools.ToolFailure as exc:
            raise ToolError(str(exc)) from None

    @server.tool(structured_output=False)
    async def ollama_run(
        model: str,
        prompt: str,
        task_type: str | None = None,
        options: RunOptions | None = None,
        tools: list[dict[str, Any]] | None = None,
        turns: list[dict[str, Any]] | None = None,
    ) -> str:
        """Run one prompt on a local Ollama model.

        Returns JSON {stdout, stderr, exitCode, error?, metadata}: stdout is the model's reply; a failed
        or timed-out run has exitCode != 0 and the reason in stderr. `tools` (the functions offered) and
        `turns` (the messages after the prompt) are hub extensions for agent mode; the model's tool calls
        come back in metadata.tool_calls.
        """
        args = {
            "model": model,
            "prompt": prompt,
            "task_type": task_type,
            "options": _dumped(options),
            "tools": tools,
            "turns": turns,
        }
        return await in_thread(lambda: _run(provider, args))

    @server.tool(structured_output=False)
    async def ollama_chat(
        model: str,
        messages: list[Message],
        options: RunOptions | str | None = None,
        format: str | None = None,
    ) -> str:
        """Chat with a local Ollama model; returns the same JSON shape as ollama_run.

        `format` is accepted for compatibility with npm ollama-mcp clients and ignored: replies are text.
        """
        args = {"model": model, "messages": [m.model_dump() for m in messages], "options": _dumped(options)}
        return await in_thread(
            lambda: worker_tools.execute(provider, worker_tools.chat_tool_request(args), None)
        )

    @server.tool(structured_output=False)
    async def ollama_list_models() -> str:
        """List the models the Ollama server has, as JSON {"models": [names]}."""
        return await in_thread(lambda: worker_tools.list_models(provider))

    return server


def _run(provider: Provider, args: dict[str, Any]) -> str:
    # Apart from ollama_run: its argument `tools` hides the module there.
    return worker_tools.execute(provider, *worker_tools.run_request(args))


def _dumped(options: RunOptions | str | None) -> dict[str, Any] | str | None:
    return options.model_dump(exclude_none=True) if isinstance(options, RunOptions) else options


def die_with_parent() -> None:
    """A stdio worker serves the hub that spawned it and nobody else: when that hub dies (SIGKILL
    included), the kernel sends this process SIGTERM, so no generation outlives the phase that asked
    for it. Linux only (prctl); elsewhere stdin's end-of-file still stops an idle server."""
    if not sys.platform.startswith("linux"):
        return

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(0)


def serve(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_HTTP_PORT,
    ollama_host: str | None = None,
) -> None:
    """Run the worker server until stdin closes (stdio) or the process is stopped (http, sse)."""
    from hub.workers.ollama import OllamaProvider  # httpx: loaded when the server runs, not on import

    if transport == "stdio":
        die_with_parent()
    # Before anything can log: structlog's default would print to stdout, inside the protocol stream.
    configure(fmt=os.environ.get("HUB_LOG_FORMAT", "auto"), level=os.environ.get("HUB_LOG_LEVEL", "INFO"))
    host_url = normalize_ollama_host(ollama_host or os.environ.get("OLLAMA_HOST", ""))
    provider = OllamaProvider(host_url)
    server = build_server(provider)
    log.info("worker.serve", transport=transport, ollama=host_url, port=port)
    try:
        if transport == "stdio":
            server.run("stdio")
        elif transport == "http":
            server.run("streamable-http", host=host, port=port)
        elif transport == "sse":
            server.run("sse", host=host, port=port)
        else:
            raise ValueError(f"unknown transport '{transport}' (expected stdio, http or sse)")
    finally:
        provider.close()


def main(argv: list[str] | None = None) -> None:
    """`python -m hub.workers.worker_server [--transport T] [--host H] [--port N]`, for when the CLI is not at hand."""
    parser = argparse.ArgumentParser(
        prog="python -m hub.workers.worker_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT)
    args = parser.parse_args(argv)
    serve(args.transport, args.host, args.port)


if __name__ == "__main__":
    main(sys.argv[1:])
