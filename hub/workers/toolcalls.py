"""Tool calls on the providers' wires (agent mode, issue 19): the turns after the prompt put in each API's
shape, and the server's calls read back into `ToolCall`s.

    Ollama /api/chat                                   OpenAI-compatible /chat/completions
    out: assistant {content, tool_calls: [{function:   out: assistant {content, tool_calls: [{id, type:
           {name, arguments: {object}}}]}                     "function", function: {name, arguments:
         tool {content, tool_name}                            "<JSON text>"}}]}; tool {tool_call_id, content}
    in:  message.tool_calls, each call whole           in:  delta.tool_calls keyed by index, the arguments
                                                            in fragments to join; message.tool_calls whole

A call that cannot run as sent (arguments that are not a JSON object, no name, cut by the token limit)
comes back as a ToolCall with a `problem` and empty arguments: the agent tells the model, never runs it.
The shapes are FakeOllama's (hub/testing/tool_shapes.py says where each comes from).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hub.core.templates import fragment
from hub.workers import budget
from hub.workers.base import ChatRequest, ToolCall

SHOWN_ARGUMENT_CHARS = 120


def as_tool_call(value: Any) -> ToolCall:
    """A turn's call as a ToolCall: itself, or the dict a JSON hop made of one (the worker bridge)."""
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, dict):
        arguments = value.get("arguments")
        return ToolCall(
            name=str(value.get("name") or ""),
            arguments=arguments if isinstance(arguments, dict) else {},
            id=str(value.get("id") or ""),
            problem=str(value.get("problem") or ""),
        )
    raise TypeError(f"a turn's tool call must be a ToolCall or a mapping, not {type(value).__name__}")


def call_dict(call: ToolCall) -> dict[str, Any]:
    """A ToolCall as plain JSON (the worker bridge's result, the turns it carries)."""
    out: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if call.id:
        out["id"] = call.id
    if call.problem:
        out["problem"] = call.problem
    return out


def turn_dict(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn as plain JSON: its calls as dicts."""
    if not turn.get("tool_calls"):
        return dict(turn)
    return {**turn, "tool_calls": [call_dict(as_tool_call(c)) for c in turn["tool_calls"]]}


def _head(request: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The messages before the turns (system, prompt) and after them (the answer to continue)."""
    messages = request.messages()
    start = 2 if request.system else 1
    return messages[:start], messages[start + len(request.turns) :]


def ollama_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """`messages` for Ollama's /api/chat. Without turns, exactly `request.messages()`."""
    if not request.turns:
        return request.messages()
    head, tail = _head(request)
    out = list(head)
    for turn in request.turns:
        role = turn.get("role")
        content = str(turn.get("content") or "")
        if role == "tool":
            out.append({"role": "tool", "content": content, "tool_name": str(turn.get("name") or "")})
        elif role == "assistant" and turn.get("tool_calls"):
            calls = [as_tool_call(c) for c in turn["tool_calls"]]
            wire = [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls]
            out.append({"role": "assistant", "content": content, "tool_calls": wire})
        else:
            out.append({"role": str(role or "user"), "content": content})
    return out + tail


def openai_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """`messages` for an OpenAI-compatible server. Without turns, exactly `request.messages()`. A call
    without an id (the text fallback's, Ollama's) gets one, and a tool result without one answers the
    first call still unanswered (by name if it can): the API refuses a result that answers no call."""
    if not request.turns:
        return request.messages()
    head, tail = _head(request)
    out = list(head)
    pending: deque[tuple[str, str]] = deque()  # (id, name) of calls not yet answered
    for n, turn in enumerate(request.turns):
        role = turn.get("role")
        content = str(turn.get("content") or "")
        if role == "tool":
            # A result naming no unanswered call (the loop names its own ids for calls that had none)
            # answers the first unanswered call of its tool, else the first unanswered call.
            given = str(turn.get("tool_call_id") or "")
            named = any(given == p[0] for p in pending)
            call_id = (
                given if named else _take(pending, str(turn.get("name") or "")) or given or "call_unanswered"
            )
            pending = deque(p for p in pending if p[0] != call_id)
            out.append({"role": "tool", "tool_call_id": call_id, "content": content})
        elif role == "assistant" and turn.get("tool_calls"):
            wire = []
            for j, call in enumerate(as_tool_call(c) for c in turn["tool_calls"]):
                call_id = call.id or f"call_{n}_{j}"
                pending.append((call_id, call.name))
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                wire.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments},
                    }
                )
            out.append({"role": "assistant", "content": content or None, "tool_calls": wire})
        else:
            out.append({"role": str(role or "user"), "content": content})
    return out + tail


def _take(pending: deque[tuple[str, str]], name: str) -> str:
    for call_id, called in pending:
        if called == name:
            return call_id
    return pending[0][0] if pending else ""


def turns_text(request: ChatRequest) -> str:
    """What the turns and tools add to the prompt, as a chat template renders them (JSON for the tool
    schemas and the calls): for the context budget."""
    parts = [json.dumps(list(request.tools), ensure_ascii=False)] if request.tools else []
    for turn in request.turns:
        parts.append(str(turn.get("content") or ""))
        if turn.get("tool_calls"):
            calls = [call_dict(as_tool_call(c)) for c in turn["tool_calls"]]
            parts.append(json.dumps(calls, ensure_ascii=False))
    return "\n".join(p for p in parts if p)


