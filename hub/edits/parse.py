"""Model text -> file edits: the pure parsing half of `hub.edits.apply`.

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
- A fence with no closing line is refused, never written: truncation (the model hit its token limit) is
  the usual cause and half a file is worse than none. Complete search/replace blocks before the cut are
  kept, since each carries its own end marker.
- A fenced block with no path is not an edit, unless the caller passes `default_path` and the block is
  the only one. Fences nest like Markdown inside files: an inner ```` ```lang ```` opens, a bare ``` closes it.

Paths are only parsed here; `hub.edits.apply.plan_edits` decides whether they may be written.
Import the public names from `hub.edits.apply`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SearchReplace:
    """One search/replace block: `search` is the exact text to find ("" creates a missing file)."""

    search: str
    replace: str


@dataclass(frozen=True)
class FileEdit:
    """An edit of one file: a whole new `content`, search/replace `blocks` applied after it, `delete`, or
    a unified diff's hunks (`patch`, from its first `@@` line; applied by `git apply` in `hub.edits.patch`)."""

    path: str
    content: str | None = None
    blocks: tuple[SearchReplace, ...] = ()
    delete: bool = False
    patch: str | None = None


@dataclass(frozen=True)
class ParseResult:
    """The edits found in a model's answer, and why anything in it could not become an edit."""

    edits: tuple[FileEdit, ...]
    problems: tuple[str, ...]


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# Three to nine marker characters, and `<<<<<<< SEARCH>` (aider's own pattern takes it): models print
# all of these, and a marker the parser does not know would otherwise end up inside a file.
_SR_START = re.compile(r"^\s*<{3,9}\s*SEARCH\s*>?\s*$", re.IGNORECASE)
_SR_DIVIDER = re.compile(r"^\s*={3,9}\s*$")
_SR_END = re.compile(r"^\s*>{3,9}\s*REPLACE\s*<?\s*$", re.IGNORECASE)
_DELETE = re.compile(r"^\s*DELETE(?:\s+FILE)?\s*:?\s+(?P<path>\S+)\s*$")
_HEADER = re.compile(
    r"^\s*(?:#|//|--|;|%|/\*|<!--)\s*(?:file\s*(?:name|path)?|path)\s*:\s*(?P<path>\S+?)\s*(?:\*/|-->)?\s*$",
    re.IGNORECASE,
)
# A first line that is only a commented path (`# src/a.py`): used when nothing else names the file.
_BARE_HEADER = re.compile(r"^\s*(?:#|//|--|;)\s*(?P<path>[^\s!<>]+)\s*$")
_LABEL = re.compile(
    r"^(?:(?:new|updated|modified|full|complete|changed|edited|the)\s+)*(?:file\s*(?:name|path)?|path)\s*[:=]\s*",
    re.IGNORECASE,
)
_PATH = re.compile(r"^(?:~/|/)?(?:[\w@+\-.]+/)*[\w@+\-.]+$")
_EXTENSIONLESS = frozenset(
    {
        "Makefile",
        "Dockerfile",
        "Gemfile",
        "Rakefile",
        "Procfile",
        "Justfile",
        "LICENSE",
        "README",
        "Vagrantfile",
    }
)
_THINK_OPEN = re.compile(r"^\s*<think(?:ing)?>", re.IGNORECASE)
# Not after a backtick or quote: prose may name the tag (`</think>`) without closing anything.
_THINK_CLOSE = re.compile(r"(?<![`'\"])</think(?:ing)?>", re.IGNORECASE)
_NOT_CODE_INFO = frozenset({"diff", "patch", "udiff"})


