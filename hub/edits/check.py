"""The pre-write check: a planned file judged in memory before anything touches disk. Pure.

`judge(path, before, after, whole_file=..., delete_allowed=...)` returns why the new text must not be
written, or None. Each reason is written for the model: it says what is wrong and what to send instead,
because it is fed back once like a SEARCH block that did not match.

Refused:
- a non-empty file made empty (an empty fence, a fence holding one blank line);
- a file that parsed (tree-sitter, where the language has a grammar) turned into one that does not;
- whole-file content that deletes more than it adds (the `destructive_diff` rule of `hub.state.breakers`,
  applied per file before writing; a SEARCH/REPLACE block deletes only what it quotes, so it is exempt),
  or that leaves out a function or class the file defines (tree-sitter's outline);
- elision placeholders (`# ... rest unchanged ...`, `// ... existing code ...`, `[original content here]`,
  a bare `...` line) the original did not have: they stand for lines the model did not write;
- edit markers the parser did not read (`<<<<<<< SEARCH>`, `>>> REPLACE`, diff headers) or a fence line,
  in files without a grammar (in code, such a line breaks the parse; in prose, it may be content);
- whole-file content whose every line starts with a line number (`1 def add...`);
- a file without a grammar broken in its own format (`hub.edits.formats`: YAML, JSON, TOML, a Makefile's
  recipe tabs, Markdown's fences, HTML's tags).
"""

from __future__ import annotations

import ast
import difflib
import itertools
import re
import warnings
from collections import Counter

from hub.core.text import listed
from hub.edits.formats import format_broken
from hub.review.code import language_for, outline, syntax_errors
from hub.state.breakers import destructive_diff

# A line that stands for code left out: bare dots, a comment of dots and words, or a comment or bracket
# naming what was left out. Matched on stripped lines; a new one the original lacked is refused.
_COMMENT = r"(?:#+|//+|/\*+|<!--|--|;+|\*|\{/\*)"
_LEFT_OUT = (
    r"(?:existing (?:code|methods|functions|implementation|content|logic|imports|tests|lines)"
    # "rest of" names the code left out: "# parse the rest of the arguments" is an ordinary comment.
    r"|rest of (?:the |this |your )?(?:file|class|code|module|component|functions?|methods?|implementation"
    r"|body|content|page|document|script|config|tests?|struct|impl|program|imports|fields|helpers|logic|lines)"
    r"|remaining (?:code|methods|functions|lines)|unchanged\)|unchanged (?:code|lines|methods|functions|parts?)"
    # ... and ends the comment: "'y' is the same as 'b'" explains code, it does not stand for any.
    r"|(?:remains?|stays?|is|are|left) (?:unchanged|the same|as is)(?=[\W_]*$)"
    r"|omitted|same as (?:before|above)|as before|code here|content here|previous code|original code"
    r"|other (?:methods|functions|code|fields|imports|tests))"
)
_ELISION = re.compile(
    r"^(?:"
    r"(?:\.\s*){3,}|…"
    rf"|(?:pass\s+|\.\.\.\s+)?{_COMMENT}\s*(?:\.{{3}}|…)\s*(?:\S.*)?"
    rf"|(?:pass\s+|\.\.\.\s+)?{_COMMENT}.*\b{_LEFT_OUT}(?!\w).*"
    rf"|\([^)]*\b{_LEFT_OUT}(?!\w)[^)]*\)"
    rf"|\[[^\]]*\b{_LEFT_OUT}(?!\w)[^\]]*\]|\[[^\]]*(?:\.{{3}}|…)[^\]]*\]"
    rf"|<[^>]*\b{_LEFT_OUT}(?!\w)[^>]*>"
    r"|\.\.\.\s*the whole file\s*\.\.\."
    r")$",
    re.IGNORECASE,
)
_MARKER = re.compile(
    r"^\s*(?:<{3,}\s*(?:SEARCH|HEAD|ORIGINAL)\b.*|>{3,}\s*(?:REPLACE|UPDATED)\b.*|={3,}\s*"
    r"|(?:SEARCH|REPLACE)\s*:?\s*"
    r"|--- (?:a/|/dev/null).*|\+\+\+ (?:b/|/dev/null).*|@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@.*"
    r"|(?:`{3,}|~{3,})[\w+#.-]*)$",
    re.IGNORECASE,
)

