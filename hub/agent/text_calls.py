"""Tool calls a local model writes in its reply's text instead of the server's `tool_calls`: read in the
order written, each held to its tool's schema (`hub.agent.arguments.checked`). Pure.

Asked with tools, Qwen2.5-Coder-1.5B behind `llama-server --jinja` answers a call as fenced JSON in the
content, `finish_reason: stop`, no `tool_calls` (docs/ARCHITECTURE.md, "Agent mode's text fallback");
users of Ollama, vLLM, LM Studio, Cline and goose report the other shapes read here, one case each in
tests/agent/corpus/:

- JSON calls `{"name", "arguments"|"parameters"|"args"|"input"}`, `{"tool", ...}`, `{"function": {...}}`,
  `{"tool_calls": [...]}`, a list of them, several in one reply; in a ```json fence, bare on a line of
  their own, or inside a wrapper: Hermes/Qwen `<tool_call>` (closed or not), `<tools>`, `<function>`,
  Phi-4's `<|tool_call|>` and `functools[...]`, Llama's `<|python_tag|>` and `<function=name>{...}`,
  Mistral's `[TOOL_CALLS][...]` and `[TOOL_CALLS]name[ARGS]{...}`;
- Qwen3-Coder's `<function=name><parameter=key>value</parameter></function>`;
- a reply that is nothing but Python calls of offered tools, `[read_file(path='a.py')]` (Llama 3.2's
  "pythonic" calls): read by Python's own parser, keyword arguments with literal values only, nothing run;
- arguments given as a JSON-encoded string (parsed), raw newlines inside strings (their meaning is not in
  doubt), trailing commas (dropped: a comma before a closing bracket carries no value).

What is a call: JSON inside a wrapper always is (an unknown name gets a problem naming the tools). JSON
in a fence or on a line of its own is a call only when a name in it is an offered tool (or one letter
or two from one): a reply may quote data or examples. JSON inside a sentence ("you could call it like
{...}", or a wrapped call with prose before and after it on its line) is never run; when it names an
offered tool it comes back as a problem asking for the call on a line of its own. A ```python (or any
other language's) block is code, never a call.

Not calls, and no problem either: the tools' definitions echoed back (the real Qwen2.5-Coder-1.5B
prints them in `<tools>` before its call).

What is refused with a problem, never run: a call the reply ends inside (cut off by the token limit:
its arguments are not all there), JSON that stays invalid (single quotes: turning them into double
quotes could change a value such as `it's`; Python's triple quotes, which the real 1.5B writes a file's
content in), arguments beside the name instead of in `arguments`. A
problem call may have no name (a `<tool_call>` the reply ends right after). A call read from text has
the `id` written with it (Mistral writes one) or none: the loop gives it one.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hub.agent.arguments import checked, unknown_tool
from hub.agent.call_json import SHAPE, TOO_DEEP, Decoded, balanced_end, call_of, calls_of, decode_at
from hub.workers.base import ToolCall

__all__ = ["ReadCalls", "calls_in_text", "checked", "unknown_tool"]

_OPEN = re.compile(
    r"(?P<fence>^[ \t]{0,3}(?P<mark>`{3,}|~{3,})[^\n`]*$)"
    r"|(?P<fn><function=(?P<fname>[\w.\-]+)>)"
    r"|(?P<tag><tool_call>|<tools>|<function>|<function[-_]?call>|<\|tool_call\|>|<\|python_tag\|>"
    r"|<\|python_start\|>|\[TOOL_CALLS\]|\bfunctools(?=\s*\[))"
    r"|(?P<json>[{\[])",
    re.MULTILINE | re.IGNORECASE,
)
_CLOSE = re.compile(
    r"\s*(?:</tool_call>|</tools?>?|</function(?:[-_]?call)?>|<\|/tool_call\|>|<\|python_end\|>"
    r"|<\|eom_id\|>|<\|eot_id\|>)",
    re.IGNORECASE,
)
_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[^\n`]*(?:\n|\Z)")
_FUNCTION = re.compile(r"<function=(?P<name>[\w.\-]+)>")
_PARAMETER = re.compile(r"<parameter=(?P<key>[^>\s]+)>")
_MISTRAL_NAME = re.compile(r"\s*(?P<name>[\w.\-]+)(?:\[CALL_ID\][\w\-]*)?\[ARGS\]")
_NAME_HINT = re.compile(r"""["']?(?:name|tool|function)["']?\s*[:=]\s*["']([\w.\-]+)["']""")
_CALL_KEY = re.compile(r"[\"'](?:name|tool|function|action|tool_name)[\"']\s*:")
_SINGLE_QUOTED = re.compile(r"'(?:name|tool|function|arguments|parameters)'\s*:")
_SEPARATOR = re.compile(r"[\s,;]*")
# The info strings of fences a call may stand in; any other names code.
_CALL_FENCES = frozenset(
    {"", "json", "jsonc", "json5", "jsonl", "ndjson", "tool_call", "tool_calls", "tool_code", "tool"}
    | {"function", "function_call", "text", "txt", "plaintext", "xml"}
)
_EMPTY_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n`]*\n(?:[ \t]*\n)*[ \t]*\1[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class ReadCalls:
    """The calls a reply's text holds, in the order written, each checked; and the reply without them."""

    calls: tuple[ToolCall, ...]
    text: str


def calls_in_text(text: str, tools: Mapping[str, dict[str, Any]]) -> ReadCalls:
    """The tool calls written in `text` (tools: name -> the tool's JSON-schema `parameters`), each held
    to its schema, and the model's prose with the calls taken out."""
    reader = _Reader(text.replace("\r\n", "\n"), tools)
    reader.run()
    if not reader.calls and (pythonic := _pythonic(text, tools)):
        return ReadCalls(pythonic, "")
    return ReadCalls(tuple(reader.calls), reader.prose())


def _pythonic(text: str, tools: Mapping[str, dict[str, Any]]) -> tuple[ToolCall, ...]:
    """A reply that is only calls of offered tools written as Python (`[a(x=1), b()]`, or one call), read
    with `ast`: never evaluated; a value that is not a literal, or an argument without a name, is a
    problem. Anything else in the reply, or a name that is no tool, and it is not read as calls."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return ()
    nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
    if not nodes or not all(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in tools for n in nodes
    ):
        return ()
    calls = []
    for node in nodes:
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        name = node.func.id
        try:
            if node.args or any(k.arg is None for k in node.keywords):
                raise ValueError("give every argument by its name")
            arguments = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
        except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
            reason = str(exc) if "name" in str(exc) else "an argument's value is not a plain literal"
            calls.append(
                ToolCall(name, problem=f"the call to {name} could not be read: {reason}; send {SHAPE}")
            )
            continue
        calls.append(checked(ToolCall(name, arguments), tools))
    return tuple(calls)


class _Reader:
    """One pass over the reply: calls found, and the spans of text they took."""

    def __init__(self, text: str, tools: Mapping[str, dict[str, Any]]) -> None:
        self.text = text
        self.tools = tools
        self.calls: list[ToolCall] = []
        self.spans: list[tuple[int, int]] = []
        self.keys = [key.start() for key in _CALL_KEY.finditer(text)]  # where a call's key stands

    def run(self) -> None:
        pos = 0
        while (found := _OPEN.search(self.text, pos)) is not None:
            if found["fence"]:
                pos = self._fence(found)
            elif found["fn"]:
                pos = self._function_tag(found)
            elif found["tag"]:
                pos = self._wrapper(found)
            else:
                pos = self._bare(found)

    def prose(self) -> str:
        kept, last = [], 0
        for start, end in sorted(self.spans):
            kept.append(self.text[last:start] if start > last else "")
            last = max(last, end)
        kept.append(self.text[last:])
        text = _EMPTY_FENCE.sub("", "".join(kept))
        return re.sub(r"\n{3,}", "\n\n", text).strip()

    def _fence(self, found: re.Match[str]) -> int:
        """A fenced block: calls when it holds call JSON; otherwise code or data, skipped whole."""
        mark = found["mark"]
        closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(mark[0])}{{{len(mark)},}}[ \t]*$", re.MULTILINE)
        body = found.end() + 1
        close = closing.search(self.text, body)
        after = close.end() if close else len(self.text)
        info = found["fence"].strip().lstrip("`~").strip().split(" ")[0].lower()
        if info not in _CALL_FENCES:
            return after  # code (```python, ```bash): a dict or a tag in it is never a call
        first = _skip_space(self.text, body)
        inner = _OPEN.match(self.text, first)
        if inner and (inner["tag"] or inner["fn"]):
            return body  # a wrapper inside the fence: read it as it comes
        if first >= len(self.text) or self.text[first] not in "{[":
            return after
        values, end, decoded = self._values(first)
        read = [calls_of(value) for value in values]
        calls = [call for r in read for call in r or []]
        hint = _name_hint(self.text[first:after])
        if decoded is None and (any(r is None for r in read) or not self._meant(calls)):
            return after  # data or an example block, not calls
        if decoded is not None and not (calls and self._meant(calls)) and not self._offered(hint):
            return after
        if decoded is not None:
            self._take(calls, found.start(), end)
            at = found.start() if not calls else end
            return max(
                self._trouble(_own_name(self.text, end, hint), decoded, at, inline=False, json_at=end), after
            )
        stop = after if close and not self.text[end : close.start()].strip() else end
        self._take(calls, found.start(), stop)
        return stop

    def _wrapper(self, found: re.Match[str]) -> int:
        """`<tool_call>`, `[TOOL_CALLS]` and their kin: what follows is a call, whatever it names."""
        start = _skip_space(self.text, found.end())
        if start >= len(self.text):
            self._problem("", _cut(""), found.start(), len(self.text))
            return len(self.text)
        fence = _FENCE_LINE.match(self.text, start)
        if fence:
            start = _skip_space(self.text, fence.end())
        named = _MISTRAL_NAME.match(self.text, start) if found["tag"].upper() == "[TOOL_CALLS]" else None
        named = named or _FUNCTION.match(self.text, start)  # `<tool_call><function=name>` (Qwen3-Coder)
        if named:
            return self._named_arguments(named["name"], found.start(), named.end())
        if start >= len(self.text) or self.text[start] not in "{[":
            return found.end()  # the tag named in prose, no call after it
        values, end, decoded = self._values(start)
        read = [calls_of(value) for value in values]
        calls = [
            call
            for r in read
            for call in (r if r is not None else [ToolCall("", problem=_not_a_call(found["tag"]))])
        ]
        if decoded is not None:
            self._take(calls, found.start(), end)
            return self._trouble(
                _own_name(self.text, end, _name_hint(self.text[end:])), decoded, end, inline=False
            )
        stop = _after_closing(self.text, end)
        self._take(calls, found.start(), stop)
        return stop

    def _function_tag(self, found: re.Match[str]) -> int:
        """Llama 3.1's `<function=name>{arguments}</function>`."""
        return self._named_arguments(found["fname"], found.start(), found.end())

    def _named_arguments(self, name: str, start: int, at: int) -> int:
        """A call whose name stands before its arguments' object (`<function=name>`, `name[ARGS]`)."""
        begin = _skip_space(self.text, at)
        if begin >= len(self.text):
            self._problem(name, _cut(name), start, len(self.text))
            return len(self.text)
        if _PARAMETER.match(self.text, begin):
            return self._parameters(name, start, begin)
        if self.text[begin] != "{":
            closing = _CLOSE.match(self.text, at)
            if closing:  # no arguments at all
                self._take([ToolCall(name)], start, closing.end())
                return closing.end()
            return at
        decoded = decode_at(self.text, begin)
        if decoded.cut or decoded.broken:
            return self._trouble(name, decoded, start, inline=False, json_at=begin)
        stop = _after_closing(self.text, decoded.end)
        self._take([call_of(name, decoded.value)], start, stop)
        return stop

    def _parameters(self, name: str, start: int, at: int) -> int:
        """Qwen3-Coder's `<parameter=key>\nvalue\n</parameter>` after `<function=name>`: each value is
        the text between the tags, less the one newline the chat template puts at each end; a number or
        a list arrives as text, for `checked` to read where the schema is sure."""
        arguments: dict[str, str] = {}
        pos = at
        while (opening := _PARAMETER.match(self.text, pos)) is not None:
            close = self.text.find("</parameter>", opening.end())
            if close < 0:
                self._problem(name, _cut(name), start, len(self.text))
                return len(self.text)
            value = self.text[opening.end() : close]
            value = value[1:] if value.startswith("\n") else value
            arguments[opening["key"]] = value[:-1] if value.endswith("\n") else value
            pos = _skip_space(self.text, close + len("</parameter>"))
        if pos >= len(self.text):
            self._problem(name, _cut(name), start, len(self.text))
            return len(self.text)
        if not _CLOSE.match(self.text, pos):
            message = (
                f"the call to {name} was not run: its parameters are not followed by </function>; send "
                "each as <parameter=name>value</parameter>, then </function>"
            )
            self._problem(name, message, start, pos)
            return pos
        stop = _after_closing(self.text, pos)
        self._take([ToolCall(name, dict(arguments))], start, stop)
        return stop

    def _mid_sentence(self, start: int, stop: int) -> bool:
        """Prose before `start` and after `stop` on their lines: a wrapped call quoted in a sentence."""
        line_start = max(self.text.rfind("\n", 0, start) + 1, self.spans[-1][1] if self.spans else 0)
        line_end = self.text.find("\n", stop)
        after = self.text[stop : None if line_end < 0 else line_end]
        return bool(self.text[line_start:start].strip()) and bool(after.strip())

    def _bare(self, found: re.Match[str]) -> int:
        """JSON outside fences and wrappers: a call when it names an offered tool; inside a sentence an
        example, told back, never run."""
        start = found.start()
        # Inside a sentence: prose before it on its line (a call just taken there is no prose).
        line_start = max(self.text.rfind("\n", 0, start) + 1, self.spans[-1][1] if self.spans else 0)
        inline = bool(self.text[line_start:start].strip())
        near = bisect.bisect_left(self.keys, start)
        if near == len(self.keys) or self.keys[near] > start + 2000:
            return start + 1  # no call's key near: prose brackets, code, data (and no scan to the end)
        decoded = decode_at(self.text, start)
        if decoded.cut or decoded.broken:
            hint = _name_hint(self.text[start : start + 2000])
            if self._offered(hint):
                return self._trouble(_own_name(self.text, start, hint), decoded, start, inline=inline)
            return decoded.end if decoded.broken == TOO_DEEP else start + 1
        calls = calls_of(decoded.value)
        if not calls or not self._meant(calls):
            return decoded.end  # data: its inner objects are not calls either
        if inline:
            for call in calls:
                self.calls.append(
                    ToolCall(call.name, call.arguments, call.id, problem=_in_sentence(call.name))
                )
            return decoded.end
        self._take(calls, start, decoded.end)
        return decoded.end

    def _values(self, start: int) -> tuple[list[object], int, Decoded | None]:
        """JSON values one after another from `start` (JSON lines, or calls separated by commas): the
        values, the end of the last, and the first that could not be read."""
        values: list[object] = []
        pos = start
        while pos < len(self.text) and self.text[pos] in "{[":
            decoded = decode_at(self.text, pos)
            if decoded.cut or decoded.broken:
                return values, pos, decoded
            values.append(decoded.value)
            end = decoded.end
            pos = _SEPARATOR.match(self.text, end).end()  # type: ignore[union-attr]
            if pos >= len(self.text) or self.text[pos] not in "{[":
                return values, end, None
        return values, pos, None

    def _offered(self, name: str) -> bool:
        return bool(name) and (name in self.tools or _near(name, self.tools))

    def _meant(self, calls: list[ToolCall]) -> bool:
        return any(self._offered(call.name) for call in calls)

    def _trouble(
        self, name: str, decoded: Decoded, start: int, *, inline: bool, json_at: int | None = None
    ) -> int:
        """The problem of a call that cannot be read (its text from `start`, its JSON from `json_at`),
        told; where reading goes on."""
        if decoded.cut:
            self._problem(name, _cut(name), start, len(self.text))
            return len(self.text)
        # Only here, for a call of an offered tool, is the rest of the text scanned for its end.
        json_at = start if json_at is None else json_at
        end = balanced_end(self.text, json_at) or len(self.text)
        quoted = self.text[json_at:end]
        if '"""' in quoted:  # the real 1.5B writes a file's content so
            why = (
                'it writes a string in triple quotes ("""), which JSON does not have: write it in double '
                'quotes, with \\n for each line break and \\" for each quote inside'
            )
        elif _SINGLE_QUOTED.search(quoted):
            why = (
                "it uses single quotes, which JSON does not allow (the hub does not rewrite quotes: that "
                "could change a value)"
            )
        else:
            why = f"it is not valid JSON ({decoded.broken})"
        message = f"the call{f' to {name}' if name else ''} was not run: {why}; send it again as one JSON object {SHAPE}"
        if inline:
            self.calls.append(ToolCall(name, problem=message))
            return end
        stop = _after_closing(self.text, end)
        self._problem(name, message, start, stop)
        return stop

    def _problem(self, name: str, message: str, start: int, end: int) -> None:
        self._take([ToolCall(name, problem=message)], start, end)

    def _take(self, calls: list[ToolCall], start: int, end: int) -> None:
        if self._mid_sentence(start, end):
            # An example, however it is wrapped: told back, left in the prose, never run.
            self.calls.extend(c if c.problem else replace(c, problem=_in_sentence(c.name)) for c in calls)
            return
        self.calls.extend(checked(call, self.tools) for call in calls)
        self.spans.append((start, end))