def parse_edits(text: str, default_path: str | None = None) -> ParseResult:
    """Every edit in a model's answer, in order of first mention; `problems` says what was skipped and why."""
    lines = _clean_text(text)
    parser = _Parser(lines)
    parser.run()
    problems = parser.problems
    found = parser.found
    if not found and default_path is not None and len(parser.bare) == 1:
        content, blocks = parser.bare[0]
        found.append(FileEdit(default_path, content=content, blocks=blocks))
        parser.bare.clear()
    if parser.bare:
        problems.append(
            f"{len(parser.bare)} fenced block(s) had no file path before them or in them and were ignored; "
            "put the file's path on the line before each block"
        )
    edits = _merge(found, problems)
    if not edits and not problems:
        problems.append("no fenced code block or SEARCH/REPLACE block found")
    return ParseResult(edits=tuple(edits), problems=tuple(problems))


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
        self.bare: list[tuple[str | None, tuple[SearchReplace, ...]]] = []
        self.problems: list[str] = []
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
            elif _SR_START.match(line):
                path, where = self._path_before(i) or self.sticky, f"line {i + 1}"
                blocks, i, problem = _read_blocks(self.lines, i)
                self._search_replace(path, blocks, problem, where)
            elif (
                line.startswith("--- ") and self.lines[i + 1 : i + 2] and self.lines[i + 1].startswith("+++ ")
            ):
                stop = i + 2
                while stop < len(self.lines) and (
                    self.lines[stop].startswith((" ", "+", "-", "@@", "\\"))
                    or (
                        not self.lines[stop]
                        and self.lines[stop + 1 : stop + 2] != [""]
                        and _in_hunk(self.lines, stop + 1)
                    )
                ):
                    stop += 1
                self._diff(self.lines[i:stop], None, f"line {i + 1}")
                i = stop
            elif (deleted := _DELETE.match(line)) and (path := _as_path(deleted["path"].strip("`*'\""))):
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
        alone = [line for line in body if line.strip()]
        if end is not None and len(alone) == 1 and self._block_follows(end + 1):
            # A fence holding only a path names the file of the block after it (aider reads it so too).
            own = _clean_path_line(alone[0]) or ((m := _HEADER.match(alone[0])) and _as_path(m["path"]))
            if own:
                self.carried = (end + 1, own)
                return end + 1
        header = _HEADER.match(body[0]) if body else None
        if header and _as_path(header["path"]):
            body = body[1:]
        path = (header and _as_path(header["path"])) or _path_from_info(info) or self._path_before(start)
        bare_header = _BARE_HEADER.match(body[0]) if body and path is None else None
        if bare_header and (path := _as_path(bare_header["path"])):
            body = body[1:]
        markdown = info.split()[0].lower() in ("markdown", "md") if info.split() else False
        # A bare fence with a path of its own is that file, whatever fences its text shows.
        wrapped = (markdown or path is None) and _wraps_answer(fence["fence"], info, body, path)
        if end is not None and wrapped and self._wrapped(body, path if markdown else None):
            return end + 1
        inner = _clean_path_line(body[0]) if len(body) > 1 else None
        heading = (
            bool(body)
            and body[0].lstrip().startswith("#")
            and (path or inner or "").lower().endswith((".md", ".markdown"))
        )
        if inner and not heading and (path is None or _basename(inner) == _basename(path)):
            # The path repeated as the block's first line is a label, not the file's first line.
            body, path = body[1:], path or inner
        text_lines = [*[line for line in body if line.strip()][:2], "", ""]
        first, second = text_lines[0], text_lines[1]
        if _SR_START.match(first) or (_clean_path_line(first) and _SR_START.match(second)):
            blocks: list[tuple[str | None, SearchReplace]] = []
            j, inner_path, problem = 0, path or self.sticky, None
            while j < len(body) and problem is None:
                if _SR_START.match(body[j]):
                    found, j, problem = _read_blocks(body, j)
                    blocks.extend((inner_path, b) for b in found)
                else:
                    inner_path = _clean_path_line(body[j]) or inner_path
                    j += 1
            if problem is None and end is None:
                problem = "the fence has no closing line (output cut off?)"
            for block_path, group in _group(blocks):
                self._search_replace(block_path, group, None, where)
            if problem:
                self._search_replace(path, (), problem, where)
            return len(self.lines) if end is None else end + 1
        if end is None:
            self.problems.append(
                f"{where}{f' for {path}' if path else ''} has no closing fence: the output was probably cut "
                "off, so it was not written; send the whole file again"
            )
            return len(self.lines)
        content = "\n".join(body) + ("\n" if body else "")
        if _looks_like_diff(info, body, path):
            self._diff(body, path, where)
        elif path is None:
            self.bare.append((content, ()))
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
            self.bare.append((None, tuple(blocks)))
            return
        self.sticky = path
        self.found.append(FileEdit(path, blocks=tuple(blocks)))

    def _block_follows(self, index: int) -> bool:
        nxt = next((line for line in self.lines[index:] if line.strip()), "")
        return bool(_FENCE.match(nxt) or _SR_START.match(nxt))

    def _wrapped(self, body: list[str], path: str | None) -> bool:
        """A whole answer inside one ```markdown fence: its own path lines and blocks are the edits; with
        `path` (only for a fence marked markdown), a single inner block without one is that file's.
        False (and nothing kept) when the inside holds no edit: then the fence is an ordinary block (a
        Python file whose docstring shows a fenced example, say)."""
        inner = _Parser(body)
        inner.sticky = path or self.sticky
        inner.run()
        if not inner.found and path is not None and len(inner.bare) == 1:
            content, blocks = inner.bare.pop()
            inner.found.append(FileEdit(path, content=content, blocks=blocks))
        if not inner.found:
            return False
        self.found.extend(inner.found)
        self.bare.extend(inner.bare)
        self.problems.extend(inner.problems)
        self.sticky = inner.sticky
        return True

    def _diff(self, body: list[str], path: str | None, where: str) -> None:
        """A unified diff: one patch edit per file in it, applied later with `git apply --check` first."""
        files = _split_diff(body, path)
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
            if _NUMBERED_HUNK.match(hunks) and all(
                _NUMBERED_HUNK.match("@@" + h) for h in hunks.split("\n@@")[1:]
            ):
                self.found.append(FileEdit(target, patch=hunks))
                continue
            # `@@ ... @@` hunks carry no line numbers for git apply: each becomes a SEARCH/REPLACE block
            # (aider reads them so), matched exactly once like any other.
            blocks = _hunk_blocks(hunks)
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
            path = _clean_path_line(line) or (_path_in_prose(line) if nearest else None)
            if path:
                return path
            nearest = False
        return None


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _wraps_answer(fence: str, info: str, body: list[str], path: str | None) -> bool:
    """A ```markdown (or bare ```) fence around blocks of its own, for a file that is not markdown. A
    longer bare fence is the way to hold a file that contains fences (`render_edit` writes one)."""
    kind = info.split()[0].lower() if info.split() else ""
    if kind not in ("markdown", "md") and not (kind == "" and len(fence) == 3):
        return False
    if (path or "").lower().endswith((".md", ".markdown")):
        return False
    return any((f := _FENCE.match(line)) and f["info"].strip() for line in body)


