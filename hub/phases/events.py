"""The moments a person hears of (issue 37): a task merged, halted for a person, waiting for a verdict,
and the backlog drained. Each is a `HubEvent`: what happened, to which task, and the one thing to do next
(the resume command ERIK_HALT.md puts first, the verdict to give and where). `hub.phases.notify` sends
them; a board can show the same ones.

An event is read off the task's contract as it stands right after the transition that entered its state
(`event_for`), so the transition and a later look (`hub next`'s sweep) name the same event with the
same `id`: the kind and the length of the history then. A task that halts twice halts in two events.
"""

from __future__ import annotations

from typing import TypedDict

from hub.core.notify_config import NotifyKind
from hub.phases.context import Context
from hub.phases.halts import suggested_resume
from hub.phases.status import judge_configured
from hub.state.contract import Contract
from hub.state.machine import ERIK_CONSULTATION, MERGED, PENDING_JUDGE_REVIEW


class HubEvent(TypedDict):
    """One notification as a command target reads it on stdin (JSON)."""

    kind: str  # a NotifyKind
    id: str  # what makes it once-only: the kind and the task's history length ("halted-7")
    task_id: str | None  # None: the backlog drained
    title: str
    what: str  # what happened, in one sentence
    next: str  # the one thing to do next (a command, or what to write where)
    state: str | None
    at: str  # when the transition was recorded (ISO 8601, UTC)
    handoff: str  # the handoff folder


def event_for(ctx: Context, contract: Contract) -> HubEvent | None:
    """The event the task's state stands for (ctx bound to the task), or None: merged, halted, or
    waiting in review for a person (no judge command or backend configured)."""
    status = contract["status"]
    task_id = contract["task_id"]
    history = contract["history"]
    if not history or history[-1]["to"] != status:
        return None  # a rewind or a hand edit: not a transition the hub made into this state
    kind: NotifyKind
    if status == MERGED:
        kind = NotifyKind.MERGED
        data = contract["handoff_data"]
        base = contract["git"].get("base_branch")
        commit = str(data.get("merge_commit") or "")[:12]
        what = f"task {task_id} merged into {base} ({commit})"
        nxt = f"nothing: see the merge with `git show {commit}`" if commit else "nothing"
    elif status == ERIK_CONSULTATION:
        kind = NotifyKind.HALTED
        halt = contract["handoff_data"].get("halt")
        trigger = halt["trigger"] if halt else "halt"
        before = halt["from_state"] if halt else history[-1]["from"]
        reason = halt["reason"] if halt else contract.get("status_reason") or ""
        what = f"task {task_id} halted ({trigger}): {reason}"
        nxt = f"read {ctx.handoff.halt_report}, then: {suggested_resume(ctx, contract, trigger, before)}"
    elif status == PENDING_JUDGE_REVIEW and not judge_configured(ctx):
        kind = NotifyKind.VERDICT_WANTED
        what = f"task {task_id} waits for your verdict"
        nxt = (
            f"read {ctx.handoff.review_request}; write {ctx.handoff.judge_report_json} with "
            '{"verdict": "PASS"} or {"verdict": "FAIL", "blocking_issues": [...]}; '
            f"then `hub report-judge --task {task_id}`"
        )
    else:
        return None
    return {
        "kind": kind,
        "id": f"{kind}-{len(history)}",
        "task_id": task_id,
        "title": str(contract.get("title") or ""),
        "what": what[:1000],
        "next": nxt,
        "state": status,
        "at": history[-1]["timestamp"],
        "handoff": str(ctx.handoff_root.dir),
    }


def drained(ctx: Context, archived: list[str], at: str) -> HubEvent:
    """The backlog drained: no task in flight and no proposal ready (`archived`: the archive's tasks,
    whose list makes the id, so two runs that archive the last two tasks at once name one event)."""
    import zlib  # here, not at the top: only the last archive of a backlog asks

    names = "\n".join(sorted(archived)).encode("utf-8")
    return {
        "kind": NotifyKind.DRAINED,
        "id": f"{NotifyKind.DRAINED}-{len(archived)}-{zlib.crc32(names):08x}",
        "task_id": None,
        "title": "",
        "what": f"the backlog drained: no task in flight and none queued ({len(archived)} archived)",
        "next": "queue more: `hub backlog add` or `hub new`",
        "state": None,
        "at": at,
        "handoff": str(ctx.handoff_root.dir),
    }