def _near(name: str, tools: Mapping[str, object]) -> bool:
    return bool(difflib.get_close_matches(name, list(tools), n=1, cutoff=0.8))


def _name_hint(text: str) -> str:
    found = _NAME_HINT.search(text)
    return found[1] if found else ""


def _own_name(text: str, at: int, hint: str) -> str:
    """The name a troubled value's message gives: none for a list (which of its calls broke is unclear)."""
    return "" if text[at : at + 1] == "[" else hint


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _after_closing(text: str, end: int) -> int:
    """Past a closing tag and a closing fence after a call, when they are there."""
    while (closing := _CLOSE.match(text, end)) is not None:  # `</function></tool_call>`
        end = closing.end()
    fence = re.compile(r"[ \t]*\n?[ \t]*(?:`{3,}|~{3,})[ \t]*(?=\n|\Z)").match(text, end)
    return fence.end() if fence else end


def _cut(name: str) -> str:
    named = f" to {name}" if name else ""
    return (
        f"the call{named} was cut off: the reply ended inside it, so its arguments are not all there "
        "and it was not run; send it again, whole (a long file in smaller parts)"
    )


def _in_sentence(name: str) -> str:
    return (
        f"the call to {name} stands inside a sentence, so it was read as an example and not run; to "
        "call it, write the call on a line of its own"
    )


def _not_a_call(tag: str) -> str:
    return f"the JSON after {tag} is not a tool call; send {SHAPE}"
