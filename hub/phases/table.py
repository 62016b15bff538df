"""The phase table: every phase `hub next` may run, in one place (`PHASES`).

Each row names the phase (its `hub` command), the function that runs it (by module path and attribute,
imported only when the phase runs, the way pip's `commands/__init__.py` names its commands), the states
`due()` runs it from, the `--help` line of its command, its clock in the contract's
`limits.timeout_minutes`, and when, in one of those states, it is the one due (`when`). From this table:
the CLI's phase commands (`hub.faces.cli`), `hub next`'s dispatch (`phase_function`), `due()`
(`hub.phases.status`), and the phase `hub_next` names in its answer.

Cheap to import (no phase module, no clock): `hub --help` reads it to list the commands.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal

from hub.state.machine import (
    IMPLEMENTATION_IN_PROGRESS,
    JUDGE_REVIEW_IN_PROGRESS,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    PENDING_LOCAL_REVIEW,
    REVIEW_COMPLETE,
    TIMEOUT_IMPLEMENTER,
    TIMEOUT_JUDGE,
)

if TYPE_CHECKING:
    from datetime import datetime

    # The phases' clocks, as the contract's `limits.timeout_minutes` names them.
    Clock = Literal["implementer", "local_review", "judge"]

    from hub.phases.outcome import Outcome
    from hub.state.contract import Contract


JUDGE_CLOCK: Final = "judge"


# Plain classes with slots, not NamedTuples: a NamedTuple compiles its class's code as it is defined,
# and this module is on every `hub status`'s path (issue 25: its start-up is counted).
class Facts:
    """What `due()` decides on: the task's contract (None: no task in flight) and what lies around it."""

    __slots__ = ("contract", "judge_configured", "now", "report_waiting")

    def __init__(
        self, contract: Contract | None, now: datetime, judge_configured: bool, report_waiting: bool
    ) -> None:
        self.contract, self.now, self.judge_configured = contract, now, judge_configured
        self.report_waiting = report_waiting  # a JUDGE_REPORT.json/.md lies in the task's folder


class Phase:
    """One row of the table (read, never changed)."""

    __slots__ = ("command", "help", "name", "options", "runs_from", "target", "timeout_key", "when")

    def __init__(
        self,
        name: str,  # the `hub` command, and what `due()` answers
        target: str,  # "module:function", imported when the phase runs
        runs_from: frozenset[str | None],  # the states `due()` runs it from (None: no task in flight)
        help: str,  # its command's --help line
        when: Callable[[Facts], str | None],  # in one of those states: why it is due, or None (not now)
        timeout_key: Clock | None = None,  # its clock: limits.timeout_minutes.<key> in the contract
        command: bool = True,  # a `hub` command of its own
        # Its command's options besides --task and --json: (flag, the function's keyword, help line).
        options: tuple[tuple[str, str, str], ...] = (),
    ) -> None:
        self.name, self.target, self.runs_from, self.help = name, target, runs_from, help
        self.when, self.timeout_key, self.command, self.options = when, timeout_key, command, options


def _verdict(facts: Facts) -> object:
    assert facts.contract is not None
    return facts.contract["handoff_data"].get("judge_verdict")


def _has_branch(facts: Facts) -> bool:
    assert facts.contract is not None
    return bool(facts.contract["git"].get("task_branch"))


def review_deadline(contract: Contract, judge_configured: bool) -> str | None:
    """When the judge's review runs out: limits.timeout_minutes.judge after the judge started. A judge
    outside the hub (a person, an agent) starts with the request; a configured one when run-judge starts
    it (issue 35: counted from the request, a task that waited in the queue, or across a sleep or a clock
    step, halted `judge_timeout` before any judge saw it). None: no judge is at work yet."""
    data = contract["handoff_data"]
    if not judge_configured:
        started = data.get("review_requested_at")
    elif contract["status"] == JUDGE_REVIEW_IN_PROGRESS:
        started = data.get("judge_started_at")
    else:
        started = None
    if not started:
        return None
    # Here, not at the top: `hub --help` reads this table, and only a review in flight has a deadline.
    from datetime import timedelta

    from hub.state.contract import iso, parse_iso

    minutes = contract["limits"]["timeout_minutes"][JUDGE_CLOCK]
    try:
        return iso(parse_iso(started) + timedelta(minutes=minutes))
    except ValueError:
        return None  # a damaged stamp is no deadline (see _deadline_passed)


def _deadline_passed(facts: Facts) -> str | None:
    assert facts.contract is not None
    return review_timed_out(facts.contract, facts.now, facts.judge_configured)


