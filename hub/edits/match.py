"""Search/replace matching, the closest-lines report (`hub.edits.feedback` words it for the model), and
unified diffs. Pure."""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hub.edits.check import is_elision
from hub.edits.edit import SearchReplace


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

    Tiers: exact lines; then lines equal after stripping; then lines equal ignoring blank lines and the
    width of whitespace runs. The replacement is re-indented the way the matched lines differ from the SEARCH lines,
    in the file's own indentation (tabs or spaces). Blank lines at the block's edges are the file's: a
    replacement that drops or adds some there keeps the file's. A SEARCH whose first and last lines match
    but whose middle does not is refused, never guessed (the model invented or skipped lines). A block
    that matches in more than one place fails rather than guess. SEARCH and REPLACE may both elide
    unchanged lines with matching `...` lines: each piece between them must match exactly once, in order."""
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
    new_lines, reason = _replace(lines, search, replacement)
    if new_lines is None and (_has_elision(search) or _has_elision(replacement)):
        new_lines, reason = _replace_elided(lines, search, replacement)
    if new_lines is None:
        return None, reason
    return "\n".join(new_lines) + ("\n" if ends_with_newline and new_lines else ""), ""


def _replace(lines: list[str], search: list[str], replacement: list[str]) -> tuple[list[str] | None, str]:
    for tier in (_exact, _loose, _spaceless):
        spans, pairs = tier(lines, search)
        if len(spans) > 1:
            places = ", ".join(str(s + 1) for s, _ in spans[:5])
            return None, f"SEARCH matches {len(spans)} places (lines {places}); add lines to make it unique"
        if spans:
            start, stop = spans[0]
            fitted = _fit(lines, start, stop, replacement, pairs)
            if fitted is None:
                return None, _FLATTENED
            return lines[:start] + fitted + lines[stop:], ""
    anchors = _anchors(lines, search)
    if anchors:
        first, last = anchors
        return None, (
            f"SEARCH's first and last lines match lines {first + 1} and {last + 1}, but the lines between "
            "them differ from the file (lines added, skipped or changed); copy every SEARCH line exactly "
            "from the file"
        )
    return None, "SEARCH text not found in the file"


def _fit(
    lines: list[str], start: int, stop: int, replacement: list[str], pairs: list[tuple[str, str]]
) -> list[str] | None:
    """The replacement as it goes into lines[start:stop]: re-indented, with the span's own blank edges;
    None when the SEARCH's indentation gives no way to place it."""
    body = _trim_blank(replacement)
    if not body:
        return []  # a deletion removes the matched lines, edges included
    span = lines[start:stop]
    lead = len(span) - len(_trim_blank_start(span))
    trail = len(span) - len(_trim_blank_end(span))
    reindent = _reindenter(pairs, lines, body)
    if reindent is None:
        return None
    return span[:lead] + [reindent(line) for line in body] + span[len(span) - trail :]


def _lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_FLATTENED = (
    "SEARCH matches only with its indentation ignored, and its lines are indented alike where the file's "
    "are not, so where REPLACE's lines belong is unknown; copy the lines with the file's indentation"
)
_Spans = list[tuple[int, int]]
_Pairs = list[tuple[str, str]]  # (SEARCH line, the file line it matched)


def _exact(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    m = len(search)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if lines[i : i + m] == search]
    pairs = list(zip(search, search, strict=True)) if len(spans) == 1 else []
    return spans, pairs


def _loose(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    trimmed = _trim_blank(search)
    if not trimmed:
        return [], []
    wanted = [s.strip() for s in trimmed]
    stripped = [line.strip() for line in lines]
    m = len(wanted)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if stripped[i : i + m] == wanted]
    if len(spans) != 1:
        return spans, []
    return spans, list(zip(trimmed, lines[spans[0][0] : spans[0][1]], strict=True))


def _squash(line: str) -> str:
    # Runs of whitespace count as one space: `x  +=  1` is `x += 1`, but `"a b"` is not `"ab"`.
    return " ".join(line.split())


