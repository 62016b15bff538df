"""`hub next`: promote the next ready backlog proposal to a task, when a task slot is free."""

from __future__ import annotations

from typing import Any

from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.phases.setup import create
from hub.phases.status import free_task_slots
from hub.phases.task_paths import why_blocked
from hub.state import backlog

log = get_logger(__name__)


def promote_next(ctx: Context) -> Outcome:
    """Turn the next ready proposal into a contract; nothing to do when none is ready."""
    if not ctx.handoff.backlog.exists():
        return Outcome("promote-backlog", message="nothing to do: no active task and no backlog")
    entry, fields, why = backlog.claim_next(ctx.handoff, ctx.clock, lambda: free_task_slots(ctx))
    if entry is None:
        return Outcome("promote-backlog", message=f"nothing to do: {why}")
    backlog_id = entry["id"]
    # Blocked with the reason; the next `hub next` goes on with the rest of the backlog.
    reason = why_blocked(ctx.repo_root, fields)
    if reason is not None:
        backlog.settle_claim(ctx.handoff, ctx.clock, backlog_id, None, blocked=reason)
        return Outcome("promote-backlog", message=f"backlog task {backlog_id} blocked: {reason}")
    try:
        outcome = create(ctx, fields, create_target=True, check_paths=False)
    except BaseException:
        backlog.settle_claim(ctx.handoff, ctx.clock, backlog_id, None)
        raise
    backlog.settle_claim(ctx.handoff, ctx.clock, backlog_id, outcome.task_id)
    log.debug("backlog.promoted", backlog_id=backlog_id, task=outcome.task_id)
    return Outcome(
        "promote-backlog",
        outcome.task_id,
        None,
        outcome.to_state,
        f"promoted backlog task {backlog_id} ({fields['title']}) to task {outcome.task_id}",
        data={"backlog_id": backlog_id, "task_id": outcome.task_id},
    )


def next_proposal(ctx: Context) -> dict[str, Any]:
    """`hub backlog next` / task_next: `{task, why}`, the proposal `hub next` would take next, and
    `blocked` (the reason) when promotion would block it instead of making it a task."""
    doc = backlog.next_task(ctx.handoff, ctx.clock)
    if doc["task"] is not None:
        reason = why_blocked(ctx.repo_root, backlog.proposal_to_fields(doc["task"]["content"]))
        if reason is not None:
            doc["blocked"] = reason
    return doc
