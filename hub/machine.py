"""The task's states, the events that move it, and the transition table. Pure: no I/O, no clock."""

from __future__ import annotations

from hub.errors import InvalidTransition

PENDING_IMPLEMENTER = "pending_implementer"
IMPLEMENTATION_IN_PROGRESS = "implementation_in_progress"
TIMEOUT_IMPLEMENTER = "timeout_implementer"
PENDING_LOCAL_REVIEW = "pending_local_review"
PENDING_JUDGE_REVIEW = "pending_judge_review"
JUDGE_REVIEW_IN_PROGRESS = "judge_review_in_progress"
TIMEOUT_JUDGE = "timeout_judge"
REVIEW_COMPLETE = "review_complete"
PENDING_REBUTTAL = "pending_rebuttal"
ERIK_CONSULTATION = "erik_consultation"
MERGED = "merged"

STATES: tuple[str, ...] = (
    PENDING_IMPLEMENTER,
    IMPLEMENTATION_IN_PROGRESS,
    TIMEOUT_IMPLEMENTER,
    PENDING_LOCAL_REVIEW,
    PENDING_JUDGE_REVIEW,
    JUDGE_REVIEW_IN_PROGRESS,
    TIMEOUT_JUDGE,
    REVIEW_COMPLETE,
    PENDING_REBUTTAL,
    ERIK_CONSULTATION,
    MERGED,
)

IN_PROGRESS_STATES = frozenset({IMPLEMENTATION_IN_PROGRESS, JUDGE_REVIEW_IN_PROGRESS})
TERMINAL_STATES = frozenset({MERGED})

# (state, event) -> new state. Blueprint V2's edges, plus `interrupted` for crash recovery,
# `fail_disagree` from pending_implementer (a rebuttal filed after report-judge applied the FAIL), and
# `branch_moved` (the task branch is no longer the commit the judge passed: it is reviewed again).
TABLE: dict[tuple[str, str], str] = {
    (PENDING_IMPLEMENTER, "lock_acquired"): IMPLEMENTATION_IN_PROGRESS,
    (IMPLEMENTATION_IN_PROGRESS, "code_written"): PENDING_LOCAL_REVIEW,
    (IMPLEMENTATION_IN_PROGRESS, "timeout"): TIMEOUT_IMPLEMENTER,
    (IMPLEMENTATION_IN_PROGRESS, "stall"): TIMEOUT_IMPLEMENTER,
    (IMPLEMENTATION_IN_PROGRESS, "interrupted"): PENDING_IMPLEMENTER,
    (TIMEOUT_IMPLEMENTER, "retry"): PENDING_IMPLEMENTER,
    (TIMEOUT_IMPLEMENTER, "escalate"): ERIK_CONSULTATION,
    (PENDING_LOCAL_REVIEW, "local_pass"): PENDING_JUDGE_REVIEW,
    (PENDING_LOCAL_REVIEW, "local_warn"): PENDING_JUDGE_REVIEW,
    (PENDING_LOCAL_REVIEW, "critical_flaw"): ERIK_CONSULTATION,
    (PENDING_LOCAL_REVIEW, "stall"): PENDING_LOCAL_REVIEW,
    (PENDING_JUDGE_REVIEW, "review_started"): JUDGE_REVIEW_IN_PROGRESS,
    (JUDGE_REVIEW_IN_PROGRESS, "judge_complete"): REVIEW_COMPLETE,
    (JUDGE_REVIEW_IN_PROGRESS, "timeout"): TIMEOUT_JUDGE,
    (JUDGE_REVIEW_IN_PROGRESS, "interrupted"): PENDING_JUDGE_REVIEW,
    (TIMEOUT_JUDGE, "escalate"): ERIK_CONSULTATION,
    (REVIEW_COMPLETE, "pass"): MERGED,
    (REVIEW_COMPLETE, "fail_agree"): PENDING_IMPLEMENTER,
    (REVIEW_COMPLETE, "conditional"): PENDING_IMPLEMENTER,
    (REVIEW_COMPLETE, "fail_disagree"): PENDING_REBUTTAL,
    (REVIEW_COMPLETE, "branch_moved"): PENDING_LOCAL_REVIEW,
    (PENDING_IMPLEMENTER, "fail_disagree"): PENDING_REBUTTAL,
    (PENDING_REBUTTAL, "rebuttal_accepted"): PENDING_JUDGE_REVIEW,
    (PENDING_REBUTTAL, "rebuttal_limit_exceeded"): ERIK_CONSULTATION,
}

# `circuit_breaker_halt` leaves any state but merged; `resume` leaves erik_consultation for a named state.
HALT_EVENT = "circuit_breaker_halt"
RESUME_EVENT = "resume"
RESUMABLE_STATES = frozenset(STATES) - {ERIK_CONSULTATION, MERGED, *IN_PROGRESS_STATES}

EVENTS: tuple[str, ...] = tuple(sorted({event for _, event in TABLE} | {HALT_EVENT, RESUME_EVENT}))


def transition(state: str, event: str, resume_to: str | None = None) -> str:
    """The state that `event` moves `state` to; InvalidTransition if the table has no such edge."""
    if state not in STATES:
        raise InvalidTransition(state, event)
    if event == HALT_EVENT:
        if state in TERMINAL_STATES or state == ERIK_CONSULTATION:
            raise InvalidTransition(state, event)
        return ERIK_CONSULTATION
    if event == RESUME_EVENT:
        if state != ERIK_CONSULTATION or resume_to not in RESUMABLE_STATES:
            raise InvalidTransition(state, event)
        return resume_to
    try:
        return TABLE[(state, event)]
    except KeyError:
        raise InvalidTransition(state, event) from None


def events_from(state: str) -> list[str]:
    """Every event the table accepts in `state` (for error messages and `hub status`)."""
    events = [event for (s, event) in TABLE if s == state]
    if state not in TERMINAL_STATES and state != ERIK_CONSULTATION:
        events.append(HALT_EVENT)
    if state == ERIK_CONSULTATION:
        events.append(RESUME_EVENT)
    return events
