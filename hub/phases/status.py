"""Read-only views (`hub status`, `hub log`) and what is due next (`hub next`).

No lock, no git, no network: these must start fast and never change anything.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hub import contract as contract_mod
from hub import handoff
from hub.contract import Contract, Verdict, parse_iso
from hub.errors import TaskHalted
from hub.machine import (
    ERIK_CONSULTATION,
    IMPLEMENTATION_IN_PROGRESS,
    JUDGE_REVIEW_IN_PROGRESS,
    MERGED,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    PENDING_LOCAL_REVIEW,
    PENDING_REBUTTAL,
    REVIEW_COMPLETE,
    TIMEOUT_IMPLEMENTER,
    TIMEOUT_JUDGE,
)
from hub.phases.context import Context, resume_targets


def due(
    contract: Contract | None, now: datetime, judge_configured: bool, report_waiting: bool = False
) -> tuple[str | None, str]:
    """The phase `hub next` runs for this contract, and why (None: nothing is due). Pure.

    `report_waiting`: a JUDGE_REPORT.json/.md lies in the handoff folder."""
    if contract is None:
        return "promote-backlog", "no active task: promote the next ready backlog proposal"
    status = contract["status"]
    if status == PENDING_IMPLEMENTER or status in (IMPLEMENTATION_IN_PROGRESS, TIMEOUT_IMPLEMENTER):
        if not contract["git"].get("task_branch"):
            return "setup-task", "the task has no branch yet"
        return "run-implementer", "the implementer is due"
    if status == PENDING_LOCAL_REVIEW:
        return "run-local-review", "the local review is due"
    if status in (PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS):
        from hub.phases.judge import review_deadline

        if report_waiting:
            return "report-judge", "a judge report is waiting"
        deadline = review_deadline(contract)
        if deadline and now > parse_iso(deadline):
            return "timeout-judge", f"the review passed its deadline {deadline}"
        if judge_configured:
            return "run-judge", "a judge is configured"
        return None, "waiting for the judge: write _handoff/JUDGE_REPORT.json, then `hub report-judge`"
    if status == TIMEOUT_JUDGE:
        return "timeout-judge", "the judge timed out"
    if status == REVIEW_COMPLETE:
        if contract["handoff_data"].get("judge_verdict") == Verdict.PASS:
            return "finalize-task", "the judge passed the task"
        # A report-judge that died between recording the verdict and applying it.
        return (
            "report-judge",
            f"the {contract['handoff_data'].get('judge_verdict')} verdict is not applied yet",
        )
    if status == PENDING_REBUTTAL:
        return None, "waiting on a rebuttal: `hub rebut FILE`"
    if status == ERIK_CONSULTATION:
        return None, "halted: a person must read the halt file and run `hub resume --to STATE`"
    if status == MERGED:
        return None, "merged"
    return None, f"nothing runs from {status}"


def next_step(ctx: Context) -> tuple[Contract | None, str | None, str]:
    """What runs next, for `hub next` and `hub watch` alike: the active contract (None: no task), the
    phase `due` names (None: nothing is due) and why. TaskHalted while the task waits for a person."""
    contract = active_contract(ctx)
    if contract is not None and contract["status"] == MERGED:
        from hub.phases.finalize import archive_merged

        contract = archive_merged(ctx)
    if contract is not None and contract["status"] == ERIK_CONSULTATION:
        raise TaskHalted(
            f"task {contract['task_id']} is halted: read {ctx.handoff.halt_report}, then `hub resume`"
        )
    phase, why = due(contract, ctx.clock(), judge_configured(ctx), report_waiting(ctx))
    return contract, phase, why


def active_contract(ctx: Context) -> Contract | None:
    if not ctx.handoff.contract.exists():
        return None
    return contract_mod.load(ctx.handoff.contract)


def judge_configured(ctx: Context) -> bool:
    return bool(ctx.config.judge.command or ctx.config.judge.backend)


def report_waiting(ctx: Context) -> bool:
    return ctx.handoff.judge_report_json.exists() or ctx.handoff.judge_report_md.exists()


def status(ctx: Context) -> dict[str, Any]:
    """Everything `hub status` shows, as one JSON-able document."""
    hand = ctx.handoff
    if not hand.contract.exists():
        return {"active": False, "handoff": str(hand.dir), "next": idle_next(ctx)}
    contract = contract_mod.load(hand.contract)
    phase, why = due(contract, ctx.clock(), judge_configured(ctx), report_waiting(ctx))
    owner = handoff.lock_owner(hand)
    return {
        "active": True,
        "task_id": contract["task_id"],
        "title": contract.get("title", ""),
        "status": contract["status"],
        "status_reason": contract.get("status_reason"),
        "attempt": contract["attempt"],
        "lease": contract.get("lock"),
        "running": owner,
        "breaker": contract.get("breaker"),
        "cost": contract.get("cost", {}),
        "verdict": contract["handoff_data"].get("judge_verdict"),
        "branch": contract["git"].get("task_branch"),
        "last_transitions": contract["history"][-3:],
        "next": {"phase": phase, "why": why},
        "server_wait": contract["handoff_data"].get("server_wait") if owner else None,
        "halt_file": str(hand.halt_report) if hand.halt_report.exists() else None,
        "stall_report": str(hand.stall_report) if hand.stall_report.exists() else None,
        # For an agent that cannot read the halt file: where `hub resume --to` can send the task.
        "resume_targets": resume_targets(contract) if contract["status"] == ERIK_CONSULTATION else {},
    }


def idle_next(ctx: Context) -> str:
    """What `hub next` does with no active task: promote a ready backlog proposal (or block it, by the
    same decision promotion makes; it asks git only to name the closest file to a missing one), or
    nothing (then say how to start one, rather than suggest promoting a backlog that is empty)."""
    from hub.backlog import peek_next, proposal_to_fields

    entry, why = peek_next(ctx.handoff)
    if entry is not None:
        from hub.phases.promote import why_blocked

        blocked = why_blocked(ctx.repo_root, proposal_to_fields(entry["content"]))
        if blocked is not None:
            return f"`hub next` blocks backlog proposal {entry['id']}: {blocked}"
        return f"`hub next` promotes backlog proposal {entry['id']} ({why})"
    start = "start a task: hub new --title T --requirement R --target FILE (or queue one: hub backlog add)"
    return f"nothing: {why}; {start}"


def log_entries(ctx: Context, task_id: str | None = None) -> list[dict[str, Any]]:
    """Transitions (and, for one task, its provenance records) in order."""
    entries: list[dict[str, Any]] = [
        {"kind": "transition", **line} for line in handoff.read_transitions(ctx.handoff, task_id)
    ]
    if task_id:
        from hub.provenance import read_records

        entries += [{"kind": "run", **record} for record in read_records(ctx.handoff, task_id)]
        entries.sort(key=lambda e: (str(e.get("timestamp", "")), int(e.get("at_ns") or 0)))
    return entries
