"""Read-only views (`hub status`, `hub log`) and what is due for a task (`due`, which `hub next` runs).

No lock, no git, no network: these must start fast and never change anything. STATUS.md, which shows
the same, is written by `hub.phases.status_md`.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, NotRequired, Required, TypedDict

from hub.core.errors import ContractInvalid, HubError, TaskChoice
from hub.core.log import get_logger
from hub.core.text import one_line
from hub.phases.context import Context
from hub.phases.table import JUDGING, Facts, due_phase
from hub.phases.table import review_deadline as review_deadline  # judge.py's, where it always was
from hub.phases.table import review_timed_out as review_timed_out
from hub.state import handoff, store
from hub.state.contract import (
    Breaker,
    Contract,
    HistoryEntry,
    Lease,
    RoleCost,
    ServerWait,
)
from hub.state.machine import (
    ERIK_CONSULTATION,
    JUDGE_REVIEW_IN_PROGRESS,
    MERGED,
    PENDING_JUDGE_REVIEW,
    PENDING_REBUTTAL,
    REVIEW_COMPLETE,
)

log = get_logger(__name__)


class NextPhase(TypedDict):
    phase: str | None  # the `hub` command `hub next` runs for the task; None: nothing is due
    why: str


class TaskView(TypedDict):
    """One task as `hub status` shows it (`task_view`)."""

    task_id: str
    title: str
    status: str
    status_reason: str | None
    attempt: int
    worktree: str | None
    branch: str | None
    next: NextPhase
    needs_person: str | None
    lease: Lease | None
    lease_stale: bool  # its process is gone (on this host): the next run recovers the task
    running: handoff.LockOwner | None
    breaker: Breaker | None
    cost: dict[str, RoleCost]
    verdict: str | None
    reviewed_commit: str | None
    last_transitions: list[HistoryEntry]
    server_wait: ServerWait | None
    call: dict[str, Any] | None  # a model call in flight (hub.phases.live): role, model, tokens, waiting
    halt_file: str | None
    stall_report: str | None
    resume_targets: dict[str, str]


class StatusDoc(TypedDict):
    """Everything `hub status` shows (`status`); STATUS.md is rendered from it."""

    handoff: str
    tasks: list[TaskView]
    next: NotRequired[str]  # with no task in flight: what `hub next` does


class LogEntry(TypedDict, total=False):
    """One `hub log` entry: a transition line (kind "transition", handoff.TransitionLine) or, for one
    task, one of its provenance records (provenance.RunRecord; each kind adds keys of its own)."""

    kind: Required[str]
    timestamp: Required[str]
    at_ns: int
    task_id: str
    event: str
    old_status: str
    new_status: str
    status_reason: str | None
    attempt: int | None
    cumulative_cost_usd: float
    repaired: bool
    file: str
    model: str
    command: str
    path: str
    outcome: str
    content: Any
    role: str
    purpose: str
    what: str


# What each model call of a task was for, as `hub log --task` says it (the `purpose` its record holds).
CALL_PURPOSES = {
    "implement": "writes the change",
    "implement-outlines": "writes the change (the files as outlines: the whole prompt did not fit)",
    "block-feedback": "answers again: some of its edits did not apply",
    "find-files": "names the files to change, from the repository map",
    "review": "reviews the change",
    "second-look": "looks again at its own review",
    "judge": "judges the change",
}


def call_purpose(purpose: str) -> str:
    """A model call's purpose in words: `reflection-2` is the model's second answer to failing
    acceptance commands, `agent-turn-5` the fifth turn of agent mode."""
    kind, _, n = purpose.rpartition("-")
    if kind == "reflection" and n.isdigit():
        return f"fixes what the acceptance commands reported (reflection {n})"
    if kind == "agent-turn" and n.isdigit():
        return f"agent turn {n}"
    return CALL_PURPOSES.get(purpose, purpose or "a call")


def due(
    contract: Contract | None, now: datetime, judge_configured: bool, report_waiting: bool = False
) -> tuple[str | None, str]:
    """The phase `hub next` runs for this contract, and why (None: nothing is due). Pure.

    `report_waiting`: a JUDGE_REPORT.json/.md lies in the handoff folder. Which phase runs from which
    state is the phase table's (`hub.phases.table`); what waits for whom is said here."""
    found = due_phase(Facts(contract, now, judge_configured, report_waiting))
    if found is not None:
        return found
    assert contract is not None  # with no task, promoting the backlog is always due
    status = contract["status"]
    if status in JUDGING:
        return (
            None,
            "waiting for the judge: write JUDGE_REPORT.json beside REVIEW_REQUEST.md, "
            f"then `hub report-judge --task {contract['task_id']}`",
        )
    if status == PENDING_REBUTTAL:
        return None, "waiting on a rebuttal: `hub rebut FILE`"
    if status == ERIK_CONSULTATION:
        return None, "halted: a person must read the halt file and run `hub resume --to STATE`"
    if status == MERGED:
        return None, "merged"
    return None, f"nothing runs from {status}"


