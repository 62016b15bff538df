"""What FakeOllama is scripted with (`Reply`), what it records (`RecordedRequest`), and script files."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class Reply:
    """One scripted answer and the faults to inject while sending it."""

    text: str = ""
    thinking: str = ""  # sent as a <think>...</think> prefix, or as message.thinking (see thinking_field)
    thinking_field: bool = False  # thinking in message.thinking even when the call did not ask "think"
    first_token_delay: float = 0.0  # seconds before the first chunk (and the headers, unless early_headers)
    early_headers: bool = False  # send the headers at once, before first_token_delay (as vLLM does)
    stall_after_chars: int | None = None  # stop sending after this many characters...
    stall_seconds: float = 0.0  # ...for this long, then carry on unless the client has gone
    drop_after_chars: int | None = None  # close the connection abruptly after this many characters
    status: int = 200  # e.g. 500: an {"error": ...} body as Ollama sends it, before any streaming
    error: str | None = None  # with status 200: the stream fails mid-generation (an error line on Ollama's
    # API; an empty chunk and no [DONE] on /v1, as Ollama does) instead of the final chunk
    truncate_line: bool = False  # one broken NDJSON line after the first chunk
    prompt_eval_count: int | None = None  # override, to mimic silent context truncation
    eval_count: int | None = None
    done_reason: str = "stop"
    chunk_chars: int = 8  # characters per streamed chunk
    chunk_delay: float = 0.0  # seconds between chunks: a slow but steady model
    usage: bool = True  # False: no usage on /v1 even when asked (llama-cpp-python's server)
    # The server's tool calls, after `text`: each `{"name": str, "arguments": {...} or a raw string}`,
    # optionally `"id"`. A raw string is sent as it is: a non-JSON one is the broken shape local models
    # produce; one cut short with done_reason "length" is a call cut by the token limit (see tools.py).
    tool_calls: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        calls = tuple(self.tool_calls)  # a script file gives a list
        for i, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError(f"FakeOllama: tool_calls[{i}] must be a mapping with a string 'name'")
            if not isinstance(call.get("arguments", {}), dict | str):
                raise ValueError(f"FakeOllama: tool_calls[{i}].arguments must be a mapping or a string")
        self.tool_calls = calls


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it (body is the parsed JSON, None for GET or a non-JSON body)."""

    method: str
    path: str
    body: dict[str, Any] | None
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-cased names


Responder = Callable[[dict[str, Any]], "Reply | str"]


def as_reply(item: Reply | str) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply(text=item)
    raise TypeError(f"FakeOllama: a reply must be a Reply or a str, not {type(item).__name__}")


def load_script(text: str) -> dict[str, list[Reply] | Reply]:
    """Parse a script file's text (JSON or YAML): model -> list of replies, or one reply to repeat."""
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ValueError(f"script: not valid YAML or JSON{where}: {problem}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ValueError('script: expected {"models": {name: [reply, ...]}}')
    allowed = {f.name for f in fields(Reply)}

    def reply(item: Any, where: str) -> Reply:
        if isinstance(item, str):
            return Reply(text=item)
        if isinstance(item, dict):
            unknown = sorted(set(item) - allowed)
            if unknown:
                raise ValueError(f"script: {where}: unknown reply field(s) {', '.join(unknown)}")
            return Reply(**item)
        raise ValueError(f"script: {where}: a reply is a string or a mapping")

    out: dict[str, list[Reply] | Reply] = {}
    for name, value in data["models"].items():
        if isinstance(value, list):
            out[str(name)] = [reply(item, f"models.{name}[{i}]") for i, item in enumerate(value)]
        elif isinstance(value, dict) and set(value) == {"repeat"}:
            out[str(name)] = reply(value["repeat"], f"models.{name}.repeat")
        elif value is None:
            out[str(name)] = []
        else:
            raise ValueError(f"script: models.{name}: expected a list of replies or {{repeat: reply}}")
    return out
