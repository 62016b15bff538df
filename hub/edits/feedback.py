"""What goes back to the model about its answer, once: a cut-off answer, edits the pre-write check
refused, SEARCH blocks that did not match (with the file's closest lines), and how a SEARCH/REPLACE block
looks. The words are prompts/*.md templates (`hub.core.templates`): `trust_root` is the folder whose own
prompts/ comes first, the user's checkout; None, the packaged templates only (the edit bench, tests)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.templates import fragment

if TYPE_CHECKING:
    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult
    from hub.edits.match import BlockFailure


def output_truncated(trust_root: Path | None = None) -> str:
    """Why a cut-off answer was refused whole, and what to send instead."""
    return fragment(trust_root, "output_truncated")


def answer_feedback(parsed: ParseResult, result: ApplyResult, trust_root: Path | None = None) -> str:
    """The message sent to the model (once) about what of its answer was refused and how to fix it:
    a cut-off answer, content the pre-write check refused, SEARCH blocks that did not match. "" when
    there is nothing it could fix by answering again."""
    parts = []
    if parsed.truncated:
        why = parsed.problems[0] if parsed.problems else output_truncated(trust_root)
        parts.append(fragment(trust_root, "answer_cut_off", output_truncated=why))
    retry = [r for r in result.refused if r.retry]
    if retry:
        written = ", ".join(result.changed_files)
        parts.append(
            fragment(
                trust_root,
                "edits_refused",
                count=len(retry),
                written=f" (written: {written})" if written else "; no file was written",
                refusals="\n\n".join(f"- {r.path}: {r.reason}" for r in retry),
            )
        )
    if result.failed_blocks:
        parts.append(blocks_failed(result.failed_blocks, trust_root, result.changed_files))
    if parts and not result.failed_blocks:
        # The prompt asks for whole files; the advice above may be the model's first sight of blocks.
        parts.append(fragment(trust_root, "search_replace_format"))
    return "\n\n".join(parts) + ("\n" if parts else "")


def blocks_failed(
    failures: Sequence[BlockFailure], trust_root: Path | None = None, written: Sequence[str] = ()
) -> str:
    """The message about blocks that did not apply: each SEARCH as sent, the closest real lines, and
    what of the answer was written (`written`, the files changed), so the model is never told that
    other edits landed when none did."""
    if not failures:
        return ""
    blocks = [
        fragment(
            trust_root,
            "block_failed",
            n=n,
            path=failure.path,
            reason=failure.reason,
            search=failure.search,
            closest=fragment(trust_root, "block_closest", path=failure.path, lines=failure.closest)
            if failure.closest
            else fragment(trust_root, "block_nothing_close", path=failure.path),
        )
        for n, failure in enumerate(failures, 1)
    ]
    done = f"the rest of your answer was written ({', '.join(written)})" if written else "no file was written"
    return (
        fragment(trust_root, "blocks_failed", count=len(failures), written=done, blocks="\n\n".join(blocks))
        + "\n"
    )