def _split_diff(body: list[str], path: str | None) -> list[tuple[str | None, str]]:
    """(path, hunks from the first @@ line) per file of a unified diff; path None: the file is deleted."""
    files: list[tuple[str | None, str]] = []
    old = new = None
    hunks: list[str] = []

    def flush() -> None:
        if hunks:
            target = _diff_path(new, old, path)
            if target is not None or (new or "").split("\t")[0].strip() == "/dev/null":
                files.append((target, "".join(line + "\n" for line in _trim_end(hunks))))

    k = 0
    while k < len(body):
        line = body[k]
        if line.startswith("--- ") and k + 1 < len(body) and body[k + 1].startswith("+++ "):
            flush()
            old, new, hunks = line[4:], body[k + 1][4:], []
            k += 2
            continue
        if line.startswith("diff "):
            # The next file's `diff --git a/x b/x` and `index ...` lines are not hunk lines of this one.
            flush()
            names = line.split()
            old, new = (names[2], names[3]) if len(names) == 4 and names[1] == "--git" else (None, None)
            hunks = []
        elif hunks or line.startswith("@@"):
            hunks.append(line)
        k += 1
    flush()
    return files


_NUMBERED_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _hunk_blocks(hunks: str) -> list[SearchReplace] | None:
    """Hunks without line numbers as SEARCH/REPLACE blocks; None when one has nothing to search for."""
    blocks = []
    for hunk in hunks.split("\n@@"):
        lines = _trim_end(hunk.split("\n")[1:])
        old = [line[1:] for line in lines if line[:1] in (" ", "-", "")]
        new = [line[1:] for line in lines if line[:1] in (" ", "+", "")]
        if not any(line.strip() for line in old):
            return None
        if old != new:
            blocks.append(SearchReplace(_join(old), _join(new)))
    return blocks


