"""SEARCH/REPLACE blocks in a model's answer: the markers, and consecutive blocks read whole or refused
where they break off. Pure; `hub.edits.parse` finds where they are, `hub.edits.match` applies them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from hub.edits.edit import SearchReplace

# Three to nine marker characters, and `<<<<<<< SEARCH>` (aider's own pattern takes it): models print
# all of these, and a marker the parser does not know would otherwise end up inside a file.
# Cline's `------- SEARCH` / `+++++++ REPLACE` are the same markers drawn with other characters.
SR_START = re.compile(r"^\s*(?:<{3,9}|-{3,9})\s*SEARCH\s*>?\s*$", re.IGNORECASE)
_SR_DIVIDER = re.compile(r"^\s*={3,9}\s*$")
_SR_END = re.compile(r"^\s*(?:>{3,9}|\+{3,9})\s*REPLACE\s*<?\s*$", re.IGNORECASE)
# Roo Code's header inside SEARCH: `:start_line:24` (and `:end_line:`), then a `-------` line.
_ROO_LINE = re.compile(r"^\s*:(?:start|end)_line:\s*\d*\s*$")
_ROO_RULE = re.compile(r"^\s*-{3,}\s*$")
# Why a block broke off when the answer ended inside it: a cut, not a malformed block.
CUT_DIVIDER = "a SEARCH section has no ======= line (output cut off?)"
CUT_END = "a REPLACE section has no >>>>>>> REPLACE line (output cut off?)"


def read_blocks(lines: list[str], start: int) -> tuple[list[SearchReplace], int, str | None]:
    """Consecutive search/replace blocks from `start`; the index after them; why the last one broke off."""
    blocks: list[SearchReplace] = []
    j = start
    while j < len(lines):
        if not SR_START.match(lines[j]):
            if lines[j].strip():
                break
            j += 1
            continue
        divider = next((k for k in range(j + 1, len(lines)) if _SR_DIVIDER.match(lines[k])), None)
        if divider is None:
            return blocks, len(lines), CUT_DIVIDER
        end = next((k for k in range(divider + 1, len(lines)) if _SR_END.match(lines[k])), None)
        if end is None:
            return blocks, len(lines), CUT_END
        if any(SR_START.match(line) for line in lines[j + 1 : end]):
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
        first = j + 1
        while first < divider and _ROO_LINE.match(lines[first]):
            first += 1
        if first > j + 1 and first < divider and _ROO_RULE.match(lines[first]):
            first += 1
        blocks.append(SearchReplace(join_lines(lines[first:divider]), join_lines(lines[divider + 1 : end])))
        j = end + 1
    return blocks, j, None


def join_lines(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def group_blocks(
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
