"""The one seam between the phases and any model: `Worker.generate(request) -> Generation`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hub.core.errors import WorkerError
from hub.workers import budget

THINK_RE = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
# Not after a backtick or quote: prose may name the tag (`<think>`) without opening anything.
_THINK_OPEN = re.compile(r"(?<![`'\"])<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for: from the server's `tool_calls`, or read from its text (the
    agent's fallback, hub/agent). `problem` says why it cannot run as sent (arguments that are not a JSON
    object, a call cut off); it is told to the model instead of running anything."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    problem: str = ""


@dataclass(frozen=True)
class ChatRequest:
    """One model call. Timeouts are seconds; num_ctx is fixed per model by config."""

    model: str
    prompt: str
    system: str | None = None
    temperature: float = 0.2
    num_ctx: int = 8192
    num_predict: int | None = None
    first_token_timeout: float = 180.0
    stall_timeout: float = 60.0
    total_timeout: float = 900.0
    load_timeout: float = 600.0  # loading the model, on its own clock before the first-token clock
    token_scale: float = 1.0  # the model's calibration of the token estimate (hub.workers.budget)
    # Characters at the start of system + prompt that an earlier call (of this process or another) sent
    # the model: the server may hold them cached and leave them out of its prompt count (budget.Calibration).
    cached_chars: int = 0
    # The start of the answer, for the model to continue (a reply cut off at num_predict): sent as a
    # trailing assistant message, which Ollama's /api/chat continues instead of starting a new turn.
    prefill: str = ""
    # limits.max_reply_chars: a longer answer is cut off while it streams (issue 28: a 50 MB reply was
    # refused only after 159 s and 530 MB). None: no cap.
    max_chars: int | None = None
    # Told the pieces streamed so far (about one per token), for the live view of the call (issue 27).
    on_progress: Callable[[int], None] | None = field(default=None, compare=False, repr=False)
    # Agent mode (hub/agent): the tools offered, each `{"type": "function", "function": {"name",
    # "description", "parameters"}}` (the shape both Ollama's and the OpenAI API take), and the turns
    # after the prompt, in the hub's own shape that each provider puts on its wire:
    # `{"role": "assistant", "content", "tool_calls": [ToolCall]}` and
    # `{"role": "tool", "content", "tool_call_id", "name"}` (and plain user/assistant turns).
    tools: tuple[dict[str, Any], ...] = ()
    turns: tuple[dict[str, Any], ...] = ()

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages: the system prompt (if any), the prompt as the user's turn, the turns after
        it (agent mode), and the answer so far to continue (if any)."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        prefill = [{"role": "assistant", "content": self.prefill}] if self.prefill else []
        return [*system, {"role": "user", "content": self.prompt}, *self.turns, *prefill]

    def ollama_options(self) -> dict[str, object]:
        """Ollama's `options`: num_ctx on every call (a changing one makes Ollama reload the model)."""
        options: dict[str, object] = {"num_ctx": self.num_ctx, "temperature": self.temperature}
        if self.num_predict is not None:
            options["num_predict"] = self.num_predict
        return options


@dataclass(frozen=True)
class Generation:
    """What a model said, with the think blocks taken out and kept apart."""

    text: str
    model: str
    thinking: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    first_token_seconds: float = 0.0
    done_reason: str = ""
    truncated: bool = False
    raw: str = ""
    load_seconds: float = 0.0  # the server's load_duration: loading the model before this call
    tokens_estimated: bool = False  # the server sent no token counts; prompt/completion are estimates
    num_ctx: int = 0  # the window the call ran in, when it differs from the request's (0: the request's)
    # The server's own tool calls (Ollama's `message.tool_calls`, OpenAI's `tool_calls`); calls written
    # in the text are the agent's to find (hub/agent).
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Health:
    """What a worker can see: reachable or not, its models, and the ones we need but it lacks."""

    ok: bool
    reached: bool = True  # the worker answered with a model list (possibly lacking what we need)
    models: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class Worker(Protocol):
    """Anything that turns a ChatRequest into a Generation."""

    def generate(self, request: ChatRequest) -> Generation: ...

    def list_models(self) -> list[str]: ...

    def check_health(self, models: list[str]) -> Health: ...

    def close(self) -> None: ...


@runtime_checkable
class ServerWorker(Protocol):
    """A worker behind a server it starts (the MCP worker): starting it and reading its tools is a check
    of its own for `hub doctor`."""

    tools: tuple[str, ...]

    def connect(self) -> str: ...


def check_health(
    worker: Worker, models: list[str], unreachable_hint: str = "", missing_hint: str = ""
) -> Health:
    """The one health check every worker uses: list its models and name the wanted ones it lacks.
    A worker that cannot list them was not reached; the hints say what to do about either."""
    try:
        available = worker.list_models()
    except WorkerError as exc:
        detail = f"{exc}; {unreachable_hint}" if unreachable_hint else str(exc)
        return Health(ok=False, reached=False, missing=tuple(models), detail=detail)
    # Ollama (and its /v1) lists `name:latest` and accepts `name`; other servers' ids compare as they are.
    missing = tuple(m for m in models if not any(same_model(m, a) for a in available))
    if missing:
        detail = f"missing: {', '.join(missing)}" + (f" ({missing_hint})" if missing_hint else "")
    else:
        detail = f"{len(available)} models"
    return Health(ok=not missing, models=tuple(available), missing=missing, detail=detail)


def split_thinking(text: str) -> tuple[str, str]:
    """Take `<think>...</think>` blocks out (an unclosed one runs to the end); return (text, thinking).

    Only outside code fences: a file the model writes may hold the tags itself (`OPEN = "<think>"`),
    and stripping them there corrupts it. Inside thinking, fences do not count: drafts in it may be
    left open, and the closing tag ends it wherever it is."""
    out: list[str] = []
    thoughts: list[str] = []
    lines = text.splitlines(keepends=True)
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _FENCE.match(line.rstrip("\r\n"))
        if fence is not None:
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence) and not marker[2].strip():
                fence = None
        elif marker and not (marker[1][0] == "`" and "`" in marker[2]):
            fence = marker[1]
        elif opened := _THINK_OPEN.search(line):
            out.append(line[: opened.start()])
            rest = line[opened.end() :] + "".join(lines[i + 1 :])
            closed = _THINK_CLOSE.search(rest)
            thoughts.append(rest if closed is None else rest[: closed.start()])
            lines, i = ([] if closed is None else rest[closed.end() :].splitlines(keepends=True)), 0
            continue
        out.append(line)
        i += 1
    return "".join(out).strip(), "\n\n".join(t.strip() for t in thoughts if t.strip())


def same_model(a: str, b: str) -> bool:
    """Ollama's naming: `qwen2.5-coder` is `qwen2.5-coder:latest`."""

    def tagged(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"

    return tagged(a) == tagged(b)


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for dense text too (see hub.workers.budget)."""
    return budget.estimate_tokens(text)
