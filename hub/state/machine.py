"""The task's states, the events that move it, and the transition table. Pure: no I/O, no clock."""

from __future__ import annotations

from enum import StrEnum

from hub.core.errors import InvalidTransition


class State(StrEnum):
    """A task's state. A `StrEnum` so it equals (and is saved as) its plain string in the contract."""

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


class Event(StrEnum):
    """What moves a task from one state to the next (the edges of TABLE, plus halt and resume)."""

    LOCK_ACQUIRED = "lock_acquired"
    CODE_WRITTEN = "code_written"
    TIMEOUT = "timeout"
    STALL = "stall"
    INTERRUPTED = "interrupted"
    RETRY = "retry"
    ESCALATE = "escalate"
    LOCAL_PASS = "local_pass"
    LOCAL_WARN = "local_warn"
    CRITICAL_FLAW = "critical_flaw"
    REVIEW_STARTED = "review_started"
    JUDGE_COMPLETE = "judge_complete"
    PASS = "pass"
    FAIL_AGREE = "fail_agree"
    CONDITIONAL = "conditional"
    FAIL_DISAGREE = "fail_disagree"
    REBUTTAL_ACCEPTED = "rebuttal_accepted"
    REBUTTAL_LIMIT_EXCEEDED = "rebuttal_limit_exceeded"
    BRANCH_MOVED = "branch_moved"
    CIRCUIT_BREAKER_HALT = "circuit_breaker_halt"
    RESUME = "resume"


# Module-level names kept for the many rooms that import them.
PENDING_IMPLEMENTER = State.PENDING_IMPLEMENTER
IMPLEMENTATION_IN_PROGRESS = State.IMPLEMENTATION_IN_PROGRESS
TIMEOUT_IMPLEMENTER = State.TIMEOUT_IMPLEMENTER
PENDING_LOCAL_REVIEW = State.PENDING_LOCAL_REVIEW
PENDING_JUDGE_REVIEW = State.PENDING_JUDGE_REVIEW
JUDGE_REVIEW_IN_PROGRESS = State.JUDGE_REVIEW_IN_PROGRESS
TIMEOUT_JUDGE = State.TIMEOUT_JUDGE
REVIEW_COMPLETE = State.REVIEW_COMPLETE
PENDING_REBUTTAL = State.PENDING_REBUTTAL
ERIK_CONSULTATION = State.ERIK_CONSULTATION
MERGED = State.MERGED

STATES: tuple[State, ...] = tuple(State)

IN_PROGRESS_STATES = frozenset({IMPLEMENTATION_IN_PROGRESS, JUDGE_REVIEW_IN_PROGRESS})
TERMINAL_STATES = frozenset({MERGED})

# (state, event) -> new state. Blueprint V2's edges, plus `interrupted` for crash recovery,
# `fail_disagree` from pending_implementer (a rebuttal filed after report-judge applied the FAIL), and
# `branch_moved` (the task branch is no longer the commit the judge passed: it is reviewed again).
TABLE: dict[tuple[State, Event], State] = {
    (PENDING_IMPLEMENTER, Event.LOCK_ACQUIRED): IMPLEMENTATION_IN_PROGRESS,
    (IMPLEMENTATION_IN_PROGRESS, Event.CODE_WRITTEN): PENDING_LOCAL_REVIEW,
    (IMPLEMENTATION_IN_PROGRESS, Event.TIMEOUT): TIMEOUT_IMPLEMENTER,
    (IMPLEMENTATION_IN_PROGRESS, Event.STALL): TIMEOUT_IMPLEMENTER,
    (IMPLEMENTATION_IN_PROGRESS, Event.INTERRUPTED): PENDING_IMPLEMENTER,
    (TIMEOUT_IMPLEMENTER, Event.RETRY): PENDING_IMPLEMENTER,
    (TIMEOUT_IMPLEMENTER, Event.ESCALATE): ERIK_CONSULTATION,
    (PENDING_LOCAL_REVIEW, Event.LOCAL_PASS): PENDING_JUDGE_REVIEW,
    (PENDING_LOCAL_REVIEW, Event.LOCAL_WARN): PENDING_JUDGE_REVIEW,
    (PENDING_LOCAL_REVIEW, Event.CRITICAL_FLAW): ERIK_CONSULTATION,
    (PENDING_LOCAL_REVIEW, Event.STALL): PENDING_LOCAL_REVIEW,
    (PENDING_JUDGE_REVIEW, Event.REVIEW_STARTED): JUDGE_REVIEW_IN_PROGRESS,
    (JUDGE_REVIEW_IN_PROGRESS, Event.JUDGE_COMPLETE): REVIEW_COMPLETE,
    (JUDGE_REVIEW_IN_PROGRESS, Event.TIMEOUT): TIMEOUT_JUDGE,
    (JUDGE_REVIEW_IN_PROGRESS, Event.INTERRUPTED): PENDING_JUDGE_REVIEW,
    (TIMEOUT_JUDGE, Event.ESCALATE): ERIK_CONSULTATION,
    (REVIEW_COMPLETE, Event.PASS): MERGED,
    (REVIEW_COMPLETE, Event.FAIL_AGREE): PENDING_IMPLEMENTER,
    (REVIEW_COMPLETE, Event.CONDITIONAL): PENDING_IMPLEMENTER,
    (REVIEW_COMPLETE, Event.FAIL_DISAGREE): PENDING_REBUTTAL,
    (REVIEW_COMPLETE, Event.BRANCH_MOVED): PENDING_LOCAL_REVIEW,
    (PENDING_IMPLEMENTER, Event.FAIL_DISAGREE): PENDING_REBUTTAL,
    (PENDING_REBUTTAL, Event.REBUTTAL_ACCEPTED): PENDING_JUDGE_REVIEW,
    (PENDING_REBUTTAL, Event.REBUTTAL_LIMIT_EXCEEDED): ERIK_CONSULTATION,
}

# `circuit_breaker_halt` leaves any state but merged; `resume` leaves erik_consultation for a named state.
HALT_EVENT = Event.CIRCUIT_BREAKER_HALT
RESUME_EVENT = Event.RESUME
RESUMABLE_STATES = frozenset(STATES) - {ERIK_CONSULTATION, MERGED, *IN_PROGRESS_STATES}

EVENTS: tuple[Event, ...] = tuple(sorted(Event))


def transition(state: str, event: str, resume_to: str | None = None) -> State:
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
        return State(resume_to)
    try:
        return TABLE[(State(state), Event(event))]
    except (KeyError, ValueError):
        raise InvalidTransition(state, event) from None