def review_timed_out(contract: Contract, now: datetime, judge_configured: bool) -> str | None:
    """Why the judge's review has run out of its clock (None: it has not)."""
    if contract["status"] == TIMEOUT_JUDGE:
        return "the judge timed out"
    if judge_configured:
        # run-judge holds the configured judge's clock itself, on its own process's monotonic clock; a
        # run-judge that died leaves the review to be run again, not timed out.
        return None
    from datetime import timedelta

    from hub.state.contract import elapsed

    waited = elapsed(
        contract["handoff_data"].get("review_requested_at"),
        now,
        contract["timestamps"].get("created_at"),
    )
    minutes = contract["limits"]["timeout_minutes"][JUDGE_CLOCK]
    if waited is None or waited <= timedelta(minutes=minutes):
        return None
    return f"the review passed its deadline {review_deadline(contract, False)}"


def _report_due(facts: Facts) -> str | None:
    assert facts.contract is not None
    if facts.contract["status"] == REVIEW_COMPLETE:
        # A report-judge that died between recording the verdict and applying it.
        verdict = _verdict(facts)
        return None if verdict == "PASS" else f"the {verdict} verdict is not applied yet"
    return "a judge report is waiting" if facts.report_waiting else None


def _merge_due(facts: Facts) -> str | None:
    assert facts.contract is not None
    if _verdict(facts) != "PASS":
        return None
    waiting = facts.contract["handoff_data"].get("merge_wait")
    return f"{waiting} (retried on every `hub next`)" if waiting else "the judge passed the task"


IMPLEMENTING = frozenset({PENDING_IMPLEMENTER, IMPLEMENTATION_IN_PROGRESS, TIMEOUT_IMPLEMENTER})
JUDGING = frozenset({PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS})

# In the order `due()` asks them: where two phases run from one state, the first whose `when` answers
# is due (a waiting judge report beats a passed deadline beats running the judge).
PHASES: tuple[Phase, ...] = (
    Phase(
        "promote-backlog",
        "hub.phases.promote:promote_next",
        frozenset({None}),
        "Promote the next ready backlog proposal into a task.",
        lambda facts: "no active task: promote the next ready backlog proposal",
        command=False,
    ),
    Phase(
        "setup-task",
        "hub.phases.setup:setup_task",
        IMPLEMENTING,
        "Create task/<task_id> from the base branch in the task's own worktree (your checkout is untouched).",
        lambda facts: None if _has_branch(facts) else "the task has no branch yet",
        options=(("--base", "base_branch", "Base branch (default: the current branch)."),),
    ),
    Phase(
        "run-implementer",
        "hub.phases.implement:run_implementer",
        IMPLEMENTING,
        "Have the local implementer model write the change.",
        lambda facts: "the implementer is due" if _has_branch(facts) else None,
        timeout_key="implementer",
    ),
    Phase(
        "run-local-review",
        "hub.phases.local_review:run_local_review",
        frozenset({PENDING_LOCAL_REVIEW}),
        "Run the static rules, the syntax check and the local reviewer model on the change.",
        lambda facts: "the local review is due",
        timeout_key="local_review",
    ),
    Phase(
        "report-judge",
        "hub.phases.judge:report_judge",
        JUDGING | {REVIEW_COMPLETE},
        "Apply the verdict in _handoff/tasks/<task_id>/JUDGE_REPORT.json (or JUDGE_REPORT.md).",
        _report_due,
        timeout_key=JUDGE_CLOCK,
    ),
    Phase(
        "timeout-judge",
        "hub.phases.judge:timeout_judge",
        JUDGING | {TIMEOUT_JUDGE},
        "Halt a judge review that has run past limits.timeout_minutes.judge.",
        _deadline_passed,
        timeout_key=JUDGE_CLOCK,
    ),
    Phase(
        "run-judge",
        "hub.phases.judge_runner:run_judge",
        JUDGING,
        "Run the configured judge (judge.command or judge.backend) on the review request; apply its verdict.",
        lambda facts: "a judge is configured" if facts.judge_configured else None,
        timeout_key=JUDGE_CLOCK,
    ),
    Phase(
        "finalize-task",
        "hub.phases.finalize:finalize_task",
        frozenset({REVIEW_COMPLETE}),
        "Merge the task branch into its base (--no-ff) after a PASS verdict.",
        _merge_due,
    ),
)

BY_NAME: dict[str, Phase] = {phase.name: phase for phase in PHASES}
PROMOTE = "promote-backlog"  # the phase of no task: `hub next` runs it before the tasks' own
SETUP = "setup-task"  # the phase that gives a task its branch (`hub next` knows when another run did)


def phase_function(name: str) -> Callable[..., Outcome]:
    """The function that runs phase `name`, its module imported now (and only now)."""
    module, _, attribute = BY_NAME[name].target.partition(":")
    function: Callable[..., Outcome] = getattr(importlib.import_module(module), attribute)
    return function


def due_phase(facts: Facts) -> tuple[str, str] | None:
    """The phase due for these facts and why, by the table; None: no phase runs from here now."""
    status = facts.contract["status"] if facts.contract is not None else None
    for phase in PHASES:
        if status in phase.runs_from:
            why = phase.when(facts)
            if why is not None:
                return phase.name, why
    return None
