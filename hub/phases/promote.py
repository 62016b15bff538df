"""`hub next`: promote the next ready backlog proposal to a task, when a task slot is free."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hub.core.errors import ConfigError
from hub.core.log import get_logger
from hub.phases.context import Context, Outcome
from hub.phases.setup import check_task_paths, create
from hub.state import backlog
from hub.state.contract import TaskFields

log = get_logger(__name__)


def promote_next(ctx: Context) -> Outcome:
    """Turn the next ready proposal into a contract; nothing to do when none is ready."""
    if not ctx.handoff.backlog.exists():
        return Outcome("promote-backlog", message="nothing to do: no active task and no backlog")
    from hub.phases.status import free_task_slots

    entry, fields, why = backlog.claim_next(ctx, lambda: free_task_slots(ctx))
    if entry is None:
        return Outcome("promote-backlog", message=f"nothing to do: {why}")
    backlog_id = entry["id"]
    # Blocked with the reason; the next `hub next` goes on with the rest of the backlog.
    reason = why_blocked(ctx.repo_root, fields)
    if reason is not None:
        backlog.settle_claim(ctx, backlog_id, None, blocked=reason)
        return Outcome("promote-backlog", message=f"backlog task {backlog_id} blocked: {reason}")
    try:
        outcome = create(ctx, fields, create_target=True, check_paths=False)
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


def why_blocked(repo_root: Path, fields: TaskFields) -> str | None:
    """Why promotion would block a proposal with these fields rather than make it a task (None: it
    would not). The one decision `hub next` and `hub status` share, so status never names a proposal
    that next then blocks. A proposal is written before its files exist, so its Target may be new;
    one naming no file would become a task the model can write nowhere in, and a missing Source a
    file the model is told to create."""
    try:
        check_task_paths(repo_root, fields, create_target=True)
    except ConfigError as exc:
        return f"{exc}; fix the proposal's 'Target: path' or 'Source: a.py, b.py' line, then set it proposed again"
    return None


def next_proposal(ctx: Context) -> dict[str, Any]:
    """`hub backlog next` / task_next: `{task, why}`, the proposal `hub next` would take next, and
    `blocked` (the reason) when promotion would block it instead of making it a task."""
    doc = backlog.next_task(ctx)
    if doc["task"] is not None:
        reason = why_blocked(ctx.repo_root, backlog.proposal_to_fields(doc["task"]["content"]))
        if reason is not None:
            doc["blocked"] = reason
    return doc
