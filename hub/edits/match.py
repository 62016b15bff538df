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

    Tiers: exact lines; then lines equal but for indentation and trailing whitespace; then the same with
    blank lines ignored. Never the inside of a line: spaces there may be a string's (a no-break space, a
    column's padding), and a SEARCH that matches only with them ignored is refused, saying so. The lines
    REPLACE keeps as SEARCH quoted them, and the blank lines between them, are written as the file has
    them. The replacement is re-indented the way the matched lines differ from the SEARCH lines, in the
    file's own indentation (tabs or spaces). SEARCH lines copied with `24 | ` line numbers match without
    them when the file has none. Blank lines at the block's edges are the file's: a
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
    unnumbered = _unnumbered(search) if new_lines is None and _unnumbered(lines) is None else None
    if unnumbered is not None:
        # `24 | line`: the numbered excerpt of a prompt or of the hub's own feedback, copied with its
        # numbers. They are not in the file, so they go, from REPLACE's numbered lines too.
        plain = [_LINE_NUMBER.sub("", line, count=1) for line in replacement]
        new_lines, reason = _replace(lines, unnumbered, plain)
    if new_lines is None:
        return None, reason
    return "\n".join(new_lines) + ("\n" if ends_with_newline and new_lines else ""), ""


def _replace(lines: list[str], search: list[str], replacement: list[str]) -> tuple[list[str] | None, str]:
    for tier in (_exact, _loose, _blankless):
        spans, pairs = tier(lines, search)
        if len(spans) > 1:
            places = ", ".join(str(s + 1) for s, _ in spans[:5])
            return None, f"SEARCH matches {len(spans)} places (lines {places}); add lines to make it unique"
        if spans:
            start, stop = spans[0]
            fitted = _fit(lines, start, stop, search, replacement, pairs)
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
    if _matches_inside_lines(lines, search):
        return None, (
            "SEARCH matches only if the spaces inside its lines are ignored (spacing inside a string, "
            "a no-break space, aligned columns); copy the lines exactly as the file has them"
        )
    return None, "SEARCH text not found in the file"


def _fit(
    lines: list[str],
    start: int,
    stop: int,
    search: list[str],
    replacement: list[str],
    pairs: _Pairs,
) -> list[str] | None:
    """The replacement as it goes into lines[start:stop]: re-indented, with the span's own blank edges;
    the lines REPLACE leaves as SEARCH quoted them, and the blank lines between them, are the file's own
    (tolerance covers indentation, line ends and blank lines, so the file's spelling of them stays).
    None when the SEARCH's indentation gives no way to place it."""
    body = _trim_blank(replacement)
    if not body:
        return []  # a deletion removes the matched lines, edges included
    span = lines[start:stop]
    lead = len(span) - len(_trim_blank_start(span))
    trail = len(span) - len(_trim_blank_end(span))
    reindent = _reindenter([(search[i], lines[j]) for i, j in pairs], lines, body)
    if reindent is None:
        return None
    fitted = _own_lines(search, body, [reindent(line) for line in body], pairs, lines)
    return span[:lead] + fitted + span[len(span) - trail :]


def _own_lines(
    search: list[str], body: list[str], fitted: list[str], pairs: _Pairs, lines: list[str]
) -> list[str]:
    """`fitted` with each line REPLACE keeps unchanged from SEARCH taken from the file, and each run of
    blank lines REPLACE keeps as SEARCH had it taken from the file: a SEARCH with one blank line where
    the file has two changes no blank line."""
    file_of = dict(pairs)
    quoted = [i for i, _ in pairs]
    kept = [k for k, line in enumerate(body) if line.strip()]
    matcher = difflib.SequenceMatcher(
        None, [search[i] for i in quoted], [body[k] for k in kept], autojunk=False
    )
    same: dict[int, int] = {}  # body line -> the SEARCH line (index into `quoted`) it repeats
    for a, b, size in matcher.get_matching_blocks():
        for t in range(size):
            same[kept[b + t]] = a + t

    def file_gap(n: int) -> list[str]:  # the file's lines between the n-th and next quoted line
        return lines[file_of[quoted[n]] + 1 : file_of[quoted[n + 1]]]

    def quoted_gap(n: int) -> int:
        return quoted[n + 1] - quoted[n] - 1

    out: list[str] = []
    for n, k in enumerate(kept):
        if n:
            prev = kept[n - 1]
            gap = fitted[prev + 1 : k]
            # REPLACE left the blank lines after a kept line, or before one, as SEARCH quoted them.
            after = same.get(prev)
            before = same[k] - 1 if k in same else None
            for at in (after, before):
                if at is not None and 0 <= at < len(quoted) - 1 and quoted_gap(at) == len(gap):
                    gap = file_gap(at)
                    break
            out.extend(gap)
        out.append(lines[file_of[quoted[same[k]]]] if k in same else fitted[k])
    return out


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
_Pairs = list[tuple[int, int]]  # (index of a non-blank SEARCH line, index of the file line it matched)
# Tolerance covers indentation and line ends only: never the inside of a line, where spaces may be a
# string's content (a no-break space, column padding). str.strip() would also take U+00A0 and others.
_EDGE = " \t\r"


