"""Model text -> file edits, pure: `parse_edits` and the one pass over the answer's lines.

Small local models print messy answers, so the parser is forgiving about decoration and strict about
anything that could write a wrong file:

- Whole-file edits: a path line (`src/a.py`, `**src/a.py**`, `` `src/a.py` ``, `File: src/a.py`,
  `### src/a.py`, or a prose line naming exactly one path in backticks, or ending in `path:`) then a
  fenced block (``` or ~~~, any info string) holding the complete new file. The path may instead be in
  the info string (```` ```python src/a.py ````, ```` ```src/a.py ````, ```` ```python:src/a.py ````) or
  on the block's first line (`# file: src/a.py`, `// file: src/a.py`; that line is dropped).
  The nearest attachment wins: first line, then info string, then the line before the fence.
- Search/replace edits: a path line then `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` blocks, bare or
  inside a fence; further blocks without a path of their own go to the previous edit's file.
- `DELETE: path` on a line of its own asks to delete a file (refused unless the policy allows deletes).
- Unified diffs (a ```diff fence, or `---`/`+++` lines with `@@` hunks, fenced or not) become one patch
  edit per file, applied later by `git apply` (`hub.edits.patch`); hunks without line numbers
  (`@@ ... @@`) become SEARCH/REPLACE blocks instead; a diff deleting a file is a problem.
- Shapes read as aider reads them: a fence holding only a path names the next block's file; the path
  repeated as a block's first line is a label, not content; a whole answer wrapped in a ```markdown
  fence is parsed from inside; markers of 3-9 characters and `<<<<<<< SEARCH>` count.
- An answer that ends inside a fence, a SEARCH/REPLACE block, a `<tool_call>` or a `*** Begin Patch`
  envelope was cut off, whatever the server said of its end: none of it is an edit (`truncated`, and
  `ends_inside` says where). Its complete first blocks would land while the rest of the change never
  comes (a two-file change was merged half-applied so).
- Other tools' shapes (`hub.edits.parse_tools`): JSON tool calls written as text, bare, in `<tool_call>`
  tags or in a fence, Cline's and Roo's XML tools (`<write_to_file>`, `<replace_in_file>`), and Codex's
  `*** Begin Patch` envelope. Cline's `------- SEARCH` / `+++++++ REPLACE`
  and Roo's `:start_line:` header are SEARCH/REPLACE (`hub.edits.parse_blocks`).
- A file given twice keeps both versions (`FileEdit.others`): `hub.edits.apply` writes the one that changes
  the file. A Markdown file's block closed by a bare fence with another bare fence after it is refused:
  which fence ends the file is a guess. Beside a block without a path, a shell block is not a candidate
  for the caller's `default_path`.
- A fenced block with no path is not an edit, unless the caller passes `default_path` and the block is
  the only one. Fences nest like Markdown inside files: an inner ```` ```lang ```` opens, a bare ``` closes it.

Fences, whole files and thinking are read here; each other format family has its module:
`hub.edits.parse_blocks` (SEARCH/REPLACE), `hub.edits.parse_diff` (unified diffs) and
`hub.edits.parse_paths` (how a path is named). The edits themselves are `hub.edits.edit`.
Paths are only parsed here; `hub.edits.policy` decides whether they may be written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace

from hub.core.relpaths import clean_path
from hub.edits.edit import FileEdit, ParseResult, SearchReplace
from hub.edits.parse_blocks import CUT_DIVIDER, CUT_END, SR_START, group_blocks, read_blocks
from hub.edits.parse_diff import NUMBERED_HUNK, hunk_blocks, in_hunk, looks_like_diff, split_diff
from hub.edits.parse_paths import (
    BARE_HEADER,
    HEADER,
    as_path,
    basename,
    clean_path_line,
    path_from_info,
    path_in_prose,
)
from hub.edits.parse_tools import (
    PATCH_BEGIN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_CALL_TAG,
    XML_CALL,
    read_patch,
    read_xml_call,
    tool_call,
)

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DELETE = re.compile(r"^\s*DELETE(?:\s+FILE)?\s*:?\s+(?P<path>\S+)\s*$")
_THINK_OPEN = re.compile(r"^\s*<think(?:ing)?>", re.IGNORECASE)
# Not after a backtick or quote: prose may name the tag (`</think>`) without closing anything.
_THINK_CLOSE = re.compile(r"(?<![`'\"])</think(?:ing)?>", re.IGNORECASE)
# Blocks of commands or their output: never a file's content, whatever path the caller would give one.
_COMMANDS = frozenset(
    {"bash", "sh", "shell", "console", "zsh", "powershell", "ps1", "cmd", "bat", "terminal", "output", "text"}
)
_SCRIPTS = (".sh", ".bash", ".zsh", ".ps1", ".bat", ".cmd", ".txt")


def parse_edits(text: str, default_path: str | None = None) -> ParseResult:
    """Every edit in a model's answer, in order of first mention; `problems` says what was skipped and why."""
    lines = _clean_text(text)
    parser = _Parser(lines)
    parser.run()
    if parser.cut:
        return ParseResult((), (ends_inside(parser.cut),), truncated=True)
    problems = parser.problems
    found = parser.found
    if default_path is not None and not default_path.lower().endswith(_SCRIPTS):
        # A shell block after a file without a path is how to run it, not a second candidate file.
        parser.bare = [b for b in parser.bare if b[2] not in _COMMANDS]
    if not found and default_path is not None and len(parser.bare) == 1:
        content, blocks, _ = parser.bare[0]
        found.append(FileEdit(default_path, content=content, blocks=blocks))
        parser.bare.clear()
    if parser.bare:
        problems.append(
            f"{len(parser.bare)} fenced block(s) had no file path before them or in them and were ignored; "
            "put the file's path on the line before each block"
        )
    edits = _merge(found, problems)
    if not edits and not problems:
        problems.append(NO_EDIT)
    return ParseResult(edits=tuple(edits), problems=tuple(problems))


