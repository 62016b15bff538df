"""The worker's tools without the MCP SDK: one body per tool, which `hub worker serve` serves over MCP
(hub/workers/server.py) and the hub's in-process worker (transport `inprocess`, hub/workers/inprocess.py)
calls directly. Both take the same arguments, hold them to the same limits and answer with the same
text, so the WorkerClient cannot tell them apart; the SDK is only the wire.

- `ollama_run{model, prompt, task_type?, options?}` and `ollama_chat{model, messages, options?, format?}`
  answer `{stdout, stderr, exitCode, error?, metadata}` (`run_result`, `error_result`): a failed model
  call is a result with `exitCode != 0` and `metadata.error_type` naming the hub error.
- `ollama_list_models{}` answers `{"models": [names]}`; an unreachable Ollama is a `ToolFailure`.
- A call that is itself wrong (bad arguments, an unknown tool) is a `ToolFailure`: an isError result.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hub.core.errors import ContextOverflow, ModelNotFound, WorkerError, WorkerTimeout
from hub.core.log import get_logger
from hub.workers.base import ChatRequest, Generation

log = get_logger(__name__)

TIMEOUT_EXIT_CODE = -1  # the original ollama-mcp's code for a run that timed out
ERROR_EXIT_CODE = 1
TOOL_NAMES = ("ollama_run", "ollama_list_models", "ollama_chat")
DESCRIPTIONS = {
    "ollama_run": "Run one prompt on a local Ollama model.",
    "ollama_list_models": 'List the models the Ollama server has, as JSON {"models": [names]}.',
    "ollama_chat": "Chat with a local Ollama model; returns the same JSON shape as ollama_run.",
}


class Provider(Protocol):
    """What the tools need from a model backend (OllamaProvider in production, fakes in tests)."""

    def generate(self, request: ChatRequest) -> Generation: ...

    def list_models(self) -> list[str]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ToolSpec:
    """One tool a server offers."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """A tools/call result: its text blocks joined, structured content if any, and the isError flag."""

    text: str
    is_error: bool = False
    structured: dict[str, Any] | None = None
    seconds: float = 0.0


class ToolFailure(Exception):
    """A tool call refused: wrong arguments, or no answer a result shape can carry (an isError result)."""


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


class RunArguments(BaseModel):
    """ollama_run's arguments (the server's tool signature says the same to the SDK)."""

    model_config = ConfigDict(title="ollama_runArguments")  # the SDK's name for them, in its messages
    model: str
    prompt: str
    task_type: str | None = None
    options: RunOptions | None = None


class ChatArguments(BaseModel):
    """ollama_chat's arguments; `options` may be a JSON string, as npm ollama-mcp clients send it."""

    model_config = ConfigDict(title="ollama_chatArguments")
    model: str
    messages: list[Message]
    options: RunOptions | str | None = None
    format: str | None = None


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


def parse_options(options: RunOptions | str | None) -> dict[str, Any]:
    """The options as a dict of the set ones; npm ollama-mcp's spelling, a JSON string, is accepted too."""
    if isinstance(options, str):
        try:
            options = RunOptions.model_validate_json(options) if options.strip() else None
        except ValueError as exc:
            raise ToolFailure(f"options is not a valid JSON object of options: {exc}") from None
    return options.model_dump(exclude_none=True) if options is not None else {}


def run_request(args: RunArguments) -> tuple[ChatRequest, str | None]:
    """ollama_run's request and task type."""
    return chat_request(args.model, args.prompt, parse_options(args.options)), args.task_type


def chat_tool_request(args: ChatArguments) -> ChatRequest:
    """ollama_chat's request: its messages flattened into one prompt."""
    if not args.messages:
        raise ToolFailure("messages must hold at least one message")
    system, prompt = flatten_messages([m.model_dump() for m in args.messages])
    return chat_request(args.model, prompt, parse_options(args.options), system=system)


def execute(provider: Provider, request: ChatRequest, task_type: str | None) -> str:
    """One generation as ollama_run's result text; a failed model call is a result, not an exception."""
    started = time.perf_counter()
    log.debug("worker.run", model=request.model, prompt_chars=len(request.prompt))
    try:
        generation = provider.generate(request)
    except WorkerError as exc:
        log.info("worker.run_failed", model=request.model, error=str(exc), kind=type(exc).__name__)
        result = error_result(exc, request.model, time.perf_counter() - started, task_type)
    else:
        result = run_result(generation, task_type)
    return json.dumps(result, ensure_ascii=False)


def list_models(provider: Provider) -> str:
    """ollama_list_models's result text; an unreachable Ollama is a ToolFailure naming it."""
    try:
        models = provider.list_models()
    except WorkerError as exc:
        raise ToolFailure(str(exc)) from None
    return json.dumps({"models": models})


def call(provider: Provider, name: str, arguments: dict[str, Any]) -> str:
    """One tool call by name, its arguments checked as the SDK checks them against the tool's schema;
    a ToolFailure carries what the SDK would answer as the isError result's text."""
    if name not in TOOL_NAMES:
        raise ToolFailure(f"Unknown tool: {name}")
    try:
        if name == "ollama_run":
            request, task_type = run_request(RunArguments.model_validate(arguments))
            return execute(provider, request, task_type)
        if name == "ollama_chat":
            return execute(provider, chat_tool_request(ChatArguments.model_validate(arguments)), None)
        return list_models(provider)
    except (ValidationError, ToolFailure) as exc:
        raise ToolFailure(f"Error executing tool {name}: {exc}") from None


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value