def active_contract(ctx: Context) -> Contract | None:
    """The task's contract; None when there is none, or it was archived while being read."""
    try:
        return store.load(ctx.handoff.contract)
    except ContractInvalid:
        if ctx.handoff.contract.exists():
            raise
        return None


def judge_configured(ctx: Context) -> bool:
    return bool(ctx.config.judge.command or ctx.config.judge.backend)


def report_waiting(ctx: Context) -> bool:
    return ctx.handoff.judge_report_json.exists() or ctx.handoff.judge_report_md.exists()


def needs_person(ctx: Context, contract: Contract, phase: str | None, why: str) -> str | None:
    """What this task needs from a person right now, in one line (None: nothing)."""
    status = contract["status"]
    hand = ctx.handoff
    if status == ERIK_CONSULTATION:
        return f"halted: read {hand.halt_report}, then `hub resume --task {contract['task_id']} --to STATE`"
    if status == PENDING_REBUTTAL:
        return f"a rebuttal: `hub rebut --task {contract['task_id']} FILE`"
    if status == MERGED:
        try:
            return hand.cleanup_failed.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None  # cleaned up (or archived) meanwhile
    if phase is None and status in (PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS):
        return (
            f"a verdict: read {hand.review_request}, write {hand.judge_report_json}, "
            f"then `hub report-judge --task {contract['task_id']}`"
        )
    waiting = contract["handoff_data"].get("merge_wait")
    if waiting and status == REVIEW_COMPLETE:
        return f"{waiting}: commit or stash them (the merge is retried on every `hub next`)"
    return None


def free_task_slots(ctx: Context) -> tuple[int, list[str]]:
    """How many more tasks the backlog may start (limits.parallel_tasks), and the tasks holding slots.

    A task waiting on a person (a halt, a verdict, a rebuttal, a merge over local changes) holds no slot:
    it must not keep the rest of the backlog from the GPU."""
    busy = []
    for task_id in ctx.handoff_root.task_ids():
        bound = ctx.for_task(task_id)
        try:
            contract = store.load(bound.handoff.contract)
        except (OSError, ContractInvalid):
            continue
        if contract["status"] == MERGED:
            continue
        phase, why = due(contract, ctx.clock(), judge_configured(bound), report_waiting(bound))
        if needs_person(bound, contract, phase, why) is None:
            busy.append(task_id)
    return ctx.config.parallel_tasks - len(busy), busy


def _resume_targets(contract: Contract) -> dict[str, str]:
    # Here, not at the top: only a task waiting for a person has somewhere to resume to.
    from hub.phases.halts import resume_targets

    return resume_targets(contract)


def _call_in_flight(task_dir: Path) -> dict[str, Any] | None:
    # Here, not at the top: only a task with a phase running has a call to show.
    from hub.phases import live

    return live.read_call(task_dir / live.CALL_FILE)


def task_view(ctx: Context, contract: Contract | None = None) -> TaskView:
    """One task as `hub status` shows it (ctx bound to the task; its contract, when read already)."""
    hand = ctx.handoff
    if contract is None:
        contract = store.load(hand.contract)
    phase, why = due(contract, ctx.clock(), judge_configured(ctx), report_waiting(ctx))
    owner = handoff.lock_owner(hand)
    return {
        "task_id": contract["task_id"],
        "title": one_line(str(contract.get("title", ""))),
        "status": contract["status"],
        "status_reason": contract.get("status_reason"),
        "attempt": contract["attempt"],
        "worktree": contract["git"].get("worktree"),
        "branch": contract["git"].get("task_branch"),
        "next": {"phase": phase, "why": why},
        "needs_person": needs_person(ctx, contract, phase, why),
        "lease": contract.get("lock"),
        "lease_stale": owner is None and lease_stale(contract.get("lock")),
        "running": owner,
        "breaker": contract.get("breaker"),
        "cost": contract.get("cost", {}),
        "verdict": contract["handoff_data"].get("judge_verdict"),
        "reviewed_commit": contract["handoff_data"].get("reviewed_commit"),
        "last_transitions": contract["history"][-3:],
        "server_wait": contract["handoff_data"].get("server_wait") if owner else None,
        "call": _call_in_flight(hand.task_dir) if owner else None,
        "halt_file": str(hand.halt_report) if hand.halt_report.exists() else None,
        "stall_report": str(hand.stall_report) if hand.stall_report.exists() else None,
        # For an agent that cannot read the halt file: where `hub resume --to` can send the task.
        "resume_targets": _resume_targets(contract) if contract["status"] == ERIK_CONSULTATION else {},
    }


def lease_stale(lease: Lease | None) -> bool:
    """A lease whose holder (`host:pid`) is a process of this host that is gone: Ctrl-C or a kill
    ended the phase before it let go, and the next command recovers the task without waiting for it."""
    host, _, pid = str(lease.get("held_by") or "" if lease else "").rpartition(":")
    if host != handoff.hostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# The state `hub status` shows for a task whose contract is missing or cannot be read.
DAMAGED = "damaged"


