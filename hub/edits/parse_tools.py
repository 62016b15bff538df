"""Edits small models print in the shapes of other tools: JSON tool calls written out as text, and Codex's
`*** Begin Patch` envelope. Pure; `hub.edits.parse` finds where they are.

A model asked for files but trained on agent transcripts answers with the call it would have made:
`{"name": "write_file", "arguments": {"path": ..., "content": ...}}`, often inside `<tool_call>` tags
(Qwen's chat template) or a ```json fence; `edit_file` / `str_replace` with `old_str` / `new_str`; the
`arguments` sometimes a JSON string. Each becomes the edit it asks for, read as literally as a
SEARCH/REPLACE block: a write is a whole file, a replacement a block matched like any other. A call of a
tool that does not edit (`read_file`, `run_command`) is no edit, and says so.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hub.edits.edit import FileEdit, SearchReplace
from hub.edits.parse_blocks import read_blocks
from hub.edits.parse_paths import as_path

_WRITE = frozenset(
    {"write_file", "create_file", "write_to_file", "save_file", "write", "create", "file_write", "new_file"}
)
_EDIT = frozenset(
    {
        "edit_file",
        "str_replace",
        "replace_in_file",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "edit",
        "replace",
        "apply_edit",
        "search_replace",
        "modify_file",
        "update_file",
    }
)
_PATH_KEYS = ("path", "file_path", "filePath", "filepath", "filename", "file", "target_file")
_CONTENT_KEYS = ("content", "contents", "file_text", "text", "code", "new_content")
_OLD_KEYS = ("old_str", "old_string", "old_text", "oldText", "search", "old")
_NEW_KEYS = ("new_str", "new_string", "new_text", "newText", "replace", "new")

# Hermes' `<tool_call>` tags, and the `<tools>` tags Qwen2.5-Coder prints when shown them.
TOOL_CALL_OPEN = re.compile(r"^\s*<(?:tool_call|tools)>\s*(?P<rest>.*)$", re.IGNORECASE)
TOOL_CALL_CLOSE = re.compile(r"</(?:tool_call|tools)>", re.IGNORECASE)
TOOL_CALL_TAG = re.compile(r"<(?:tool_call|tools)>", re.IGNORECASE)
# Cline's and Roo Code's tools as XML: `<write_to_file><path>a.py</path><content>...</content>`, or
# `<replace_in_file>` / `<apply_diff>` with SEARCH/REPLACE blocks in `<diff>`. The text between the tags
# is literal (those tools do not escape it).
XML_CALL = re.compile(r"^\s*<(?P<tool>write_to_file|replace_in_file|apply_diff)>\s*$")
PATCH_BEGIN = re.compile(r"^\s*\*\*\* Begin Patch\s*$")
_PATCH_END = re.compile(r"^\s*\*\*\* End Patch\s*$")
_PATCH_FILE = re.compile(r"^\*\*\* (?P<op>Update|Add|Delete) File:\s*(?P<path>\S+)\s*$")


def tool_call(text: str) -> tuple[list[FileEdit], str | None] | None:
    """The edits a JSON tool call asks for, and why it gave none; None when `text` is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    calls = value if isinstance(value, list) else [value]
    if not calls or not all(_call_shape(c) for c in calls):
        return None
    edits: list[FileEdit] = []
    problems: list[str] = []
    for call in calls:
        name, arguments = _call_shape(call) or ("", {})
        edit, problem = _edit_of(name, arguments)
        if edit is not None:
            edits.append(edit)
        if problem:
            problems.append(problem)
    return edits, "; ".join(problems) or None


ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def call_parts(value: object) -> tuple[str, object] | None:
    """(tool name, arguments as written) of a JSON tool call: `{"name"|"tool", "arguments"|"parameters"|
    "args"|"input"}` or OpenAI's `{"function": {...}}`; None when `value` has neither shape. The arguments
    may still be a JSON string; the agent's text fallback (hub.agent.text_calls) reads calls with this too."""
    if not isinstance(value, dict):
        return None
    call: dict[str, Any] = value["function"] if isinstance(value.get("function"), dict) else value
    name = call.get("name") or call.get("tool")
    key = next((k for k in ARGUMENT_KEYS if k in call), None)
    if not isinstance(name, str) or key is None:
        return None
    return name, call[key]


