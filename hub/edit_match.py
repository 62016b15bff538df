"""Search/replace matching, the closest-lines report, feedback for the model, and unified diffs. Pure.

Import the public names from `hub.edits`.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hub.edit_parse import SearchReplace


@dataclass(frozen=True)
class BlockFailure:
    """A search/replace block that did not apply; `closest` holds the nearest real lines, numbered."""

    path: str
    search: str
    closest: str
    reason: str


def apply_blocks(
    path: str, text: str | None, blocks: Sequence[SearchReplace]
) -> tuple[str | None, list[BlockFailure]]:
    """Apply blocks in order to a file's text (None: the file does not exist). Pure.

    Tiers: exact lines; then lines equal after stripping (the replacement is re-indented by the
    difference); then anchored on the first and last search lines, when each is unique in its place.
    A block that matches in more than one place fails rather than guess."""
    failures: list[BlockFailure] = []
    for block in blocks:
        new, reason = _apply_one(text, block)
        if new is None:
            lines = text.split("\n") if text else []
            failures.append(
                BlockFailure(path, block.search, _closest(lines, block.search.split("\n")), reason)
            )
        else:
            text = new
    return text, failures


def _apply_one(text: str | None, block: SearchReplace) -> tuple[str | None, str]:
    if not block.search.strip():
        if not text:
            return block.replace, ""
        return None, "empty SEARCH, but the file exists and is not empty: quote the lines to replace"
    if text is None:
        return None, "the file does not exist (an empty SEARCH creates a file)"
    ends_with_newline = text.endswith("\n")
    lines = text.split("\n")
    if ends_with_newline:
        lines.pop()
    search = _lines_of(block.search)
    replacement = _lines_of(block.replace)
    for tier in (_exact, _loose, _anchored):
        spans, reindent = tier(lines, search)
        if len(spans) > 1:
            places = ", ".join(str(s + 1) for s, _ in spans[:5])
            return None, f"SEARCH matches {len(spans)} places (lines {places}); add lines to make it unique"
        if spans:
            start, stop = spans[0]
            new_lines = lines[:start] + [reindent(line) for line in replacement] + lines[stop:]
            return "\n".join(new_lines) + ("\n" if ends_with_newline and new_lines else ""), ""
    return None, "SEARCH text not found in the file"


def _lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_Spans = list[tuple[int, int]]
_Reindent = Callable[[str], str]


def _identity(line: str) -> str:
    return line


def _exact(lines: list[str], search: list[str]) -> tuple[_Spans, _Reindent]:
    m = len(search)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if lines[i : i + m] == search]
    return spans, _identity


def _loose(lines: list[str], search: list[str]) -> tuple[_Spans, _Reindent]:
    trimmed = _trim_blank(search)
    if not trimmed:
        return [], _identity
    wanted = [s.strip() for s in trimmed]
    stripped = [line.strip() for line in lines]
    m = len(wanted)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if stripped[i : i + m] == wanted]
    if len(spans) != 1:
        return spans, _identity
    return spans, _reindenter(trimmed, lines[spans[0][0] : spans[0][1]])


def _anchored(lines: list[str], search: list[str]) -> tuple[_Spans, _Reindent]:
    trimmed = _trim_blank(search)
    m = len(trimmed)
    first, last = trimmed[0].strip() if trimmed else "", trimmed[-1].strip() if trimmed else ""
    if m < 3 or len(re.sub(r"\W", "", first)) < 3 or not last:
        return [], _identity
    stripped = [line.strip() for line in lines]
    starts = [i for i, line in enumerate(stripped) if line == first]
    if len(starts) != 1:
        return [], _identity
    start = starts[0]
    # The real span may be shorter or longer than the model's memory of it, within reason.
    low, high = start + max(1, m // 2) - 1, min(len(lines) - 1, start + 2 * m + 3)
    ends = [j for j in range(low, high + 1) if j > start and stripped[j] == last]
    if len(ends) != 1:
        return [], _identity
    return [(start, ends[0] + 1)], _reindenter(trimmed, lines[start : ends[0] + 1])


def _trim_blank(lines: list[str]) -> list[str]:
    start, stop = 0, len(lines)
    while start < stop and not lines[start].strip():
        start += 1
    while stop > start and not lines[stop - 1].strip():
        stop -= 1
    return lines[start:stop]


def _reindenter(search: list[str], found: list[str]) -> _Reindent:
    """Shift replacement lines by the indentation the file has and the search block lacked (or had extra)."""
    model = next((line for line in search if line.strip()), "")
    real = next((line for line in found if line.strip()), "")
    have = model[: len(model) - len(model.lstrip())]
    want = real[: len(real) - len(real.lstrip())]
    if have == want:
        return _identity

    def reindent(line: str) -> str:
        if not line.strip():
            return line
        if line.startswith(have):
            return want + line[len(have) :]
        if want.startswith(have):
            return want[len(have) :] + line
        return line

    return reindent


def _closest(lines: list[str], search: list[str], context: int = 0) -> str:
    """The file's lines most like the search block, numbered: each search line votes for the offset of
    the file lines close to it (difflib ratio >= 0.6); the best-voted window wins."""
    wanted = [(k, s.strip()) for k, s in enumerate(search) if s.strip()][:30]
    if not lines or not wanted:
        return ""
    votes: defaultdict[int, float] = defaultdict(float)
    matcher = difflib.SequenceMatcher(autojunk=False)
    stripped = [line.strip() for line in lines]
    for k, target in wanted:
        matcher.set_seq2(target)
        for j, candidate in enumerate(stripped):
            if not candidate:
                continue
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
                ratio = matcher.ratio()
                if ratio >= 0.6:
                    votes[j - k] += ratio
    if not votes:
        return ""
    offset = max(votes, key=lambda o: (votes[o], -o))
    start = max(0, offset - context)
    stop = min(len(lines), offset + len(_trim_blank(search)) + context)
    width = len(str(stop))
    return "\n".join(f"{n + 1:>{width}} | {lines[n]}" for n in range(start, stop))


def feedback_for(failures: Sequence[BlockFailure]) -> str:
    """The message to send the model (once) about blocks that did not apply."""
    if not failures:
        return ""
    parts = [
        f"{len(failures)} SEARCH/REPLACE block(s) did not match the files and were NOT applied; "
        "the other edits were applied. For each, resend a corrected block whose SEARCH part is copied "
        "exactly from the current file (whitespace included)."
    ]
    for n, failure in enumerate(failures, 1):
        parts.append(
            f"\n## {n}. {failure.path}: {failure.reason}\nYour SEARCH text:\n```\n{failure.search}```"
        )
        if failure.closest:
            parts.append(
                f"The closest lines in {failure.path} (line numbers are not part of the file):\n"
                f"```\n{failure.closest}\n```"
            )
        else:
            parts.append(f"Nothing in {failure.path} resembles it.")
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------------------------- diffs


def unified_diff(path: str, old: str, new: str, *, created: bool = False, deleted: bool = False) -> str:
    """A git-style unified diff (a/ b/ prefixes, /dev/null for created or deleted files); "" if equal."""
    if old == new and not created and not deleted:
        return ""
    if old == new:
        # difflib prints nothing for two empty files; git still names the created or deleted one.
        return (
            f"--- {'/dev/null' if created else f'a/{path}'}\n+++ {'/dev/null' if deleted else f'b/{path}'}\n"
        )
    lines = difflib.unified_diff(
        _keep_ends(old),
        _keep_ends(new),
        fromfile="/dev/null" if created else f"a/{path}",
        tofile="/dev/null" if deleted else f"b/{path}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _keep_ends(text: str) -> list[str]:
    # Not str.splitlines: it also splits on form feeds and U+2028, which are not line ends in a file.
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def diff_stats(diff: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff made by `unified_diff`."""
    added = removed = 0
    for line in diff.split("\n")[2:]:
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return added, removed