NO_EDIT = (
    "no edit found: the answer holds no fenced code block, SEARCH/REPLACE block, diff or tool call; send "
    "each file's path on a line of its own, then its complete new content in a fenced block"
)


def ends_inside(where: str) -> str:
    """Why an answer that ends inside a block is refused whole, whatever the server said of its end."""
    return (
        f"the answer ends inside {where}, so it was cut off before its end and none of it was applied (a "
        "half-written change is worse than none); send the whole change again, complete, shorter if need "
        "be: SEARCH/REPLACE blocks that quote only the lines that change"
    )


def _clean_text(text: str) -> list[str]:
    """The answer's lines with CRLF made LF and thinking dropped.

    Thinking is dropped only outside fences, so a file that itself contains think tags (a prompt, the
    hub's own tag-stripping code) is kept whole. An opening tag counts at the start of a line; an
    unclosed one runs to the end. A lone closing tag ends thinking whose opening the chat template
    already ate: everything before it goes."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence and not (fence["fence"][0] == "`" and "`" in fence["info"]):
            end, _ = _read_fence(lines, i, fence)
            stop = len(lines) if end is None else end + 1
            out.extend(lines[i:stop])
            i = stop
            continue
        opened = _THINK_OPEN.match(line)
        closed = _THINK_CLOSE.search(line)
        if opened:
            rest = "\n".join([line[opened.end() :], *lines[i + 1 :]])
            end_tag = _THINK_CLOSE.search(rest)
            if end_tag is None:
                break
            lines, i = rest[end_tag.end() :].split("\n"), 0
        elif closed:
            out, lines[i] = [], line[closed.end() :]
        else:
            out.append(line)
            i += 1
    return out


class _Parser:
    """One pass over the answer's lines; collects edits, bare blocks and problems."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.found: list[FileEdit] = []
        # Blocks without a path: (content, blocks, the info string's first word).
        self.bare: list[tuple[str | None, tuple[SearchReplace, ...], str]] = []
        self.problems: list[str] = []
        self.cut: str | None = None  # where the answer ended inside a block, if it did
        self.sticky: str | None = None  # the file of the last edit, for search/replace blocks without one
        self.gap_start = 0  # path lines for the next block are searched from here
        self.carried: tuple[int, str] | None = None  # (line after a fence holding only a path, the path)

    def run(self) -> None:
        i = 0
        while i < len(self.lines):
            line = self.lines[i]
            fence = _FENCE.match(line)
            if fence and not (fence["fence"][0] == "`" and "`" in fence["info"]):
                i = self._fenced(i, fence)
            elif SR_START.match(line):
                path, where = self._path_before(i) or self.sticky, f"line {i + 1}"
                first = i
                blocks, i, problem = read_blocks(self.lines, i)
                if problem in (CUT_DIVIDER, CUT_END):
                    last = max(k for k in range(first, len(self.lines)) if SR_START.match(self.lines[k]))
                    named = f" for {path}" if path else ""
                    self.cut = (
                        f"the SEARCH/REPLACE block at line {last + 1}{named} ({problem.split(' (')[0]})"
                    )
                    return
                self._search_replace(path, blocks, problem, where)
            elif TOOL_CALL_OPEN.match(line) or _json_call_starts(self.lines, i):
                i = self._tool_call(i)
            elif PATCH_BEGIN.match(line):
                i = self._patch(self.lines, i, f"line {i + 1}")
            elif XML_CALL.match(line):
                i = self._xml_call(i)
            elif (
                line.startswith("--- ") and self.lines[i + 1 : i + 2] and self.lines[i + 1].startswith("+++ ")
            ):
                stop = i + 2
                while stop < len(self.lines) and (
                    self.lines[stop].startswith((" ", "+", "-", "@@", "\\"))
                    or (
                        not self.lines[stop]
                        and self.lines[stop + 1 : stop + 2] != [""]
                        and in_hunk(self.lines, stop + 1)
                    )
                ):
                    stop += 1
                self._diff(self.lines[i:stop], None, f"line {i + 1}")
                i = stop
            elif (deleted := _DELETE.match(line)) and (path := as_path(deleted["path"].strip("`*'\""))):
                self.found.append(FileEdit(path, delete=True))
                i += 1
            else:
                i += 1
                continue
            self.gap_start = i

    def _fenced(self, start: int, fence: re.Match[str]) -> int:
        end, body = _read_fence(self.lines, start, fence)
        info = fence["info"].strip()
        where = f"the block at line {start + 1}"
        if end is None:
            named = path_from_info(info) or self._path_before(start)
            self.cut = f"{where}{f' for {named}' if named else ''} (its fence has no closing line)"
            return len(self.lines)
        text = [line for line in body if line.strip()]
        if text and PATCH_BEGIN.match(text[0]):
            self._patch(body, body.index(text[0]), where)
            return end + 1
        if text and XML_CALL.match(text[0]):
            calls = _Parser(body)
            calls.run()
            if calls.found or calls.cut:
                self.found.extend(calls.found)
                self.problems.extend(calls.problems)
                self.cut = calls.cut and f"{where}: {calls.cut}"
                return end + 1
        if text and (text[0].lstrip().startswith(("{", "[")) or TOOL_CALL_OPEN.match(text[0])):
            inner = TOOL_CALL_CLOSE.sub("", TOOL_CALL_TAG.sub("", "\n".join(body)))
            if self._tool_edits(inner, where):
                return end + 1
        alone = [line for line in body if line.strip()]
        if end is not None and len(alone) == 1 and self._block_follows(end + 1):
            # A fence holding only a path names the file of the block after it (aider reads it so too).
            own = clean_path_line(alone[0]) or ((m := HEADER.match(alone[0])) and as_path(m["path"]))
            if own:
                self.carried = (end + 1, own)
                return end + 1
        header = HEADER.match(body[0]) if body else None
        if header and as_path(header["path"]):
            body = body[1:]
        path = (header and as_path(header["path"])) or path_from_info(info) or self._path_before(start)
        if path and path.lower().endswith((".md", ".markdown")):
            unclear = self._markdown_unclear(end, fence)
            if unclear is not None:
                self.problems.append(
                    f"{where} for {path} ends at line {end + 1} on a bare fence, but another follows at line "
                    f"{unclear + 1}: which one ends the file is unclear, so it was not written. Send {path} in a "
                    "fence longer than any inside it (````markdown ... ````)"
                )
                return end + 1
        bare_header = BARE_HEADER.match(body[0]) if body and path is None else None
        if bare_header and (path := as_path(bare_header["path"])):
            body = body[1:]
        markdown = info.split()[0].lower() in ("markdown", "md") if info.split() else False
        # A bare fence with a path of its own is that file, whatever fences its text shows.
        wrapped = (markdown or path is None) and _wraps_answer(fence["fence"], info, body, path)
        if end is not None and wrapped and self._wrapped(body, path if markdown else None):
            return end + 1
        own = clean_path_line(body[0]) if len(body) > 1 else None
        heading = (
            bool(body)
            and body[0].lstrip().startswith("#")
            and (path or own or "").lower().endswith((".md", ".markdown"))
        )
        if own and not heading and (path is None or basename(own) == basename(path)):
            # The path repeated as the block's first line is a label, not the file's first line.
            body, path = body[1:], path or own
        text_lines = [*[line for line in body if line.strip()][:2], "", ""]
        first, second = text_lines[0], text_lines[1]
        if SR_START.match(first) or (clean_path_line(first) and SR_START.match(second)):
            blocks: list[tuple[str | None, SearchReplace]] = []
            j, inner_path, problem = 0, path or self.sticky, None
            while j < len(body) and problem is None:
                if SR_START.match(body[j]):
                    found, j, problem = read_blocks(body, j)
                    blocks.extend((inner_path, b) for b in found)
                else:
                    inner_path = clean_path_line(body[j]) or inner_path
                    j += 1
            for block_path, group in group_blocks(blocks):
                self._search_replace(block_path, group, None, where)
            if problem:
                self._search_replace(path, (), problem, where)
            return end + 1
        content = "\n".join(body) + ("\n" if body else "")
        if looks_like_diff(info, body, path):
            self._diff(body, path, where)
        elif path is None:
            self.bare.append((content, (), info.split()[0].lower() if info.split() else ""))
        else:
            self.sticky = path
            self.found.append(FileEdit(path, content=content))
        return end + 1

    def _search_replace(
        self, path: str | None, blocks: Sequence[SearchReplace], problem: str | None, where: str
    ) -> None:
        if problem:
            self.problems.append(
                f"SEARCH/REPLACE at {where}{f' for {path}' if path else ''}: {problem}; "
                "the blocks before it were kept"
            )
        if not blocks:
            return
        if path is None:
            self.bare.append((None, tuple(blocks), ""))
            return
        self.sticky = path
        self.found.append(FileEdit(path, blocks=tuple(blocks)))

    def _block_follows(self, index: int) -> bool:
        nxt = next((line for line in self.lines[index:] if line.strip()), "")
        return bool(_FENCE.match(nxt) or SR_START.match(nxt))

    def _wrapped(self, body: list[str], path: str | None) -> bool:
        """A whole answer inside one ```markdown fence: its own path lines and blocks are the edits; with
        `path` (only for a fence marked markdown), a single inner block without one is that file's.
        False (and nothing kept) when the inside holds no edit: then the fence is an ordinary block (a
        Python file whose docstring shows a fenced example, say)."""
        inner = _Parser(body)
        inner.sticky = path or self.sticky
        inner.run()
        if inner.cut:
            self.cut = inner.cut
            return True
        if not inner.found and path is not None and len(inner.bare) == 1:
            content, blocks, _ = inner.bare.pop()
            inner.found.append(FileEdit(path, content=content, blocks=blocks))
        if not inner.found:
            return False
        self.found.extend(inner.found)
        self.bare.extend(inner.bare)
        self.problems.extend(inner.problems)
        self.sticky = inner.sticky
        return True

    def _tool_call(self, start: int) -> int:
        """A JSON tool call written as text from line `start` (in `<tool_call>` tags or bare): its edits,
        the index after it. A line that only looks like JSON is left alone."""
        where = f"the tool call at line {start + 1}"
        rest = "\n".join(self.lines[start:])
        tagged = TOOL_CALL_OPEN.match(self.lines[start])
        if tagged:
            opening = TOOL_CALL_TAG.search(rest)
            if opening is None:
                return start + 1
            body = rest[opening.end() :]
            close = TOOL_CALL_CLOSE.search(body)
            if close is None:
                try:
                    json.loads(body)
                except json.JSONDecodeError:
                    self.cut = f"{where} (no </tool_call>)"
                    return len(self.lines)
            else:
                body = body[: close.start()]
            stop = start + 1 + rest[: opening.end() + len(body)].count("\n")
            if not self._tool_edits(body, where):
                self.problems.append(
                    f"{where} holds no edit the hub can read; send the file's path and its block"
                )
            return max(stop, start + 1)
        offset = len(rest) - len(rest.lstrip())
        try:
            _, end = json.JSONDecoder().raw_decode(rest, offset)
        except json.JSONDecodeError as error:
            if '"name"' in self.lines[start] and error.pos >= len(rest.rstrip()) - 1:
                self.cut = f"{where} (its JSON never ends)"
                return len(self.lines)
            return start + 1
        if not self._tool_edits(rest[offset:end], where):
            return start + 1
        return start + 1 + rest[:end].count("\n")

    def _tool_edits(self, text: str, where: str) -> bool:
        """Whether `text` is a JSON tool call; its edits are kept and its problems said."""
        call = tool_call(text.strip())
        if call is None:
            return False
        self._take(*call, where)
        return True

    def _xml_call(self, start: int) -> int:
        edits, stop, problem, cut = read_xml_call(self.lines, start)
        if cut:
            self.cut = f"the {self.lines[start].strip()} call at line {start + 1} (no closing tag)"
            return len(self.lines)
        self._take(edits, problem, f"line {start + 1}")
        return stop

    def _take(self, edits: Sequence[FileEdit], problem: str | None, where: str) -> None:
        """A tool call's edits kept (the last one's path is the one a later bare block belongs to), its
        problem said with where it stood."""
        for edit in edits:
            self.sticky = edit.path
            self.found.append(edit)
        if problem:
            self.problems.append(f"{where}: {problem}")

    def _patch(self, lines: list[str], start: int, where: str) -> int:
        edits, stop, problems, cut = read_patch(lines, start)
        if cut:
            self.cut = f"the patch at {where} (no *** End Patch line)"
            return len(self.lines)
        self.found.extend(edits)
        self.problems.extend(f"the patch at {where}: {p}" for p in problems)
        return stop

    def _markdown_unclear(self, end: int, fence: re.Match[str]) -> int | None:
        """The line of a bare fence after a Markdown file's block, before the next edit, if there is one:
        then the block's bare closing fence may as well have opened one of the file's own code blocks
        (that cut a README short), and which fence ends the file is a guess."""
        char, length = fence["fence"][0], len(fence["fence"])
        for k in range(end + 1, len(self.lines)):
            line = self.lines[k]
            inner = _FENCE.match(line)
            if inner and inner["info"].strip():
                return None
            if SR_START.match(line) or (clean_path_line(line) and self._block_follows(k + 1)):
                return None
            if inner and inner["fence"][0] == char and len(inner["fence"]) >= length:
                return k
        return None

    def _diff(self, body: list[str], path: str | None, where: str) -> None:
        """A unified diff: one patch edit per file in it, applied later with `git apply --check` first."""
        files = split_diff(body, path)
        if not files:
            self.problems.append(
                f"{where} looks like a unified diff but holds no @@ hunk for a named file: send the whole file "
                "or SEARCH/REPLACE blocks"
            )
        for target, hunks in files:
            if target is None:
                self.problems.append(
                    f"{where}: a unified diff that deletes a file is not accepted; write `DELETE: path` instead"
                )
                continue
            self.sticky = target
            if NUMBERED_HUNK.match(hunks) and all(
                NUMBERED_HUNK.match("@@" + h) for h in hunks.split("\n@@")[1:]
            ):
                self.found.append(FileEdit(target, patch=hunks))
                continue
            # `@@ ... @@` hunks carry no line numbers for git apply: each becomes a SEARCH/REPLACE block
            # (aider reads them so), matched exactly once like any other.
            blocks = hunk_blocks(hunks)
            if blocks is None:
                self.problems.append(
                    f"{where}: a diff hunk for {target} has no context or '-' lines to find its place; "
                    "send SEARCH/REPLACE blocks"
                )
            elif blocks:
                self.found.append(FileEdit(target, blocks=tuple(blocks)))

    def _path_before(self, index: int) -> str | None:
        """The path on the nearest line before `index` (after the previous block): a path line, or a prose
        line naming exactly one path; further back, only a line that is a path and nothing else."""
        carried = self.carried
        if (
            carried
            and carried[0] == self.gap_start
            and not any(x.strip() for x in self.lines[carried[0] : index])
        ):
            return carried[1]
        nearest = True
        for k in range(index - 1, self.gap_start - 1, -1):
            line = self.lines[k]
            if not line.strip():
                continue
            path = clean_path_line(line) or (path_in_prose(line) if nearest else None)
            if path:
                return path
            nearest = False
        return None