def _key(line: str) -> str:
    return line.strip(_EDGE)


def _exact(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    m = len(search)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if lines[i : i + m] == search]
    if len(spans) != 1:
        return spans, []
    return spans, [(n, spans[0][0] + n) for n in range(m) if search[n].strip(_EDGE)]


def _loose(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    """Equal once indentation and trailing whitespace are ignored (blank edges of SEARCH too)."""
    lead = len(search) - len(_trim_blank_start(search))
    trimmed = _trim_blank(search)
    if not trimmed:
        return [], []
    wanted = [_key(s) for s in trimmed]
    keys = [_key(line) for line in lines]
    m = len(wanted)
    spans = [(i, i + m) for i in range(len(lines) - m + 1) if keys[i : i + m] == wanted]
    if len(spans) != 1:
        return spans, []
    return spans, [(lead + n, spans[0][0] + n) for n in range(m) if wanted[n]]


def _blankless(lines: list[str], search: list[str]) -> tuple[_Spans, _Pairs]:
    """Equal once blank lines are ignored, and indentation and trailing whitespace: nothing the model
    wrote in SEARCH is invented and no real line is skipped; the file's blank lines are kept (`_fit`)."""
    wanted = [(n, _key(line)) for n, line in enumerate(search) if _key(line)]
    if not wanted:
        return [], []
    real = [(i, _key(line)) for i, line in enumerate(lines) if _key(line)]
    m = len(wanted)
    keys = [w for _, w in wanted]
    hits = [k for k in range(len(real) - m + 1) if [r for _, r in real[k : k + m]] == keys]
    spans = [(real[k][0], real[k + m - 1][0] + 1) for k in hits]
    if len(spans) != 1:
        return spans, []
    k = hits[0]
    return spans, [(wanted[n][0], real[k + n][0]) for n in range(m)]


def _matches_inside_lines(lines: list[str], search: list[str]) -> bool:
    """Whether SEARCH would match with the spaces inside lines ignored: only to say so, never applied."""
    wanted = ["".join(line.split()) for line in search if line.strip()]
    real = ["".join(line.split()) for line in lines if line.strip()]
    m = len(wanted)
    starts = (k for k, line in enumerate(real[: len(real) - m + 1]) if wanted and line == wanted[0])
    return any(real[k : k + m] == wanted for k in starts)


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
    return line[: len(line) - len(line.lstrip(" \t"))]


def _reindenter(
    pairs: list[tuple[str, str]], lines: list[str], replacement: list[str]
) -> Callable[[str], str] | None:
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


_LINE_NUMBER = re.compile(r"^[ \t]*\d+ ?\|(?: |$)")


def _unnumbered(lines: list[str]) -> list[str] | None:
    """The lines without their `24 | ` prefixes, when every non-blank one has one, counting up."""
    numbers = [_LINE_NUMBER.match(line) for line in lines if line.strip()]
    if not numbers or not all(numbers):
        return None
    values = [int(m[0].split("|")[0]) for m in numbers if m]
    if any(b <= a for a, b in itertools.pairwise(values)):
        return None
    return [_LINE_NUMBER.sub("", line, count=1) for line in lines]


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
        fitted = _fit(result, start, stop, s_piece, r_piece, pairs)
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
