"""The one seam between the phases and any model: `Worker.generate(request) -> Generation`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

THINK_RE = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


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

    def messages(self) -> list[dict[str, str]]:
        """The chat messages: the system prompt (if any), then the prompt as the user's turn."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.prompt}]

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


@dataclass(frozen=True)
class Health:
    """What a worker can see: reachable or not, its models, and the ones we need but it lacks."""

    ok: bool
    models: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    reachable: bool = True  # False: the server is down or failing (an outage to wait out)


class Worker(Protocol):
    """Anything that turns a ChatRequest into a Generation."""

    def generate(self, request: ChatRequest) -> Generation: ...

    def check_health(self, models: list[str]) -> Health: ...

    def close(self) -> None: ...


def split_thinking(text: str) -> tuple[str, str]:
    """Strip `<think>...</think>` blocks (an unclosed one runs to the end); return (text, thinking)."""
    thoughts = [m.group(1).strip() for m in THINK_RE.finditer(text)]
    return THINK_RE.sub("", text).strip(), "\n\n".join(t for t in thoughts if t)


def same_model(a: str, b: str) -> bool:
    """Ollama's naming: `qwen2.5-coder` is `qwen2.5-coder:latest`."""

    def tagged(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"

    return tagged(a) == tagged(b)


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for dense text too (see hub.workers.budget)."""
    from hub.workers.budget import estimate_tokens as estimate

    return estimate(text)
