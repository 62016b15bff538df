"""`hub next` with no active task: promote the next ready backlog proposal to a task."""

from __future__ import annotations

from hub import backlog
from hub.errors import ConfigError
from hub.log import get_logger
from hub.phases.context import Context, Outcome
from hub.phases.setup import create

log = get_logger(__name__)


def promote_next(ctx: Context) -> Outcome:
    """Turn the next ready proposal into a contract; nothing to do when none is ready."""
    if not ctx.handoff.backlog.exists():
        return Outcome("promote-backlog", message="nothing to do: no active task and no backlog")
    entry, fields, why = backlog.claim_next(ctx)
    if entry is None:
        return Outcome("promote-backlog", message=f"nothing to do: {why}")
    backlog_id = entry["id"]
    try:
        # A proposal is written before its files exist, so its Target may be new (create_target); one
        # naming no file at all would become a task the model can write nowhere in (ConfigError): it
        # is blocked with the reason, and the next `hub next` goes on with the rest of the backlog.
        outcome = create(ctx, fields, create_target=True)
    except ConfigError as exc:
        reason = f"{exc}; add a 'Target: path' line to the proposal, then set it proposed again"
        backlog.settle_claim(ctx, backlog_id, None, blocked=reason)
        return Outcome("promote-backlog", message=f"backlog task {backlog_id} blocked: {reason}")
    except BaseException:
        backlog.settle_claim(ctx, backlog_id, None)
        raise
    backlog.settle_claim(ctx, backlog_id, outcome.task_id)
    log.debug("backlog.promoted", backlog_id=backlog_id, task=outcome.task_id)
    return Outcome(
        "promote-backlog",
        outcome.task_id,
        None,
        outcome.to_state,
        f"promoted backlog task {backlog_id} ({fields['title']}) to task {outcome.task_id}",
        data={"backlog_id": backlog_id, "task_id": outcome.task_id},
    )