def _in_hunk(lines: list[str], index: int) -> bool:
    return index < len(lines) and lines[index].startswith((" ", "+", "-", "@@", "\\"))


def _trim_end(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _diff_path(new: str | None, old: str | None, fallback: str | None) -> str | None:
    """The file a diff header names: `+++ b/x` (or `--- a/x` for a creation), tab-stamps and a/ b/ dropped."""
    names = [n.split("\t")[0].strip() for n in (new, old) if n is not None]
    if names and names[0] == "/dev/null":
        return None
    for name in names:
        if name == "/dev/null":
            continue
        both = all(n.startswith(("a/", "b/")) or n == "/dev/null" for n in names)
        return _as_path(name[2:] if both and name.startswith(("a/", "b/")) else name)
    return None if names else fallback


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


def _read_blocks(lines: list[str], start: int) -> tuple[list[SearchReplace], int, str | None]:
    """Consecutive search/replace blocks from `start`; the index after them; why the last one broke off."""
    blocks: list[SearchReplace] = []
    j = start
    while j < len(lines):
        if not _SR_START.match(lines[j]):
            if lines[j].strip():
                break
            j += 1
            continue
        divider = next((k for k in range(j + 1, len(lines)) if _SR_DIVIDER.match(lines[k])), None)
        if divider is None:
            return blocks, len(lines), "a SEARCH section has no ======= line (output cut off?)"
        end = next((k for k in range(divider + 1, len(lines)) if _SR_END.match(lines[k])), None)
        if end is None:
            return blocks, len(lines), "a REPLACE section has no >>>>>>> REPLACE line (output cut off?)"
        if any(_SR_START.match(line) for line in lines[j + 1 : end]):
            # A marker went missing and the next block's would be borrowed: stop rather than guess.
            return (
                blocks,
                len(lines),
                "a block's markers are out of order (a missing ======= or REPLACE line)",
            )
        if any(_SR_DIVIDER.match(line) for line in lines[divider + 1 : end]):
            # A heading's underline (`Install` / `=======`) is a divider too: which one ends SEARCH is a
            # guess, and the wrong guess writes a wrong file no check can see (prose holds such lines).
            return (
                blocks,
                len(lines),
                "a block holds more than one line of only '=' between SEARCH and REPLACE (a heading's "
                "underline?), so where SEARCH ends is unclear; quote lines without one, or send the whole file",
            )
        blocks.append(SearchReplace(_join(lines[j + 1 : divider]), _join(lines[divider + 1 : end])))
        j = end + 1
    return blocks, j, None


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _group(
    blocks: list[tuple[str | None, SearchReplace]],
) -> Iterable[tuple[str | None, list[SearchReplace]]]:
    current: list[SearchReplace] = []
    path: str | None = None
    for block_path, block in blocks:
        if current and block_path != path:
            yield path, current
            current = []
        path = block_path
        current.append(block)
    if current:
        yield path, current


def _merge(found: list[FileEdit], problems: list[str]) -> list[FileEdit]:
    """One edit per path, in order of first mention: search/replace blocks and diff hunks accumulate, a
    later whole file or delete replaces what came before."""
    merged: dict[str, FileEdit] = {}
    for edit in found:
        key = _normalize_key(edit.path)
        earlier = merged.get(key)
        if earlier is None:
            merged[key] = edit
        elif edit.content is not None or edit.delete:
            problems.append(f"{edit.path} was given more than once; the last version is used")
            merged[key] = edit
        else:
            # Diff hunks accumulate like blocks; a file given in two kinds is refused when applied.
            patch = earlier.patch if edit.patch is None else (earlier.patch or "") + edit.patch
            merged[key] = replace(earlier, blocks=earlier.blocks + edit.blocks, delete=False, patch=patch)
    return list(merged.values())


def _normalize_key(path: str) -> str:
    return "/".join(part for part in path.replace("\\", "/").split("/") if part not in ("", "."))


def _as_path(token: str) -> str | None:
    """The token as a relative-looking path, or None when it does not look like a file path.

    `..`, absolute and `~` paths are returned on purpose: the policy refuses them by name rather than
    the parser dropping them silently."""
    token = token.strip().replace("\\", "/")
    if token.startswith("./"):
        token = token[2:]
    if not token or not _PATH.match(token) or token.endswith("/"):
        return None
    name = token.rsplit("/", 1)[-1]
    _, dot, extension = name.rpartition(".")
    has_extension = bool(dot) and bool(re.match(r"^[A-Za-z][\w+\-]{0,15}$", extension))
    if name in (".", "..") or not (has_extension or "/" in token.lstrip("/") or name in _EXTENSIONLESS):
        return None
    return token


def _clean_path_line(line: str) -> str | None:
    """The path when the whole line is a (decorated) path: `**a.py**`, `### File: a.py`, `- `a.py`:`."""
    text = line.strip()
    if not text or len(text) > 300:
        return None
    text = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", text)
    text = re.sub(r"^#{1,6}\s*", "", text)
    for _ in range(4):
        before = text
        text = text.rstrip(":").strip()
        text = re.sub(
            r"\s+\((?:new|created|updated|modified|full|complete|whole|entire)[^)]*\)$",
            "",
            text,
            flags=re.IGNORECASE,
        )
        for mark in ("**", "__", "*", "`", '"', "'"):
            if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
                text = text[len(mark) : -len(mark)].strip()
        text = _LABEL.sub("", text)
        if text == before:
            break
    return _as_path(text)


def _path_in_prose(line: str) -> str | None:
    """A prose line attaches a path if it names exactly one in backticks or bold, or ends in `path:`."""
    marked = re.findall(r"`([^`\s]+)`", line) + re.findall(r"\*\*([^*\s]+)\*\*", line)
    paths = {p for p in (_as_path(m.rstrip(".,;:")) for m in marked) if p}
    if len(paths) == 1:
        return paths.pop()
    if not paths and line.rstrip().endswith(":"):
        last = line.rstrip().rstrip(":").split()[-1] if line.split() else ""
        return _as_path(last.strip("`*'\"()"))
    return None


def _path_from_info(info: str) -> str | None:
    for token in info.split():
        token = token.strip("{}")
        if "=" in token:
            key, _, value = token.partition("=")
            if key.lower() in ("title", "file", "filename", "path"):
                return _as_path(value.strip("'\""))
            continue
        if ":" in token:
            token = token.split(":", 1)[1]
        if token.startswith("."):
            continue  # Pandoc's {.python} is a class, not a dotfile
        path = _as_path(token.strip("'\""))
        if path:
            return path
    return None


def _looks_like_diff(info: str, body: list[str], path: str | None) -> bool:
    if path is not None and path.endswith((".diff", ".patch")):
        return False
    if info.split()[:1] and info.split()[0].lower() in _NOT_CODE_INFO:
        return True
    text = [line for line in body[:5] if line.strip()]
    return len(text) >= 2 and text[0].startswith("--- ") and text[1].startswith("+++ ")


def render_edit(edit: FileEdit) -> str:
    """An edit in the format `parse_edits` reads (whole file or search/replace), for prompts and tests."""
    if edit.delete:
        return f"DELETE: {edit.path}\n"
    parts = [edit.path]
    if edit.content is not None:
        longest = max((len(m) for m in re.findall(r"^[ \t]*(`{3,})", edit.content, re.MULTILINE)), default=2)
        fence = "`" * max(3, longest + 1)
        body = edit.content if not edit.content or edit.content.endswith("\n") else edit.content + "\n"
        parts.append(f"{fence}\n{body}{fence}")
    for block in edit.blocks:
        parts.append(f"<<<<<<< SEARCH\n{block.search}=======\n{block.replace}>>>>>>> REPLACE")
    return "\n".join(parts) + "\n"
