"""A tool call held to its tool's JSON schema before anything runs: `checked`. Pure.

Local models name tools that are not there (`read_files`), send the arguments as a JSON string, write
`"12"` for an integer, leave out a required argument or invent one (`file_path` for `path`). Each call
comes out either runnable, with arguments the schema accepts, or carrying a `problem` the model can act
on: which argument, what was expected, what came, and what the tool takes.

A value is changed only where the schema leaves one reading: a string of digits for an `integer`, a
number's text for a `string`, `"true"`/`"false"` for a `boolean`, a JSON string for an `array` or
`object`. A field with several types, or none, is left as written; nothing is ever guessed or filled in.
Nested values are checked by fastjsonschema (already a dependency, for the contract), not by hand.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from hub.core.log import get_logger
from hub.workers.base import ToolCall
from hub.workers.toolcalls import read_arguments

log = get_logger(__name__)

# Digits capped: Python converts no integer of more than 4,300 (and no tool takes one).
_INTEGER = re.compile(r"-?\d{1,300}")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,299})(?:\.\d{1,300})?(?:[eE][+-]?\d{1,4})?")
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_validators: dict[str, Callable[[Any], Any] | None] = {}


def checked(call: ToolCall, tools: Mapping[str, dict[str, Any]]) -> ToolCall:
    """The call held to its tool's schema (`tools`: name -> the tool's JSON-schema `parameters`): its
    arguments made exact where that is safe, or a `problem` naming what to send instead. A call that
    already carries a problem is returned as it is."""
    if call.problem:
        return call
    if call.name not in tools:
        return replace(call, problem=unknown_tool(call.name, tools))
    schema = tools[call.name] or {}
    arguments, wrong = read_arguments(call.name, call.arguments)
    if wrong:
        return replace(
            call, arguments={}, problem=f"{call.name} was not run: {wrong}. {usage(call.name, schema)}"
        )
    fixed, problems = _hold(arguments, schema)
    if problems:
        log.debug("agent.call.refused", tool=call.name, problems=problems)
        return replace(
            call, problem=f"{call.name} was not run: {'; '.join(problems)}. {usage(call.name, schema)}"
        )
    return replace(call, arguments=fixed)


def unknown_tool(name: str, tools: Mapping[str, object]) -> str:
    """The problem of a call to a tool that is not offered: the closest name, and the ones there are."""
    closest = difflib.get_close_matches(name, list(tools), n=1, cutoff=0.6)
    hint = f"; did you mean {closest[0]!r}?" if closest else "."
    offered = ", ".join(sorted(tools)) or "none"
    return f"there is no tool {name!r}{hint} The tools are: {offered}"


def usage(name: str, schema: Mapping[str, Any]) -> str:
    """One line saying what the tool takes: `read_file takes path (string, required), start (integer).`"""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if not properties:
        return f"{name} takes no arguments."
    parts = []
    for key, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds = "/".join(kind) if isinstance(kind, list) else (kind or "any value")
        parts.append(f"{key} ({kinds}{', required' if key in required else ''})")
    return f"{name} takes {', '.join(parts)}."


def _hold(arguments: dict[str, Any], schema: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", not properties)
    problems: list[str] = []
    fixed: dict[str, Any] = {}
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            if not extra:  # a schema for the extra arguments is truthy, and lets them through
                closest = difflib.get_close_matches(key, list(properties), n=1, cutoff=0.5)
                hint = f" (did you mean {closest[0]!r}?)" if closest else ""
                problems.append(f"unknown argument {key!r}{hint}")
                continue
            fixed[key] = value
            continue
        value, problem = _value(key, value, spec if isinstance(spec, dict) else {})
        if problem:
            problems.append(problem)
        fixed[key] = value
    for key in schema.get("required") or ():
        if key not in arguments:
            spec = properties.get(key)
            kind = spec.get("type") if isinstance(spec, dict) else None
            expected = f" ({_TYPE_NAMES.get(kind, kind)})" if isinstance(kind, str) else ""
            problems.append(f"missing required argument {key!r}{expected}")
    if not problems:
        deeper = _deep_problem(fixed, schema)
        if deeper:
            problems.append(deeper)
    return fixed, problems


def _value(key: str, value: Any, spec: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The value coerced where its property's one type leaves one reading; the problem when it is wrong."""
    kind = spec.get("type")
    if isinstance(kind, str):
        value = _coerced(value, kind)
        if not _is(value, kind):
            return value, (
                f"argument {key!r} must be {_TYPE_NAMES.get(kind, kind)}, got {_kind(value)}"
                + ("" if value is None else f" {_shown(value)}")
            )
    allowed = spec.get("enum")
    if isinstance(allowed, list) and value not in allowed:
        return value, f"argument {key!r} must be one of {json.dumps(allowed)}, got {_shown(value)}"
    return value, None


def _coerced(value: Any, kind: str) -> Any:
    if kind == "integer":
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind == "number":
        if isinstance(value, str) and _NUMBER.fullmatch(value):
            return json.loads(value)
    elif kind == "string":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return json.dumps(value)
    elif kind == "boolean":
        if value in ("true", "false"):
            return value == "true"
    elif kind in ("array", "object") and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return value
        return parsed if _is(parsed, kind) else value
    return value


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    checks: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "boolean": bool,
        "array": list,
        "object": dict,
        "null": type(None),
    }
    expected = checks.get(kind)
    return expected is None or isinstance(value, expected)


def _deep_problem(arguments: dict[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What fastjsonschema finds wrong below the top level (items, bounds, patterns); None when nothing,
    or when the tool's schema is one fastjsonschema cannot compile (an MCP server's own business)."""
    validate = _validator(schema)
    if validate is None:
        return None
    try:
        validate(arguments)
    except ValueError as error:  # fastjsonschema's JsonSchemaValueException
        # It names fields "data.path" / "data.edits[0].old"; the model knows them as arguments.
        return re.sub(r"^data\.?", "argument ", str(error)).replace("argument  ", "the arguments ")
    return None


def _validator(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    key = json.dumps(schema, sort_keys=True, default=str)
    if key not in _validators:
        import fastjsonschema  # ~60 ms: only agent mode pays it

        try:
            _validators[key] = fastjsonschema.compile(dict(schema))
        except fastjsonschema.JsonSchemaDefinitionException as error:
            log.debug("agent.schema.uncompiled", error=str(error))
            _validators[key] = None
    return _validators[key]


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
