"""The worker's tools without the MCP SDK: one body per tool, which `hub worker serve` serves over MCP
(hub/workers/worker_server.py) and the hub's in-process worker (transport `inprocess`, hub/workers/inprocess.py)
calls directly. Both take the same arguments, hold them to the same limits and answer with the same
text, so the WorkerClient cannot tell them apart; the SDK is only the wire.

- `ollama_run{model, prompt, task_type?, options?, tools?, turns?}` and `ollama_chat{model, messages,
  options?, format?}` answer `{stdout, stderr, exitCode, error?, metadata}` (`run_result`,
  `error_result`): a failed model call is a result with `exitCode != 0` and `metadata.error_type` naming
  the hub error. `tools` and `turns` (hub extensions, agent mode) are `ChatRequest.tools` and `.turns`
  as JSON (a call `{name, arguments, id?, problem?}`); the model's own calls come back in
  `metadata.tool_calls` in that shape.
- `ollama_list_models{}` answers `{"models": [names]}`; an unreachable Ollama is a `ToolFailure`.
- A call that is itself wrong (bad arguments, an unknown tool) is a `ToolFailure`: an isError result.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hub.core.errors import ContextOverflow, ModelNotFound, WorkerError, WorkerTimeout
from hub.core.log import get_logger
from hub.workers.base import ChatRequest, Generation, ToolCall
from hub.workers.toolcalls import call_dict

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


@dataclass(frozen=True)
class Limit:
    """One option's type and bounds. `RunOptions` (hub/workers/worker_server.py) says the same to the SDK,
    which publishes it as the tool's input schema; tests/workers/test_inprocess.py holds the two equal."""

    kind: type
    ge: float | None = None
    gt: float | None = None
    le: float | None = None


# ollama_run's and ollama_chat's options; timeouts are milliseconds. Unknown keys are ignored, as the
# original did.
OPTIONS: dict[str, Limit] = {
    "system": Limit(str),
    "temperature": Limit(float, ge=0, le=2),
    "num_predict": Limit(int, gt=0),
    "num_ctx": Limit(int, ge=256),
    "timeout": Limit(float, gt=0),
    "first_token_timeout": Limit(float, gt=0),
    "stall_timeout": Limit(float, gt=0),
    "load_timeout": Limit(float, gt=0),
    "token_scale": Limit(float, gt=0),
    "max_chars": Limit(int, gt=0),  # limits.max_reply_chars: the stream is cut there (hub extension)
    "cached_chars": Limit(int, ge=0),  # the prompt's start an earlier call sent (hub extension)
}
ROLES = ("system", "user", "assistant")
# ollama_run's arguments, as the in-process worker lists them (the SDK publishes the same names).
RUN_ARGUMENTS = ("model", "prompt", "task_type", "options", "tools", "turns")
TURN_ROLES = ("user", "assistant", "tool")
MAX_TOOLS = 128  # a bound on what one call offers (MCP servers list tens; a model chooses poorly past that)
MAX_TURNS = 1000  # far past any agent.max_turns; a bound on a malformed or hostile client


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
    if generation.tool_calls:
        metadata["tool_calls"] = [call_dict(c) for c in generation.tool_calls]
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
        max_chars=int(options["max_chars"]) if isinstance(options.get("max_chars"), int) else None,
        cached_chars=int(options["cached_chars"]) if isinstance(options.get("cached_chars"), int) else 0,
    )


def flatten_messages(messages: list[dict[str, Any]]) -> tuple[str | None, str]:
    """Chat messages as (system, prompt): ChatRequest carries one prompt, so earlier turns become a transcript."""
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system") or None
    turns = [m for m in messages if m.get("role") != "system"]
    if len(turns) == 1 and turns[0].get("role") == "user":
        return system, str(turns[0].get("content", ""))
    lines = [f"{str(m.get('role', 'user')).capitalize()}: {m.get('content', '')}" for m in turns]
    return system, "\n\n".join(lines)


def check_options(options: Any) -> dict[str, Any]:
    """The set options, each checked against its limit; npm ollama-mcp's spelling, a JSON string, too."""
    if isinstance(options, str):
        if not options.strip():
            return {}
        try:
            options = json.loads(options)
        except ValueError as exc:
            raise ToolFailure(f"options is not a valid JSON object of options: {exc}") from None
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ToolFailure("options: must be an object of options")
    return {
        name: _checked(f"options.{name}", options[name], limit)
        for name, limit in OPTIONS.items()
        if options.get(name) is not None
    }


def _checked(where: str, value: Any, limit: Limit) -> Any:
    if limit.kind is str:
        if not isinstance(value, str):
            raise ToolFailure(f"{where}: must be a string")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolFailure(f"{where}: must be a number")
    if limit.kind is int and value != int(value):
        raise ToolFailure(f"{where}: must be a whole number")
    number = int(value) if limit.kind is int else float(value)
    if limit.ge is not None and number < limit.ge:
        raise ToolFailure(f"{where}: must be greater than or equal to {limit.ge:g}")
    if limit.gt is not None and number <= limit.gt:
        raise ToolFailure(f"{where}: must be greater than {limit.gt:g}")
    if limit.le is not None and number > limit.le:
        raise ToolFailure(f"{where}: must be less than or equal to {limit.le:g}")
    return number