_CALL_KEY = re.compile(r'"(?:name|function|tool)"\s*:')


def _json_call_starts(lines: list[str], index: int) -> bool:
    """Whether a JSON tool call may start on this line: JSON opening, a call's key in its first lines.
    Checked before the rest of the answer is decoded, so prose and data lines cost nothing."""
    if not lines[index].lstrip().startswith(("{", "[")):
        return False
    return bool(_CALL_KEY.search("\n".join(lines[index : index + 4])[:600]))


def _wraps_answer(fence: str, info: str, body: list[str], path: str | None) -> bool:
    """A ```markdown (or bare ```) fence around blocks of its own, for a file that is not markdown. A
    longer bare fence is the way to hold a file that contains fences (the tests' `render_edit` writes one)."""
    kind = info.split()[0].lower() if info.split() else ""
    if kind not in ("markdown", "md") and not (kind == "" and len(fence) == 3):
        return False
    if (path or "").lower().endswith((".md", ".markdown")):
        return False
    return any((f := _FENCE.match(line)) and f["info"].strip() for line in body)


def _read_fence(lines: list[str], start: int, fence: re.Match[str]) -> tuple[int | None, list[str]]:
    """The closing line's index (None if it never comes) and the body, de-indented like CommonMark."""
    char, length, indent = fence["fence"][0], len(fence["fence"]), len(fence["indent"])
    depth = 0
    body: list[str] = []
    for j in range(start + 1, len(lines)):
        line = lines[j]
        inner = _FENCE.match(line)
        if inner and inner["fence"][0] == char and len(inner["fence"]) >= length:
            if not inner["info"].strip():
                if depth == 0:
                    return j, body
                depth -= 1
            elif char == "~" or "`" not in inner["info"]:
                depth += 1
        body.append(_dedent(line, indent))
    return None, body


def _dedent(line: str, indent: int) -> str:
    strip = 0
    while strip < indent and strip < len(line) and line[strip] in " \t":
        strip += 1
    return line[strip:]


def _merge(found: list[FileEdit], problems: list[str]) -> list[FileEdit]:
    """One edit per path, in order of first mention: search/replace blocks and diff hunks accumulate, a
    later whole file or delete replaces what came before."""
    merged: dict[str, FileEdit] = {}
    for edit in found:
        key = clean_path(edit.path)
        earlier = merged.get(key)
        if earlier is None:
            merged[key] = edit
        elif edit.content is not None and earlier.content is not None and not earlier.blocks:
            # Which version is the change is decided against the file (`hub.edits.apply`).
            merged[key] = replace(edit, others=(*earlier.others, earlier.content))
        elif edit.content is not None or edit.delete:
            problems.append(f"{edit.path} was given more than once; the last version is used")
            merged[key] = edit
        else:
            # Diff hunks accumulate like blocks; a file given in two kinds is refused when applied.
            patch = earlier.patch if edit.patch is None else (earlier.patch or "") + edit.patch
            merged[key] = replace(earlier, blocks=earlier.blocks + edit.blocks, delete=False, patch=patch)
    return list(merged.values())