def _spaceless(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    """Equal once blank lines are ignored and runs of whitespace count as one: only whitespace differs,
    so nothing the model wrote in SEARCH is invented and no real line is skipped."""
    wanted = [(line, _squash(line)) for line in search if line.strip()]
    if not wanted:
        return [], []
    real = [(i, _squash(line)) for i, line in enumerate(lines) if line.strip()]
    m = len(wanted)
    keys = [w for _, w in wanted]
    hits = [k for k in range(len(real) - m + 1) if [r for _, r in real[k : k + m]] == keys]
    spans = [(real[k][0], real[k + m - 1][0] + 1) for k in hits]
    if len(spans) != 1:
        return spans, []
    k = hits[0]
    return spans, [(wanted[n][0], lines[real[k + n][0]]) for n in range(m)]


def _anchors(lines: list[str], search: list[str]) -> tuple[int, int] | None:
    """Where a SEARCH's first and last lines match uniquely, within reason of its length: only to say
    so when the middle does not match (the old third tier applied such blocks and wrote wrong files)."""
    trimmed = _trim_blank(search)
    m = len(trimmed)
    first, last = trimmed[0].strip() if trimmed else "", trimmed[-1].strip() if trimmed else ""
    if m < 3 or len(re.sub(r"\W", "", first)) < 3 or not last:
        return None
    stripped = [line.strip() for line in lines]
    starts = [i for i, line in enumerate(stripped) if line == first]
    if len(starts) != 1:
        return None
    start = starts[0]
    low, high = start + max(1, m // 2) - 1, min(len(lines) - 1, start + 2 * m + 3)
    ends = [j for j in range(low, high + 1) if j > start and stripped[j] == last]
    return (start, ends[0]) if len(ends) == 1 else None


def _trim_blank(lines: list[str]) -> list[str]:
    return _trim_blank_end(_trim_blank_start(lines))


def _trim_blank_start(lines: list[str]) -> list[str]:
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    return lines[start:]


def _trim_blank_end(lines: list[str]) -> list[str]:
    stop = len(lines)
    while stop > 0 and not lines[stop - 1].strip():
        stop -= 1
    return lines[:stop]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindenter(pairs: _Pairs, lines: list[str], replacement: list[str]) -> Callable[[str], str] | None:
    """Indent replacement lines as the file does: an indentation seen on a matched SEARCH line becomes
    that file line's; deeper ones keep their extra depth, in tabs if the file indents with tabs, in
    spaces (scaled to the file's step, when the matched lines show it) if it indents with spaces, so a
    file never comes back with mixed indentation. None when one SEARCH indentation stands for two
    different real ones (a flattened SEARCH): where the replacement's lines belong is unknown."""
    mapping: dict[str, str] = {}
    for model, real in pairs:
        if model.strip() and mapping.setdefault(_indent(model), _indent(real)) != _indent(real):
            return None
    indents = [_indent(line) for line in lines if line.strip() and _indent(line)]
    file_tabs = sum(1 for i in indents if i.startswith("\t")) * 2 > len(indents) if indents else False
    model_indents = [_indent(line) for line in [*mapping, *replacement] if _indent(line)]
    model_unit = _step(model_indents) or 4
    levels = sorted((len(m.expandtabs(model_unit)), len(r.expandtabs(4))) for m, r in mapping.items())
    steps = {
        (r2 - r1) / (m2 - m1) for (m1, r1), (m2, r2) in itertools.pairwise(levels) if m2 > m1 and r2 > r1
    }
    scale = steps.pop() if len(steps) == 1 else 1.0

    def convert(extra: str) -> str:
        width = len(extra.expandtabs(model_unit))
        if file_tabs:
            return "\t" * (width // model_unit) + " " * (width % model_unit)
        if not indents:
            return extra  # the file shows no style to follow
        return " " * round(width * scale)

    def reindent(line: str) -> str:
        if not line.strip():
            return line
        have = _indent(line)
        if have in mapping:
            return mapping[have] + line[len(have) :]
        base = max((m for m in mapping if have.startswith(m)), key=len, default="")
        return mapping.get(base, base) + convert(have[len(base) :]) + line[len(have) :]

    return reindent


def _step(indents: list[str]) -> int:
    """The indentation step of space-indented lines, 0 when unknown: their greatest common divisor,
    taken as 4 or 2 when it is a multiple of those (one line 8 deep is two steps of 4, not one of 8)."""
    widths = [len(i) for i in indents if i and set(i) == {" "}]
    step = functools.reduce(math.gcd, widths, 0)
    return 4 if step and step % 4 == 0 else 2 if step and step % 2 == 0 else step


def _has_elision(lines: list[str]) -> bool:
    return any(is_elision(line) for line in lines)


def _replace_elided(
    lines: list[str], search: list[str], replacement: list[str]
) -> tuple[list[str] | None, str]:
    """SEARCH and REPLACE that both skip unchanged lines with `...`: the pieces between the elisions are
    applied in order, each matching exactly once; anything less clear is refused."""
    s_pieces, r_pieces = _split_elided(search), _split_elided(replacement)
    advice = (
        "quote the lines in full, or use `...` lines at the same places in SEARCH and REPLACE with at "
        "least one real line between them"
    )
    if len(s_pieces) != len(r_pieces):
        return None, f"SEARCH and REPLACE elide lines (`...`) at different places; {advice}"
    result = list(lines)
    cursor = 0
    for s_piece, r_piece in zip(s_pieces, r_pieces, strict=True):
        if not _trim_blank(s_piece):
            if _trim_blank(r_piece):
                return (
                    None,
                    f"REPLACE adds lines next to an elision (`...`) with nothing to anchor them; {advice}",
                )
            continue
        spans: _Spans = []
        pairs: _Pairs = []
        for tier in (_exact, _loose):
            spans, pairs = tier(result, s_piece)
            if spans:
                break
        if len(spans) != 1 or spans[0][0] < cursor:
            found = "is not in the file" if not spans else f"matches {len(spans)} places or is out of order"
            return None, f"a piece of SEARCH between elisions (`...`) {found}; {advice}"
        start, stop = spans[0]
        fitted = _fit(result, start, stop, r_piece, pairs)
        if fitted is None:
            return None, _FLATTENED
        result[start:stop] = fitted
        cursor = start + len(fitted)
    return result, ""


def _split_elided(lines: list[str]) -> list[list[str]]:
    pieces: list[list[str]] = [[]]
    for line in lines:
        if is_elision(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    return pieces


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
