"""Unified diffs in a model's answer: one patch per file for `git apply` (`hub.edits.patch`), or, for
hunks without line numbers (`@@ ... @@`), SEARCH/REPLACE blocks. Pure; `hub.edits.parse` finds them."""

from __future__ import annotations

import re

from hub.edits.edit import SearchReplace
from hub.edits.parse_blocks import join_lines
from hub.edits.parse_paths import as_path

_NOT_CODE_INFO = frozenset({"diff", "patch", "udiff"})


def looks_like_diff(info: str, body: list[str], path: str | None) -> bool:
    if path is not None and path.endswith((".diff", ".patch")):
        return False
    if info.split()[:1] and info.split()[0].lower() in _NOT_CODE_INFO:
        return True
    text = [line for line in body[:5] if line.strip()]
    return len(text) >= 2 and text[0].startswith("--- ") and text[1].startswith("+++ ")


def split_diff(body: list[str], path: str | None) -> list[tuple[str | None, str]]:
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


NUMBERED_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def hunk_blocks(hunks: str) -> list[SearchReplace] | None:
    """Hunks without line numbers as SEARCH/REPLACE blocks; None when one has nothing to search for."""
    blocks = []
    for hunk in hunks.split("\n@@"):
        lines = _trim_end(hunk.split("\n")[1:])
        old = [line[1:] for line in lines if line[:1] in (" ", "-", "")]
        new = [line[1:] for line in lines if line[:1] in (" ", "+", "")]
        if not any(line.strip() for line in old):
            return None
        if old != new:
            blocks.append(SearchReplace(join_lines(old), join_lines(new)))
    return blocks


def in_hunk(lines: list[str], index: int) -> bool:
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
        return as_path(name[2:] if both and name.startswith(("a/", "b/")) else name)
    return None if names else fallback
