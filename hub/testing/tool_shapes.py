"""Tool calls on FakeOllama's wire: the shapes each API answers them in, the shapes it takes them back in
(a real server refuses others with a 400), and how they count in the prompt.

Where each shape comes from:

- Ollama `/api/chat` (docs/api.md, "Chat request (with tools)"; Ollama >= 0.4 streams them): the calls
  come whole in one chunk, `message.tool_calls: [{"function": {"name", "arguments": {object}}}]`, with
  `content: ""`, and the final chunk says `done_reason: "stop"` (ollama/ollama#11633: each call comes
  whole in one chunk, held back while the model writes it). Newer versions add an `id`. The
  assistant turn goes back in the same shape and a tool's result as `{"role": "tool", "content",
  "tool_name"}`; arguments sent back as a string are refused (Go cannot unmarshal a string into
  `api.ToolCallFunctionArguments`).
- OpenAI-compatible `/v1/chat/completions` (OpenAI's streaming reference; llama.cpp server with `--jinja`,
  PR ggml-org/llama.cpp#12379 and its docs/function-calling.md): streamed, a call is deltas keyed by
  `index`, `choices[0].delta.tool_calls: [{index, id, type: "function", function: {name, arguments: ""}}]`
  first, then `[{index, function: {arguments: "<fragment>"}}]`, the fragments concatenating to a JSON
  string; the last chunk has `finish_reason: "tool_calls"` (Ollama's /v1 sends each call whole in one
  delta: a client that accumulates reads both). Not streamed: `choices[0].message.tool_calls` whole,
  `content: null`. Back: the assistant turn's `tool_calls: [{id, type: "function", function: {name,
  arguments: "<JSON string>"}}]`, a tool's result `{"role": "tool", "tool_call_id", "content"}`.
- A call cut by the token limit: its arguments stop mid-string and the finish reason is "length".
"""

from __future__ import annotations

import json
from typing import Any


def arguments_text(call: dict[str, Any]) -> str:
    """The arguments as the model generated them: JSON for a mapping, a raw string as it is."""
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def ollama_call(call: dict[str, Any]) -> dict[str, Any]:
    """One call in Ollama's `message.tool_calls` (a raw string stays a string: the broken shape)."""
    out: dict[str, Any] = {"function": {"name": call["name"], "arguments": call.get("arguments", {})}}
    if call.get("id"):
        out["id"] = str(call["id"])
    return out


def openai_id(call: dict[str, Any], index: int, completion_id: str) -> str:
    return str(call.get("id") or f"call_{completion_id.removeprefix('chatcmpl-')}{index}")


def openai_call(call: dict[str, Any], index: int, completion_id: str) -> dict[str, Any]:
    """One call in OpenAI's non-streamed `message.tool_calls`."""
    return {
        "id": openai_id(call, index, completion_id),
        "type": "function",
        "function": {"name": call["name"], "arguments": arguments_text(call)},
    }


def openai_delta(call: dict[str, Any], index: int, completion_id: str, fragment: str, first: bool) -> dict:
    """One streamed delta of a call: its id, type and name with the first fragment, then fragments alone."""
    if first:
        function = {"name": call["name"], "arguments": fragment}
        return {
            "index": index,
            "id": openai_id(call, index, completion_id),
            "type": "function",
            "function": function,
        }
    return {"index": index, "function": {"arguments": fragment}}


def message_texts(body: dict[str, Any]) -> list[str]:
    """What a chat template renders of the request, one text a message: each content, the calls of an
    assistant turn as JSON, and the tools offered (their schemas, as JSON in the system turn)."""
    texts = []
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        texts.append(json.dumps(tools, ensure_ascii=False))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content else ""
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            text += json.dumps(calls, ensure_ascii=False)
        texts.append(text)
    return [t for t in texts if t]


def wire_problem(api: str, body: dict[str, Any]) -> str | None:
    """Why a real server would refuse this request's tools or turns (a 400), or None. `api`: "ollama"
    or "openai"."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return "tools must be a list"
        for i, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return f"tools[{i}]: expected {{'type': 'function', 'function': {{'name': ...}}}}"
    messages = body.get("messages")
    seen_ids: set[str] = set()
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        if calls is not None:
            problem = _calls_problem(api, i, calls, seen_ids)
            if problem:
                return problem
        if message.get("role") == "tool" and api == "openai":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                return f"Missing required parameter: 'messages[{i}].tool_call_id'."
            if call_id not in seen_ids:
                return f"messages[{i}].tool_call_id {call_id!r} answers no tool call of an earlier assistant turn"
    return None


def _calls_problem(api: str, i: int, calls: Any, seen_ids: set[str]) -> str | None:
    if not isinstance(calls, list):
        return f"messages[{i}].tool_calls must be a list"
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return f"{where}: expected a 'function' with a 'name'"
        arguments = function.get("arguments")
        if api == "ollama" and not isinstance(arguments, dict):
            # Go's words for it: the field is an object type.
            kind = "string" if isinstance(arguments, str) else type(arguments).__name__
            return (
                f"json: cannot unmarshal {kind} into Go struct field ToolCallFunction.messages.tool_calls."
                "function.arguments of type api.ToolCallFunctionArguments"
            )
        if api == "openai":
            if not isinstance(arguments, str):
                return f"{where}.function.arguments must be a string (JSON text)"
            if call.get("type") != "function" or not isinstance(call.get("id"), str) or not call["id"]:
                return f"{where}: expected an 'id' and 'type': 'function'"
            seen_ids.add(call["id"])
    return None
