"""The tool-call corpus: replies in which local models wrote their tool calls as text, and what a careful
reader makes of them (tests/agent/corpus/, read by tests/agent/test_corpus.py and bench/bench_tool_calls.py).

One case per file, in sections that each start with a line `%%%% NAME`:

    %%%% case
    source: the public thread the shape was reported in (what it shows)
    %%%% tools                  (optional; a JSON object name -> parameters schema; default: TOOLS)
    %%%% reply                  (the model's content; runs exactly to the next section line)
    %%%% expected               (a JSON list, one entry per call in the order written:)
        {"name": "read_file", "arguments": {...}}        a call to run, with exactly these arguments
        {"name": "read_file", "problem": "cut off"}      refused, the problem holding these words
    (an empty list: the reply holds no call)

`score` sorts what a reader made of a case into read (exactly the calls to run, or nothing where the
reply holds no call), refused (held back with a problem: as expected, or where a call could have run,
which is safe but costs a turn), wrong (a call would run that should not, or with other arguments) and
missed (nothing, where calls were written). Only the standard library: the benchmark scores a naive reader with it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTION = "%%%% "
OUTCOMES = ("read", "refused", "wrong", "missed")

_PATH = {"type": "string", "description": "a path relative to the repository root"}
TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "object",
        "properties": {"path": _PATH, "start": {"type": "integer"}, "end": {"type": "integer"}},
        "required": ["path"],
    },
    "write_file": {
        "type": "object",
        "properties": {"path": _PATH, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "list_files": {"type": "object", "properties": {"path": _PATH}},
    "search": {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "path": _PATH},
        "required": ["pattern"],
    },
    "run_tests": {"type": "object", "properties": {}},
    "done": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
}


@dataclass(frozen=True)
class Expected:
    """One call the reply should yield: runnable with `arguments`, or refused with `problem` in its text."""

    name: str
    arguments: dict[str, Any] | None = None
    problem: str | None = None


@dataclass(frozen=True)
class CallCase:
    name: str
    source: str
    reply: str
    tools: dict[str, dict[str, Any]]
    expected: tuple[Expected, ...]


@dataclass(frozen=True)
class Read:
    """A call as a reader gave it, in the corpus's terms (hub.workers.base.ToolCall has these fields)."""

    name: str
    arguments: dict[str, Any]
    problem: str = ""


def load_call_cases(folder: Path) -> list[CallCase]:
    """Every `*.case` file in the folder, sorted by name; a malformed one raises ValueError naming it."""
    return [read_call_case(path) for path in sorted(folder.glob("*.case"))]


def read_call_case(path: Path) -> CallCase:
    sections: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(SECTION):
            sections.append((line[len(SECTION) :].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{path.name}: text before the first {SECTION!r} line")
    found: dict[str, str] = {}
    for n, (title, lines) in enumerate(sections):
        # A section's text runs to the next section line; the file's own final newline ends the last.
        found[title] = "\n".join(lines) + ("\n" if n < len(sections) - 1 else "")
    unknown = set(found) - {"case", "tools", "reply", "expected"}
    meta = dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in found.get("case", "").split("\n"))
        if sep
    )
    if unknown or "reply" not in found or "expected" not in found or "source" not in meta:
        raise ValueError(f"{path.name}: needs case (with a source), reply and expected sections only")
    try:
        expected = json.loads(found["expected"])
        tools = json.loads(found["tools"]) if "tools" in found else TOOLS
    except json.JSONDecodeError as error:
        raise ValueError(f"{path.name}: {error}") from error
    if not isinstance(expected, list) or not all(isinstance(e, dict) and "name" in e for e in expected):
        raise ValueError(f"{path.name}: expected is a JSON list of objects with a name")
    return CallCase(
        name=path.stem,
        source=meta["source"],
        reply=found["reply"],
        tools=tools,
        expected=tuple(Expected(e["name"], e.get("arguments"), e.get("problem")) for e in expected),
    )


def matches(case: CallCase, got: list[Read]) -> bool:
    """Whether the reader gave exactly the expected calls, in order: the same arguments for each call
    to run, a problem holding the expected words for each refused one."""
    if len(got) != len(case.expected):
        return False
    for want, call in zip(case.expected, got, strict=True):
        if call.name != want.name:
            return False
        if want.problem is None and (call.problem or call.arguments != want.arguments):
            return False
        if want.problem is not None and (
            not call.problem or want.problem.lower() not in call.problem.lower()
        ):
            return False
    return True


def score(case: CallCase, got: list[Read]) -> str:
    """What became of the case: read, refused, wrong or missed (see the module's docstring)."""
    runnable = [(c.name, c.arguments) for c in got if not c.problem]
    intended = [(e.name, e.arguments) for e in case.expected if e.problem is None]
    if any(call not in intended for call in runnable):
        return "wrong"
    if intended and runnable == intended:
        return "read"
    if not case.expected:  # the reply holds no call: taking none is right, a message merely costs a turn
        return "refused" if got else "read"
    return "refused" if got else "missed"