# Documents where fences, `===` underlines and diff lines are content, not stray markers.
_PROSE = (".md", ".markdown", ".rst", ".txt", ".adoc")
_NUMBERED = re.compile(r"^\s*(\d+)(?:[ \t]*[|:.)][ \t]?|[ \t]+)")


def judge(
    path: str,
    before: str | None,
    after: str | None,
    *,
    whole_file: bool,
    delete_allowed: bool = False,
) -> str | None:
    """Why `after` must not replace `before` at `path`, or None when it may. `before` None: a new file;
    `after` None: a deletion (decided by the policy, not here)."""
    if after is None:
        return None
    old = before or ""
    if old.strip() and not after.strip():
        return (
            "the new content is empty, which would erase the file; send the complete file, or "
            "SEARCH/REPLACE blocks for the lines that change"
        )
    new_lines = after.split("\n")
    old_lines = old.split("\n")

    # In code with a grammar a stray marker breaks the parse, and the parse check says so; there, a
    # fence or `=======` inside a docstring is content. Prose holds fences and underlines as content.
    plain = language_for(path) is None and not path.lower().endswith(_PROSE)
    markdown = path.lower().endswith((".md", ".markdown"))
    reason = _placeholders(new_lines, old_lines, markdown) or (
        _markers(new_lines, old_lines) if plain else None
    )
    if reason:
        return reason
    if whole_file and before is not None:
        reason = _numbered(new_lines, old_lines) or _destructive(old, after, delete_allowed)
        if reason:
            return reason
    reason = _parse_broken(path, before, after) or format_broken(path, before, after)
    if reason is None and whole_file and before is not None and not delete_allowed:
        reason = _dropped_definitions(path, before, after)
    return reason


def _placeholders(new: list[str], old: list[str], markdown: bool = False) -> str | None:
    extra = Counter(_elisions(new, markdown)) - Counter(_elisions(old, markdown))
    if not extra:
        return None
    first = next(line for line in new if line.strip() in extra)
    return (
        f"the new text holds the placeholder {first.strip()!r} where real lines belong; the hub writes "
        "text literally, so the lines it stands for would be lost. Send those lines in full, or use "
        "SEARCH/REPLACE blocks that quote only the lines that change"
    )


_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _elisions(lines: list[str], markdown: bool = False) -> list[str]:
    """The placeholder lines; in Markdown, not those inside a fenced block: there `...` is the
    example's own text (sample output cut short, a code sample's stub), not the file's lines left out."""
    found = []
    previous = ""
    fence = ""
    for line in lines:
        text = line.strip()
        opener = _MD_FENCE.match(line) if markdown else None
        if opener and (not fence or (opener[1][0] == fence[0] and len(opener[1]) >= len(fence))):
            fence = "" if fence else opener[1]
            continue
        if fence:
            continue
        # `...` as the body of a `def f():` or `class P:` line is a Python stub, not code left out.
        stub = text in ("...", "…") and previous.endswith(":")
        if _ELISION.match(text) and not stub:
            found.append(text)
        previous = text or previous
    return found


def _markers(new: list[str], old: list[str]) -> str | None:
    had = Counter(line.strip() for line in old if _MARKER.match(line))
    extra = Counter(line.strip() for line in new if _MARKER.match(line)) - had
    if not extra:
        return None
    first = next(line for line in new if line.strip() in extra)
    return (
        f"the new text holds the line {first.strip()!r}, an edit marker or fence the hub did not read as "
        "one; use exactly `<<<<<<< SEARCH`, `=======`, `>>>>>>> REPLACE` on lines of their own, or a "
        "whole file in one fenced block after its path"
    )


