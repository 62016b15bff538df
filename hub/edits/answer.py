"""A model's whole answer, the implementer's path: `apply_answer` (a cut-off answer is refused whole,
blocks an earlier answer already wrote are left out), the caps checked before anything is read whole or
written (`check_reply`, `check_files_per_reply`), and what of it was not written (`unapplied`,
`not_made_good`; the words sent back to the model are `hub.edits.feedback`'s). Only `apply_answer` writes,
through `hub.edits.apply.apply_edits`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from hub.core.errors import EditError
from hub.core.log import get_logger
from hub.edits.apply import ApplyResult, apply_edits
from hub.edits.edit import FileEdit, ParseResult
from hub.edits.feedback import output_truncated
from hub.edits.parse import parse_edits
from hub.edits.policy import Policy, resolve_target

log = get_logger(__name__)


# A search/replace block where it was written: (repo-relative path, SEARCH, REPLACE).
Block = tuple[str, str, str]


def apply_answer(
    text: str,
    policy: Policy,
    *,
    default_path: str | None = None,
    done_reason: str = "",
    written: frozenset[Block] = frozenset(),
    trust_root: Path | None = None,
) -> tuple[ParseResult, ApplyResult]:
    """The implementer's path from a model's answer to written files. An answer the server cut off at
    its token limit (`done_reason` "length") is refused whole (`truncated`, the why worded from
    `trust_root`'s templates): its complete first blocks could land while the rest of the change never
    comes. Blocks in `written` (an earlier answer of this attempt wrote them) that the answer sends
    again are left out: their SEARCH text is gone from the file, so applied twice they would fail and
    fail the change with them."""
    if done_reason == "length":
        return ParseResult((), (output_truncated(trust_root),), truncated=True), ApplyResult((), (), ())
    parsed = parse_edits(text, default_path=default_path)
    if written:
        parsed = _without(parsed, written, policy)
    if policy.max_files is not None:
        check_files_per_reply(parsed.edits, policy.max_files)
    return parsed, apply_edits(parsed.edits, policy)


def written_blocks(parsed: ParseResult, result: ApplyResult, policy: Policy) -> frozenset[Block]:
    """The search/replace blocks of an answer that are in the files now: those of an edit that was
    written, but for the ones that failed."""
    root = policy.repo_root.resolve()
    changed = set(result.changed_files)
    failed = {(f.path, f.search) for f in result.failed_blocks}
    found: set[Block] = set()
    for edit in parsed.edits:
        rel = resolve_target(edit, policy, root) if edit.blocks else None
        if rel is not None and rel in changed:
            found |= {(rel, b.search, b.replace) for b in edit.blocks if (rel, b.search) not in failed}
    return frozenset(found)


def _without(parsed: ParseResult, written: frozenset[Block], policy: Policy) -> ParseResult:
    root = policy.repo_root.resolve()
    edits = []
    for edit in parsed.edits:
        if edit.blocks:
            rel = resolve_target(edit, policy, root) or ""
            blocks = tuple(b for b in edit.blocks if (rel, b.search, b.replace) not in written)
            if len(blocks) < len(edit.blocks):
                log.info("edits.sent_again", path=rel, blocks=len(edit.blocks) - len(blocks))
                if not blocks and edit.content is None and edit.patch is None and not edit.delete:
                    continue  # nothing left of this edit but what is already written
                edit = replace(edit, blocks=blocks)
        edits.append(edit)
    return replace(parsed, edits=tuple(edits))


def not_made_good(first: ApplyResult, retry: ParseResult, again: ApplyResult, policy: Policy) -> list[str]:
    """What the first answer failed to write that the answer to the feedback did not write either. Per
    file: a whole new file written covers it all; otherwise the retry must have sent at least as many
    blocks (or edits) there as failed the first time (those it sent that failed again are `unapplied`
    of the retry, with their reasons, and not said twice). A model that fixes one of two failed blocks
    and says nothing of the other would otherwise pass half a change to review as if whole."""
    root = policy.repo_root.resolve()
    owed: dict[str, int] = {}
    for failure in first.failed_blocks:
        owed[failure.path] = owed.get(failure.path, 0) + 1
    for refusal in first.refused:
        if refusal.retry:
            owed[refusal.path] = owed.get(refusal.path, 0) + 1
    if not owed:
        return []
    changed = set(again.changed_files)
    sent: dict[str, int] = {}
    whole: set[str] = set()
    for edit in retry.edits:
        rel = resolve_target(edit, policy, root) or edit.path
        if (edit.content is not None or edit.patch is not None or edit.delete) and rel in changed:
            whole |= {rel, edit.path}
        for key in {rel, edit.path}:  # a refusal names the path as the answer wrote it
            sent[key] = sent.get(key, 0) + max(len(edit.blocks), 1)
    # Edits sent again that failed again are `unapplied` of the retry, with their own reasons; only
    # those not sent at all are said here.
    return [
        f"{path}: {count - sent.get(path, 0)} of the {count} edit(s) refused the first time were not sent "
        "again"
        for path, count in owed.items()
        if path not in whole and sent.get(path, 0) < count
    ]


def unapplied(parsed: ParseResult, result: ApplyResult) -> list[str]:
    """The parts of an answer that were not written (refused edits, SEARCH blocks that did not match,
    blocks the parser dropped), each with its reason; [] when all of it was applied."""
    return result.not_applied() + list(parsed.problems)


def check_reply(text: str, max_chars: int) -> None:
    """Refuse a model reply too large to parse and apply safely, before anything reads it whole."""
    if len(text) > max_chars:
        raise EditError(
            f"the reply is {len(text):,} characters, over the limit of {max_chars:,} "
            "(limits.max_reply_chars): answer with only the files you change"
        )


def check_files_per_reply(edits: Sequence[FileEdit], max_files: int) -> None:
    """Refuse a reply touching more files than one change may, before anything is written."""
    paths = {e.path.strip() for e in edits}
    if len(paths) > max_files:
        raise EditError(
            f"the reply edits {len(paths)} files, over the limit of {max_files} "
            "(limits.max_changed_files): change fewer files"
        )