def _call_shape(value: object) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments) of a call `call_parts` reads, the arguments parsed when a JSON string."""
    name, arguments = call_parts(value) or ("", None)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    return name, arguments


def _first(arguments: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((arguments[k] for k in keys if isinstance(arguments.get(k), str)), None)


def _edit_of(name: str, arguments: dict[str, Any]) -> tuple[FileEdit | None, str | None]:
    raw_path = _first(arguments, _PATH_KEYS)
    path = as_path(raw_path) if raw_path else None
    short = re.split(r"[.:/]|__", name)[-1].lower()  # `fs.write_file`, `filesystem__write_file`
    command = str(arguments.get("command", "")).lower()
    if short not in _WRITE | _EDIT:
        return None, (
            f"the answer calls the tool {name!r} as text; the hub runs no tools, and the files are in the "
            "prompt: answer with the edits themselves"
        )
    if path is None:
        return None, f"the {name!r} call names no file path the hub can read ({raw_path!r})"
    content = _first(arguments, _CONTENT_KEYS)
    if (short in _WRITE or command == "create") and content is not None:
        return FileEdit(
            path, content=content if content.endswith("\n") or not content else content + "\n"
        ), None
    blocks = _replacements(arguments)
    if blocks:
        return FileEdit(path, blocks=tuple(blocks)), None
    return None, f"the {name!r} call for {path} holds no content and no old/new text to replace"


def _replacements(arguments: dict[str, Any]) -> list[SearchReplace]:
    """old/new pairs: one at the top level, a list of them under `edits`, or SEARCH/REPLACE blocks in a
    `diff` argument (Cline's replace_in_file)."""
    pairs = [arguments] + [e for e in arguments.get("edits", []) if isinstance(e, dict)]
    blocks = []
    for pair in pairs:
        old, new = _first(pair, _OLD_KEYS), _first(pair, _NEW_KEYS)
        if old is not None and new is not None:
            blocks.append(SearchReplace(_line_end(old), _line_end(new)))
    diff = arguments.get("diff")
    if not blocks and isinstance(diff, str):
        lines = diff.split("\n")
        start = next((i for i, line in enumerate(lines) if line.strip()), 0)
        found, _, problem = read_blocks(lines, start)
        if problem is None:
            blocks.extend(found)
    return blocks


def _line_end(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def read_xml_call(lines: list[str], start: int) -> tuple[list[FileEdit], int, str | None, bool]:
    """A Cline/Roo XML tool call from `start`: the edits, the index after its closing tag, why it gave
    none, and whether the answer ended before the closing tag (a cut)."""
    opening = XML_CALL.match(lines[start])
    tool = opening["tool"] if opening else ""
    end = next((k for k in range(start + 1, len(lines)) if lines[k].strip() == f"</{tool}>"), None)
    if end is None:
        return [], len(lines), None, True
    text = "\n".join(lines[start + 1 : end])
    path_tag = re.search(r"<path>\s*(.*?)\s*</path>", text, re.S)
    path = as_path(path_tag[1]) if path_tag else None
    if path is None:
        return [], end + 1, f"the <{tool}> call names no file path the hub can read", False
    content = re.search(r"<content>\n?(.*?)</content>", text, re.S)
    if tool == "write_to_file" and content is not None:
        return [FileEdit(path, content=_line_end(content[1]))], end + 1, None, False
    diff = re.search(r"<diff>\n?(.*?)</diff>", text, re.S)
    blocks = _replacements({"diff": diff[1]}) if diff else []
    if not blocks:
        return [], end + 1, f"the <{tool}> call for {path} holds no content or SEARCH/REPLACE blocks", False
    return [FileEdit(path, blocks=tuple(blocks))], end + 1, None, False


def read_patch(lines: list[str], start: int) -> tuple[list[FileEdit], int, list[str], bool]:
    """Codex's `*** Begin Patch` envelope from `start`: the edits, the index after `*** End Patch`, the
    problems, and whether the answer ended before `*** End Patch` (a cut)."""
    end = next((k for k in range(start + 1, len(lines)) if _PATCH_END.match(lines[k])), None)
    if end is None:
        return [], len(lines), [], True
    edits: list[FileEdit] = []
    problems: list[str] = []
    k = start + 1
    while k < end:
        header = _PATCH_FILE.match(lines[k])
        if header is None:
            k += 1
            continue
        stop = next((n for n in range(k + 1, end) if _PATCH_FILE.match(lines[n])), end)
        body = lines[k + 1 : stop]
        path = as_path(header["path"])
        op = header["op"]
        if path is None:
            problems.append(f"*** {op} File: {header['path']!r} is not a file path")
        elif op == "Delete":
            edits.append(FileEdit(path, delete=True))
        elif op == "Add":
            added = [line[1:] for line in body if line.startswith("+")]
            edits.append(FileEdit(path, content="".join(line + "\n" for line in added)))
        elif any(line.startswith("*** Move to:") for line in body):
            problems.append(
                f"*** Update File: {path} moves the file, which an edit may not; send the change only"
            )
        else:
            blocks, problem = _patch_hunks(body)
            if problem:
                problems.append(f"*** Update File: {path}: {problem}")
            elif blocks:
                edits.append(FileEdit(path, blocks=tuple(blocks)))
        k = stop
    return edits, end + 1, problems, False


def _patch_hunks(body: list[str]) -> tuple[list[SearchReplace], str | None]:
    hunks: list[list[str]] = [[]]
    for line in body:
        if line.startswith("@@"):
            hunks.append([])
        elif not line.startswith("*** End of File"):
            hunks[-1].append(line)
    blocks = []
    for hunk in hunks:
        while hunk and not hunk[-1].strip():
            hunk.pop()
        if not hunk:
            continue
        old = [line[1:] for line in hunk if line[:1] in (" ", "-", "")]
        new = [line[1:] for line in hunk if line[:1] in (" ", "+", "")]
        if not any(line.strip() for line in old):
            return [], "a hunk has no context or '-' lines to find its place; add the lines around it"
        if old != new:
            blocks.append(SearchReplace("".join(x + "\n" for x in old), "".join(x + "\n" for x in new)))
    return blocks, None
