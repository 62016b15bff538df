"""How an implementer attempt that wrote its change ends, in either mode: the worktree cleaned of what the
commands left, the commit, then code_written; never on to review with a written edit left out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hub.core.faults import crash_point
from hub.core.text import listed
from hub.phases import prompt_parts
from hub.phases.attempt_commands import clean_state
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.stall import Failed, Stall
from hub.phases.written import finish_code_written
from hub.repo import gitops, untrusted
from hub.state.machine import Event

if TYPE_CHECKING:
    from collections.abc import Set

    from hub.phases.acceptance import CommandResult


def commit_attempt(run: Run, written: Set[str], acceptance: list[CommandResult]) -> Outcome:
    """Commit what the attempt `written`, its passing `acceptance` results on record, and move the task
    on to local review; `Failed` (an `uncommitted_edit` stall) when a written edit is not in the commit."""
    contract = run.contract
    run.task.record_acceptance([r.summary() for r in acceptance])
    # Commit first, then record: the other order left an uncommitted edit behind a recorded
    # code_written when killed between the two (review and judge saw an empty diff). The marker
    # lets recovery tell "killed after the commit" (finish the attempt) from "before" (stash it).
    if contract["specification"].get("acceptance_commands"):
        clean_state(run, written)
    run.task.begin_commit(gitops.head_commit(run.repo))
    run.save()
    try:
        commit = run.checkpoint(Event.CODE_WRITTEN)
    except untrusted.LinkRefused as exc:
        run.task.finish_commit()
        raise Failed(
            Stall(
                "links_refused",
                prompt_parts.fragment(
                    run.ctx.config.trust_root, "links_refused", paths=listed(exc.paths, 20)
                ),
            )
        ) from None
    crash_point("implement:after-commit")
    left = untrusted.uncommitted(run.repo, sorted(written))
    if left:
        # Never "N files changed" and on to review while a written edit is not in the commit (an
        # ignored path, say): the review and the judge would see a change without it.
        run.task.finish_commit()
        raise Failed(
            Stall(
                "uncommitted_edit",
                prompt_parts.fragment(run.ctx.config.trust_root, "uncommitted_edit", paths=listed(left, 20)),
            )
        )
    return finish_code_written(run, commit)