def full_prompt(request: ChatRequest) -> str:
    """The prompt with the tools and the turns after it as text: what the budget counts."""
    extra = turns_text(request)
    return request.prompt + "\n" + extra if extra else request.prompt


def estimated_prompt_tokens(request: ChatRequest) -> int:
    """The uncalibrated estimate of everything the request sends before the answer."""
    return budget.prompt_tokens(full_prompt(request), request.system, turns=len(request.turns))


def text_turns(turns: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The turns as plain text messages, for a worker that carries no tools (npm ollama-mcp): a call as
    the fenced JSON the agent's text fallback reads, a tool's result as a user turn naming the tool."""
    out = []
    for turn in turns:
        role, content = turn.get("role"), str(turn.get("content") or "")
        if role == "tool":
            name = str(turn.get("name") or "the tool")
            out.append(
                {"role": "user", "content": fragment(None, "tool_result_text", tool=name, result=content)}
            )
        elif turn.get("tool_calls"):
            calls = [as_tool_call(c) for c in turn["tool_calls"]]
            fenced = [
                f"```json\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n```" for c in calls
            ]
            out.append(
                {"role": "assistant", "content": "\n\n".join([content, *fenced] if content else fenced)}
            )
        else:
            out.append({"role": str(role or "user"), "content": content})
    return tuple(out)


def read_arguments(name: str, arguments: Any) -> tuple[dict[str, Any], str]:
    """(arguments, problem): an object as it is, JSON text parsed; anything else a problem naming it."""
    if isinstance(arguments, dict):
        return arguments, ""
    if arguments is None or arguments == "":
        return {}, ""
    if not isinstance(arguments, str):
        return {}, f"the arguments of {name} must be a JSON object, not {_kind(arguments)}"
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        return {}, f"the arguments of {name} are not valid JSON ({exc}): {_shown(arguments)}"
    except RecursionError:  # nested deeper than Python's stack: no tool takes that
        return {}, f"the arguments of {name} are nested too deep to read: {_shown(arguments)}"
    if not isinstance(parsed, dict):
        return {}, f"the arguments of {name} must be a JSON object, not {_kind(parsed)}: {_shown(arguments)}"
    return parsed, ""


def ollama_calls(calls: Any) -> list[ToolCall]:
    """Ollama's `message.tool_calls` (each whole) as ToolCalls."""
    out = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            out.append(
                ToolCall(name="", problem=f"a tool call without a function: {_shown(json.dumps(call))}")
            )
            continue
        name = str(function.get("name") or "")
        arguments, problem = read_arguments(name or "the call", function.get("arguments"))
        if not name:
            problem = problem or "a tool call without a function name"
        out.append(ToolCall(name=name, arguments=arguments, id=str(call.get("id") or ""), problem=problem))
    return out


@dataclass
class OpenAICalls:
    """OpenAI-compatible tool calls as they stream: deltas keyed by index, id and name once, the
    arguments in fragments (or whole, from Ollama's /v1 and a non-streamed answer)."""

    calls: dict[int, dict[str, str]] = field(default_factory=dict)

    def add(self, deltas: Any) -> bool:
        """Take one chunk's `tool_calls`; True when it carried any."""
        if not isinstance(deltas, list) or not deltas:
            return False
        for position, delta in enumerate(deltas):
            if not isinstance(delta, dict):
                continue
            index = delta.get("index")
            key = index if isinstance(index, int) and not isinstance(index, bool) else position
            call = self.calls.setdefault(key, {"id": "", "name": "", "arguments": ""})
            if delta.get("id"):
                call["id"] = str(delta["id"])
            function = delta.get("function")
            if isinstance(function, dict):
                if function.get("name") and not call["name"]:
                    call["name"] = str(function["name"])  # sent once, with the first fragment
                fragment = function.get("arguments")
                if isinstance(fragment, str):
                    call["arguments"] += fragment
                elif isinstance(fragment, dict):
                    call["arguments"] += json.dumps(fragment)  # a server that sends an object anyway
        return True

    def chars(self) -> int:
        """The characters of arguments received so far (held to the reply's size cap with the text)."""
        return sum(len(call["arguments"]) for call in self.calls.values())

    def result(self, cut: bool) -> list[ToolCall]:
        """The calls, in index order. `cut`: the answer ended at the token limit, so the last call (and
        any whose arguments do not parse) was cut off mid-way: never run."""
        out = []
        keys = sorted(self.calls)
        for key in keys:
            call = self.calls[key]
            name = call["name"]
            arguments, problem = read_arguments(name or "the call", call["arguments"])
            if cut and (problem or key == keys[-1]):
                arguments, problem = (
                    {},
                    (
                        f"the call to {name or 'a tool'} was cut off by the token limit before its arguments "
                        f"ended: {_shown(call['arguments'])}"
                    ),
                )
            elif not name:
                problem = problem or "a tool call without a function name"
            out.append(ToolCall(name=name, arguments=arguments, id=call["id"], problem=problem))
        return out


def cut_calls(calls: list[ToolCall]) -> list[ToolCall]:
    """Ollama's calls in an answer that ended at the token limit: one whose arguments did not parse was
    cut off (Ollama sends only calls it parsed whole, so usually there are none)."""
    return [
        ToolCall(
            c.name, {}, c.id, f"the call to {c.name or 'a tool'} was cut off by the token limit: {c.problem}"
        )
        if c.problem
        else c
        for c in calls
    ]


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_ARGUMENT_CHARS else text[:SHOWN_ARGUMENT_CHARS] + "..."