def _text(arguments: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = arguments.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ToolFailure(f"{key}: {'is required' if value is None else 'must be a string'}")
    return value


def check_tools(value: Any) -> tuple[dict[str, Any], ...]:
    """ollama_run's `tools`: each `{type: function, function: {name, description?, parameters?}}`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ToolFailure("tools: must be a list of {type: function, function: {name, ...}}")
    if len(value) > MAX_TOOLS:
        raise ToolFailure(f"tools: at most {MAX_TOOLS} tools, got {len(value)}")
    for index, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not function["name"]
            or not isinstance(function.get("description", ""), str)
            or not isinstance(function.get("parameters", {}), dict)
        ):
            raise ToolFailure(
                f"tools[{index}]: must be {{type: function, function: {{name: text, description?: text, "
                "parameters?: JSON schema object}}}"
            )
    return tuple(value)


def check_turns(value: Any) -> tuple[dict[str, Any], ...]:
    """ollama_run's `turns`: the messages after the prompt, in ChatRequest.turns' shape (calls as
    `{name, arguments, id?, problem?}`, made ToolCalls here)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ToolFailure("turns: must be a list of {role: user|assistant|tool, content: text, ...}")
    if len(value) > MAX_TURNS:
        raise ToolFailure(f"turns: at most {MAX_TURNS} turns, got {len(value)}")
    out = []
    for index, turn in enumerate(value):
        where = f"turns[{index}]"
        if (
            not isinstance(turn, dict)
            or turn.get("role") not in TURN_ROLES
            or not isinstance(turn.get("content"), str)
        ):
            raise ToolFailure(f"{where}: must be {{role: user|assistant|tool, content: text}}")
        checked: dict[str, Any] = {"role": turn["role"], "content": turn["content"]}
        for key in ("tool_call_id", "name") if turn["role"] == "tool" else ():
            if turn.get(key) is not None:
                if not isinstance(turn[key], str):
                    raise ToolFailure(f"{where}.{key}: must be a string")
                checked[key] = turn[key]
        if turn["role"] == "assistant" and turn.get("tool_calls") is not None:
            checked["tool_calls"] = _calls(f"{where}.tool_calls", turn["tool_calls"])
        out.append(checked)
    return tuple(out)


def _calls(where: str, calls: Any) -> list[ToolCall]:
    if not isinstance(calls, list) or len(calls) > MAX_TOOLS:
        raise ToolFailure(f"{where}: must be a list of at most {MAX_TOOLS} calls")
    out = []
    for index, call in enumerate(calls):
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("arguments", {}), dict)
            or not all(isinstance(call.get(k, ""), str) for k in ("id", "problem"))
        ):
            raise ToolFailure(
                f"{where}[{index}]: must be {{name: text, arguments: object, id?: text, problem?: text}}"
            )
        out.append(
            ToolCall(call["name"], call.get("arguments", {}), call.get("id", ""), call.get("problem", ""))
        )
    return out


def run_request(arguments: dict[str, Any]) -> tuple[ChatRequest, str | None]:
    """ollama_run's request and task type, its arguments checked."""
    model, prompt = str(_text(arguments, "model")), str(_text(arguments, "prompt"))
    task_type = _text(arguments, "task_type", required=False)
    request = chat_request(model, prompt, check_options(arguments.get("options")))
    tools, turns = check_tools(arguments.get("tools")), check_turns(arguments.get("turns"))
    return (replace(request, tools=tools, turns=turns) if tools or turns else request), task_type


def chat_tool_request(arguments: dict[str, Any]) -> ChatRequest:
    """ollama_chat's request, its arguments checked: its messages flattened into one prompt."""
    model = str(_text(arguments, "model"))
    messages = arguments.get("messages")
    if not isinstance(messages, list):
        raise ToolFailure("messages: must be a list of {role, content}")
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            raise ToolFailure(f"messages[{index}]: must be {{role: system|user|assistant, content: text}}")
    if not messages:
        raise ToolFailure("messages must hold at least one message")
    system, prompt = flatten_messages(messages)
    return chat_request(model, prompt, check_options(arguments.get("options")), system=system)


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
    """One tool call by name, its arguments checked as the SDK checks them against the tool's schema
    (without pydantic, whose import and plugin scan cost a phase ~0.1 s); a ToolFailure carries the
    isError result's text, worded as the SDK words it."""
    if name not in TOOL_NAMES:
        raise ToolFailure(f"Unknown tool: {name}")
    try:
        if name == "ollama_run":
            return execute(provider, *run_request(arguments))
        if name == "ollama_chat":
            return execute(provider, chat_tool_request(arguments), None)
        return list_models(provider)
    except ToolFailure as exc:
        raise ToolFailure(f"Error executing tool {name}: {exc}") from None


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value
