"""`hub worker serve`: an MCP server in front of Ollama, speaking the original ollama-mcp contract.

Tools:
- `ollama_run{model, prompt, task_type?, options?}` -> text JSON `{stdout, stderr, exitCode, error?, metadata}`
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
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from hub.core.config import normalize_ollama_host
from hub.core.errors import ContextOverflow, ModelNotFound, WorkerError, WorkerTimeout
from hub.core.log import configure, get_logger
from hub.workers.base import ChatRequest, Generation

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = get_logger(__name__)

SERVER_NAME = "agent-hub-worker"
SERVER_VERSION = "0.1.0"
DEFAULT_HTTP_PORT = 8765
TIMEOUT_EXIT_CODE = -1  # the original ollama-mcp's code for a run that timed out
ERROR_EXIT_CODE = 1
TOOL_NAMES = ("ollama_run", "ollama_list_models", "ollama_chat")


class Provider(Protocol):
    """What the server needs from a model backend (OllamaProvider in production, fakes in tests)."""

    def generate(self, request: ChatRequest) -> Generation: ...

    def list_models(self) -> list[str]: ...

    def close(self) -> None: ...


class RunOptions(BaseModel):
    """Generation options; timeouts are milliseconds. Unknown keys are ignored, as the original did."""

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


class Message(BaseModel):
    """One chat message, as ollama_chat takes them."""

    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


def run_result(generation: Generation, task_type: str | None = None) -> dict[str, Any]:
    """The original ollama-mcp result shape for a finished generation."""
    metadata: dict[str, Any] = {
        "model_used": generation.model,
        "task_type": task_type or "auto",
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "duration_ms": round(generation.seconds * 1000),
        "first_token_ms": round(generation.first_token_seconds * 1000),
        "done_reason": generation.done_reason,
        "truncated": generation.truncated,
        "timed_out": False,
        "load_ms": round(generation.load_seconds * 1000),
        "tokens_estimated": generation.tokens_estimated,
    }
    if generation.thinking:
        metadata["thinking"] = generation.thinking
    return {"stdout": generation.text, "stderr": "", "exitCode": 0, "metadata": metadata}


def error_result(
    error: WorkerError, model: str, seconds: float, task_type: str | None = None
) -> dict[str, Any]:
    """The result shape for a model call that failed, with enough detail to rebuild the hub error."""
    timed_out = isinstance(error, WorkerTimeout)
    metadata: dict[str, Any] = {
        "model_used": model,
        "task_type": task_type or "auto",
        "duration_ms": round(seconds * 1000),
        "timed_out": timed_out,
        "truncated": False,
        "error_type": type(error).__name__,
    }
    stdout = ""
    if isinstance(error, WorkerTimeout):
        metadata |= {"clock": error.clock, "timeout_seconds": error.seconds}
        stdout = error.partial_text
    elif isinstance(error, ContextOverflow):
        metadata |= {
            "prompt_tokens": error.prompt_tokens,
            "num_ctx": error.num_ctx,
            "answer_tokens": error.answer_tokens,
            "context_length": error.context_length,
            "source": error.source,
        }
    elif error.partial_text:
        stdout = error.partial_text
    elif isinstance(error, ModelNotFound):
        metadata["model_missing"] = error.model
    return {
        "stdout": stdout,
        "stderr": str(error),
        "exitCode": TIMEOUT_EXIT_CODE if timed_out else ERROR_EXIT_CODE,
        "error": "Timeout exceeded" if timed_out else str(error),
        "metadata": metadata,
    }


def chat_request(model: str, prompt: str, options: dict[str, Any], system: str | None = None) -> ChatRequest:
    """A ChatRequest from ollama_run's options; timeouts arrive in ms, unset values keep the defaults."""
    defaults = ChatRequest(model=model, prompt=prompt)

    def seconds(key: str, default: float) -> float:
        value = options.get(key)
        return default if value is None else float(value) / 1000.0

    return ChatRequest(
        model=model,
        prompt=prompt,
        system=options.get("system") if system is None else system,
        temperature=_pick(options.get("temperature"), defaults.temperature),
        num_ctx=int(_pick(options.get("num_ctx"), defaults.num_ctx)),
        num_predict=options.get("num_predict"),
        first_token_timeout=seconds("first_token_timeout", defaults.first_token_timeout),
        stall_timeout=seconds("stall_timeout", defaults.stall_timeout),
        total_timeout=seconds("timeout", defaults.total_timeout),
        load_timeout=seconds("load_timeout", defaults.load_timeout),
        token_scale=float(_pick(options.get("token_scale"), defaults.token_scale)),
    )