def damage_line(ctx: Context, error: ContractInvalid | None) -> str:
    """What is wrong with the task's contract and what to do, in one line (error None: it is missing)."""
    return f"{_damage(ctx, error)}; {_damage_fix(ctx)}"


def _damage(ctx: Context, error: ContractInvalid | None) -> str:
    if error is None:
        return f"{ctx.handoff.contract} is missing"
    where = f"{error.json_path}: " if error.json_path not in ("", "$") else ""
    return f"{error.file}: {where}{error.problem}"


def _damage_fix(ctx: Context) -> str:
    return (
        f"restore it, or move {ctx.handoff.task_dir} out of tasks/ to drop the task (the other tasks go on)"
    )


def damaged_view(ctx: Context, error: ContractInvalid | None) -> TaskView:
    """A task whose contract is missing or damaged, as `hub status` shows it (issue 35: one empty or cut
    contract made `hub status` exit 1 and hide every other task; a deleted one hid its task)."""
    return {
        "task_id": str(ctx.task_id),
        "title": "",
        "status": DAMAGED,
        "status_reason": _damage(ctx, error),
        "attempt": 0,
        "worktree": None,
        "branch": None,
        "next": {"phase": None, "why": "nothing runs for it until its contract is restored"},
        "needs_person": _damage_fix(ctx),
        "lease": None,
        "lease_stale": False,
        "running": handoff.lock_owner(ctx.handoff),
        "breaker": None,
        "cost": {},
        "verdict": None,
        "reviewed_commit": None,
        "last_transitions": [],
        "server_wait": None,
        "call": None,
        "halt_file": None,
        "stall_report": None,
        "resume_targets": {},
    }


def _view_unless_archived(ctx: Context) -> TaskView | None:
    """task_view, or None for a task archived since it was listed (another run merged it meanwhile);
    a task whose contract cannot be read is shown as damaged."""
    try:
        return task_view(ctx)
    except ContractInvalid as exc:
        if ctx.handoff.contract.exists():
            return damaged_view(ctx, exc)
        return None


def _not_in_flight(ctx: Context) -> HubError:
    root = ctx.handoff_root
    archived = " (finished: see archive/)" if (root.archive / str(ctx.task_id)).is_dir() else ""
    return TaskChoice(
        f"no task {ctx.task_id} in flight{archived}; tasks: {', '.join(root.task_ids()) or 'none'}"
    )


def status(ctx: Context) -> StatusDoc:
    """Everything `hub status` shows, as one JSON-able document: `{"tasks": [...]}` (one task with
    `--task`), the handoff folder, and what runs when no task is active."""
    root = ctx.handoff_root
    if ctx.task_id and not ctx.handoff.contract.exists():
        raise _not_in_flight(ctx)
    ids = [ctx.task_id] if ctx.task_id else root.task_ids()
    tasks = [view for view in (_view_unless_archived(ctx.for_task(task_id)) for task_id in ids) if view]
    if not ctx.task_id:
        tasks += [damaged_view(ctx.for_task(task_id), None) for task_id in root.lost_ids()]
        tasks.sort(key=lambda view: view["task_id"])
    if ctx.task_id and not tasks:
        raise _not_in_flight(ctx)  # archived since the look above
    doc: StatusDoc = {"handoff": str(root.dir), "tasks": tasks}
    if not tasks:
        doc["next"] = idle_next(ctx)
    return doc


def idle_next(ctx: Context) -> str:
    """What `hub next` does with no active task: promote a ready backlog proposal (or block it, by the
    same decision promotion makes; it asks git only to name the closest file to a missing one), or
    nothing (then say how to start one, rather than suggest promoting a backlog that is empty)."""
    # Here, not at the top: `hub status` with a task under way never reads the backlog.
    from hub.phases.task_paths import why_blocked
    from hub.state.backlog import peek_next, proposal_to_fields

    entry, why = peek_next(ctx.handoff)
    if entry is not None:
        blocked = why_blocked(ctx.repo_root, proposal_to_fields(entry["content"]))
        if blocked is not None:
            return f"`hub next` blocks backlog proposal {entry['id']}: {blocked}"
        return f"`hub next` promotes backlog proposal {entry['id']} ({why})"
    start = "start a task: hub new --title T --requirement R --target FILE (or queue one: hub backlog add)"
    return f"nothing: {why}; {start}"


def log_entries(ctx: Context, task_id: str | None = None) -> list[LogEntry]:
    """Transitions (and, for one task, its provenance records) in order."""
    entries: list[LogEntry] = [
        {"kind": "transition", **line} for line in handoff.read_transitions(ctx.handoff, task_id)
    ]
    if task_id:
        # Here, not at the top: of the commands that import this module, only `hub log --task` needs it.
        from hub.state.provenance import read_records

        for record in read_records(ctx.handoff, task_id):
            entry: LogEntry = {"kind": "run", **record}
            if "purpose" in record:
                entry["what"] = call_purpose(record["purpose"])
            entries.append(entry)
        entries.sort(key=lambda e: (str(e.get("timestamp", "")), int(e.get("at_ns") or 0)))
    return entries
