"""JSON in a model's text, for the text fallback (hub.agent.text_calls): one value decoded where it starts,
a cut (the text ends inside it) told apart from a break, and the tool calls a value is. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hub.edits.parse_tools import ARGUMENT_KEYS, call_parts
from hub.workers.base import ToolCall
from hub.workers.toolcalls import read_arguments

# A raw newline in a string means that newline: reading it so guesses nothing.
_DECODER = json.JSONDecoder(strict=False)
_MAX_COMMAS = 50
TOO_DEEP = "nested too deep"
SHAPE = '{"name": ..., "arguments": {...}} with double-quoted keys and strings'
_META_KEYS = frozenset({"name", "tool", "id", "type", "function"})


@dataclass(frozen=True)
class Decoded:
    """One JSON value read from the text, or why none could be: `cut` (the text ends inside it) or
    `broken` (it closes but is not JSON, even without trailing commas)."""

    value: object = None
    end: int = 0
    cut: bool = False
    broken: str = ""


def decode_at(text: str, start: int) -> Decoded:
    """The JSON value at `start`. A comma before a closing bracket is dropped (it carries no value,
    so dropping it cannot change one); the decoder says where each is, so no text is rescanned."""
    whole, removed = text, 0
    last = len(text.rstrip())
    while True:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except RecursionError:
            # Nested deeper than Python's stack (a model looping on `[{`): no tool takes that, and
            # decoding it again from each of its brackets would cost the square of its length.
            return Decoded(end=len(whole), broken=TOO_DEEP)
        except json.JSONDecodeError as error:
            # The decoder ran out of text, or a string never closes (a raw newline is allowed
            # in one, so only the end of the text ends it): the reply ended inside the value.
            if error.pos >= last - removed or error.msg.startswith("Unterminated string"):
                return Decoded(end=len(whole), cut=True)
            comma = _trailing_comma(text, error.pos)
            if comma is None or removed >= _MAX_COMMAS:
                where = error.pos + removed
                return Decoded(end=where, broken=f"{error.msg} at character {where - start}")
            text, removed = text[:comma] + text[comma + 1 :], removed + 1
            continue
        except ValueError as error:  # an integer of more digits than Python converts (4,300)
            return Decoded(end=start + 1, broken=str(error).split(":")[0])
        return Decoded(value, end + removed)


def _trailing_comma(text: str, pos: int) -> int | None:
    """Where the comma is when the decoder, expecting a value at `pos`, finds a closing bracket right
    after one: `{"a": 1,}` or `[1, 2,]`; None for any other error."""
    if text[pos : pos + 1] not in ("}", "]"):
        return None
    i = pos - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i if i >= 0 and text[i] == "," else None


def _in_string(char: str, escaped: bool) -> tuple[bool, bool]:
    """(still inside the string, the next character escaped) after `char`, read inside a JSON string."""
    if escaped:
        return True, False
    return char != '"', char == "\\"


def balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket that closes the one at `start` (strings skipped); None when the text
    ends first."""
    depth = 0
    in_string = escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            in_string, escaped = _in_string(char, escaped)
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def calls_of(value: object) -> list[ToolCall] | None:
    """The calls a JSON value is: one call, a list of calls, `{"tool_calls": [...]}`; none (an empty
    list) for a tool's definition echoed back; None for anything else."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    if isinstance(value, list):
        read = [calls_of(item) for item in value]
        if not value or any(r is None or len(r) > 1 for r in read):
            return None
        return [r[0] for r in read if r]
    if not isinstance(value, dict):
        return None
    if is_definition(value):
        return []
    ident = value.get("id") if isinstance(value.get("id"), str) else ""
    parts = call_parts(value) or _other_parts(value)
    if parts is not None:
        return [call_of(parts[0], parts[1], str(ident))]
    name = value.get("name") or value.get("tool")
    if isinstance(name, str) and name:
        beside = sorted(set(value) - _META_KEYS)
        if not beside:
            return [ToolCall(name, {}, str(ident))]
        return [
            ToolCall(
                name,
                id=str(ident),
                problem=f"the call to {name} was not run: its arguments ({', '.join(beside)}) stand "
                f'beside its name; put them in an "arguments" object: {SHAPE}',
            )
        ]
    return None


def is_definition(value: dict[str, Any]) -> bool:
    """A tool's definition, as the prompt showed it (`{"type": "function", "function": {"name",
    "description", "parameters": {schema}}}`): the real Qwen2.5-Coder-1.5B echoes the list of them in
    `<tools>` before its call. A call carries no description and no schema."""
    inner = value["function"] if isinstance(value.get("function"), dict) else value
    schema = inner.get("parameters")
    return (
        "description" in inner and isinstance(schema, dict) and ("properties" in schema or "type" in schema)
    )


def _other_parts(value: dict[str, Any]) -> tuple[str, object] | None:
    """LangChain's `{"action", "action_input"}` and `{"tool_name", "tool_input"}`."""
    for name_key, arguments_key in (("action", "action_input"), ("tool_name", "tool_input")):
        name = value.get(name_key)
        if isinstance(name, str) and arguments_key in value:
            return name, value[arguments_key]
    function = value.get("function")
    if isinstance(function, str):
        key = next((k for k in ARGUMENT_KEYS if k in value), None)
        if key is not None:
            return function, value[key]
    return None


def call_of(name: str, raw: object, ident: str = "") -> ToolCall:
    arguments, wrong = read_arguments(name, raw)
    if wrong:
        return ToolCall(name, {}, ident, problem=f"the call to {name} was not run: {wrong}")
    return ToolCall(name, arguments, ident)