def _numbered(new: list[str], old: list[str]) -> str | None:
    """Every non-blank line starts with its line number, counting up, and the original's did not."""

    def numbered(lines: list[str]) -> bool:
        numbers = []
        for line in lines:
            if line.strip():
                match = _NUMBERED.match(line)
                if match is None:
                    return False
                numbers.append(int(match[1]))
        return len(numbers) >= 2 and all(b > a for a, b in itertools.pairwise(numbers))

    if numbered(new) and not numbered(old):
        return (
            "every line starts with a line number; the numbers in the prompt are not part of the file. "
            "Send the file without them"
        )
    return None


def _destructive(old: str, new: str, delete_allowed: bool) -> str | None:
    added = removed = 0
    for line in difflib.unified_diff(old.split("\n"), new.split("\n"), lineterm="", n=0):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    trip = destructive_diff(added, removed, delete_allowed)
    if trip is None:
        return None
    return (
        f"as the whole file, this answer deletes {removed} lines and adds {added}: it looks like an "
        "excerpt, not the complete file. Send the complete file, or SEARCH/REPLACE blocks that quote "
        "the lines to change; if deleting those lines is the change asked for, quote them in SEARCH with "
        "an empty REPLACE"
    )


def _parse_broken(path: str, before: str | None, after: str) -> str | None:
    language = language_for(path)
    if language is None:
        return None
    if language == "python":
        # Python's own parser: exact where tree-sitter forgives (an indented first line) or blames an
        # earlier line than the one at fault.
        if before is not None and _python_errors(before):
            return None  # it did not parse before: the check has nothing to keep
        issues = _python_errors(after)
    else:
        issues = [(i.line, i.message) for i in syntax_errors(path, after)]
        if before is not None and issues and syntax_errors(path, before):
            return None
    if not issues:
        return None
    # Error recovery may blame an earlier line; the first one at or after the change is the useful one.
    changed = _first_change(before or "", after)
    line, message = next((i for i in issues if i[0] >= changed), issues[0])
    lines = after.split("\n")
    shown = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return (
        f"the result would not parse ({message} at line {line}: {shown!r})"
        + (", and the file parses now. " if before is not None else ". ")
        + "Check indentation and brackets, and send the complete, valid code"
    )


def _dropped_definitions(path: str, before: str, after: str) -> str | None:
    """Whole-file content that leaves out a function or class the file defines, body and all: the usual
    sign of a model that printed only the part it changed (a renamed one keeps its body). Removing one
    on purpose is a SEARCH/REPLACE block that quotes it, which says so."""
    old, new = outline(path, before), outline(path, after)
    if old is None or new is None:
        return None
    names = {s.name for s in new.functions}
    kept = Counter(line.strip() for line in after.split("\n") if line.strip())
    lines = before.split("\n")
    gone: list[str] = []
    for symbol in old.functions:
        if symbol.name in names or symbol.name in gone:
            continue
        # A renamed definition keeps its body; one left out takes its body with it.
        body = Counter(line.strip() for line in lines[symbol.start_line : symbol.end_line] if line.strip())
        if not body or sum((body & kept).values()) * 2 < sum(body.values()):
            gone.append(symbol.name)
    if not gone:
        return None
    return (
        f"as the whole file, this answer leaves out {listed(gone, 5)}, which the file defines now. Send the "
        "complete file; to remove a definition on purpose, use a SEARCH/REPLACE block that quotes it"
    )


def _python_errors(source: str) -> list[tuple[int, str]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences warn; they still parse
            ast.parse(source)
    except SyntaxError as error:
        return [(error.lineno or 1, error.msg)]
    except ValueError as error:  # NUL bytes
        return [(1, str(error))]
    return []


def _first_change(before: str, after: str) -> int:
    """The 1-based number of the first line that differs."""
    for n, (a, b) in enumerate(zip(before.split("\n"), after.split("\n"), strict=False), 1):
        if a != b:
            return n
    return min(len(before.split("\n")), len(after.split("\n")))


def is_elision(line: str) -> bool:
    """Whether a line stands for code left out (`...`, `# ... existing code ...`, `[rest of file]`)."""
    return bool(_ELISION.match(line.strip()))