def flatten_messages(messages: list[dict[str, Any]]) -> tuple[str | None, str]:
    """Chat messages as (system, prompt): ChatRequest carries one prompt, so earlier turns become a transcript."""
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system") or None
    turns = [m for m in messages if m.get("role") != "system"]
    if len(turns) == 1 and turns[0].get("role") == "user":
        return system, str(turns[0].get("content", ""))
    lines = [f"{str(m.get('role', 'user')).capitalize()}: {m.get('content', '')}" for m in turns]
    return system, "\n\n".join(lines)


def build_server(provider: Provider, name: str = SERVER_NAME) -> MCPServer:
    """The worker MCP server over a provider (tests pass FakeOllama-backed or fake providers)."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name, version=SERVER_VERSION, instructions="Run prompts on local Ollama models.")

    async def run(request: ChatRequest, task_type: str | None) -> str:
        started = time.perf_counter()
        log.debug("worker.run", model=request.model, prompt_chars=len(request.prompt))
        try:
            generation = await anyio.to_thread.run_sync(provider.generate, request, abandon_on_cancel=True)
        except WorkerError as exc:
            log.info("worker.run_failed", model=request.model, error=str(exc), kind=type(exc).__name__)
            result = error_result(exc, request.model, time.perf_counter() - started, task_type)
        else:
            result = run_result(generation, task_type)
        return json.dumps(result, ensure_ascii=False)

    def parse_options(options: RunOptions | str | None) -> dict[str, Any]:
        if isinstance(options, str):
            # npm ollama-mcp passes options as a JSON string; accept that spelling too.
            try:
                options = RunOptions.model_validate_json(options) if options.strip() else None
            except ValueError as exc:
                raise ToolError(f"options is not a valid JSON object of options: {exc}") from None
        return options.model_dump(exclude_none=True) if options is not None else {}

    @server.tool(structured_output=False)
    async def ollama_run(
        model: str, prompt: str, task_type: str | None = None, options: RunOptions | None = None
    ) -> str:
        """Run one prompt on a local Ollama model.

        Returns JSON {stdout, stderr, exitCode, error?, metadata}: stdout is the model's reply; a failed
        or timed-out run has exitCode != 0 and the reason in stderr.
        """
        return await run(chat_request(model, prompt, parse_options(options)), task_type)

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
        if not messages:
            raise ToolError("messages must hold at least one message")
        system, prompt = flatten_messages([m.model_dump() for m in messages])
        return await run(chat_request(model, prompt, parse_options(options), system=system), None)

    @server.tool(structured_output=False)
    async def ollama_list_models() -> str:
        """List the models the Ollama server has, as JSON {"models": [names]}."""
        try:
            models = await anyio.to_thread.run_sync(provider.list_models, abandon_on_cancel=True)
        except WorkerError as exc:
            raise ToolError(str(exc)) from None
        return json.dumps({"models": models})

    return server


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


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def main(argv: list[str] | None = None) -> None:
    """`python -m hub.workers.server [--transport T] [--host H] [--port N]`, for when the CLI is not at hand."""
    parser = argparse.ArgumentParser(prog="python -m hub.workers.server", description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT)
    args = parser.parse_args(argv)
    serve(args.transport, args.host, args.port)


if __name__ == "__main__":
    main(sys.argv[1:])
