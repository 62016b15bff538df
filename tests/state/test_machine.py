"""The transition table: every edge of the plan works, every other (state, event) pair is refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hub.core.errors import EXIT_WRONG_STATE, InvalidTransition, WrongState, exit_code_for
from hub.state import machine
from hub.state.machine import (
    ERIK_CONSULTATION,
    EVENTS,
    HALT_EVENT,
    MERGED,
    RESUMABLE_STATES,
    RESUME_EVENT,
    STATES,
    TABLE,
    Event,
    transition,
)

# The plan's edges (shared/ARCHITECTURE.md, "States"), written out again so a change to the table that
# drops one of them fails here rather than in a task at 3 a.m.
PLAN_EDGES = {
    ("pending_implementer", "lock_acquired"): "implementation_in_progress",
    ("implementation_in_progress", "code_written"): "pending_local_review",
    ("implementation_in_progress", "timeout"): "timeout_implementer",
    ("implementation_in_progress", "stall"): "timeout_implementer",
    ("implementation_in_progress", "interrupted"): "pending_implementer",
    ("timeout_implementer", "retry"): "pending_implementer",
    ("timeout_implementer", "escalate"): "erik_consultation",
    ("pending_local_review", "local_pass"): "pending_judge_review",
    ("pending_local_review", "local_warn"): "pending_judge_review",
    ("pending_local_review", "critical_flaw"): "erik_consultation",
    ("pending_judge_review", "review_started"): "judge_review_in_progress",
    ("judge_review_in_progress", "judge_complete"): "review_complete",
    ("judge_review_in_progress", "timeout"): "timeout_judge",
    ("judge_review_in_progress", "interrupted"): "pending_judge_review",
    ("timeout_judge", "escalate"): "erik_consultation",
    ("review_complete", "pass"): "merged",
    ("review_complete", "fail_agree"): "pending_implementer",
    ("review_complete", "conditional"): "pending_implementer",
    ("review_complete", "fail_disagree"): "pending_rebuttal",
    ("pending_rebuttal", "rebuttal_accepted"): "pending_judge_review",
    ("pending_rebuttal", "rebuttal_limit_exceeded"): "erik_consultation",
}


# Edges the table adds to the plan, each explained in hub/state/machine.py.
EXTRA_EDGES = {
    ("pending_implementer", "fail_disagree"): "pending_rebuttal",
    ("pending_local_review", "stall"): "pending_local_review",
    ("review_complete", "branch_moved"): "pending_local_review",
}
ORACLE = PLAN_EDGES | EXTRA_EDGES


def expected(state: str, event: str) -> str | None:
    """The independent oracle: the written-out edges plus the halt edge; None where there is no edge."""
    if event == HALT_EVENT:
        return None if state in (MERGED, ERIK_CONSULTATION) else ERIK_CONSULTATION
    return ORACLE.get((state, event))


def test_every_edge_of_the_plan_is_in_the_table_and_moves_the_task_where_the_plan_says() -> None:
    for (state, event), target in PLAN_EDGES.items():
        assert transition(state, event) == target, (state, event)


def test_the_table_holds_the_plan_plus_only_the_documented_extra_edges() -> None:
    assert TABLE == ORACLE


@pytest.mark.parametrize(("state", "event"), sorted(TABLE))
def test_each_table_edge_applies(state: str, event: str) -> None:
    assert transition(state, event) == TABLE[(state, event)]


@pytest.mark.parametrize("state", STATES)
def test_every_pair_without_an_edge_raises_invalid_transition_naming_event_and_state(state: str) -> None:
    for event in EVENTS:
        if event == RESUME_EVENT or expected(state, event) is not None:
            continue
        with pytest.raises(InvalidTransition) as caught:
            transition(state, event)
        assert str(caught.value) == f"Cannot {event} from {state}"
        assert (caught.value.state, caught.value.event) == (state, event)


def test_invalid_transition_is_a_wrong_state_error_with_exit_code_3() -> None:
    error = InvalidTransition("merged", "pass")
    assert isinstance(error, WrongState)
    assert exit_code_for(error) == EXIT_WRONG_STATE == 3


@pytest.mark.parametrize("state", sorted(set(STATES) - {MERGED, ERIK_CONSULTATION}))
def test_a_circuit_breaker_halt_leaves_any_live_state_for_erik_consultation(state: str) -> None:
    assert transition(state, HALT_EVENT) == ERIK_CONSULTATION


@pytest.mark.parametrize("state", [MERGED, ERIK_CONSULTATION])
def test_a_merged_or_already_halted_task_cannot_halt(state: str) -> None:
    with pytest.raises(InvalidTransition, match=f"Cannot {HALT_EVENT} from {state}"):
        transition(state, HALT_EVENT)


@pytest.mark.parametrize("target", sorted(RESUMABLE_STATES))
def test_resume_moves_a_halted_task_to_the_state_a_person_names(target: str) -> None:
    assert transition(ERIK_CONSULTATION, RESUME_EVENT, resume_to=target) == target


def test_resume_refuses_in_progress_terminal_halted_unknown_or_missing_targets() -> None:
    for target in [*machine.IN_PROGRESS_STATES, MERGED, ERIK_CONSULTATION, "nowhere", None]:
        with pytest.raises(InvalidTransition, match=f"Cannot resume from {ERIK_CONSULTATION}"):
            transition(ERIK_CONSULTATION, RESUME_EVENT, resume_to=target)


@pytest.mark.parametrize("state", sorted(set(STATES) - {ERIK_CONSULTATION}))
def test_resume_is_refused_from_any_state_but_erik_consultation(state: str) -> None:
    with pytest.raises(InvalidTransition, match=f"Cannot resume from {state}"):
        transition(state, RESUME_EVENT, resume_to="pending_implementer")


def test_an_unknown_state_or_event_is_refused() -> None:
    with pytest.raises(InvalidTransition, match="Cannot lock_acquired from pending_everything"):
        transition("pending_everything", "lock_acquired")
    with pytest.raises(InvalidTransition, match="Cannot explode from pending_implementer"):
        transition("pending_implementer", "explode")
    with pytest.raises(InvalidTransition):
        transition("pending_everything", HALT_EVENT)


def test_merged_is_terminal(events_from: Callable[[str], list[Event]]) -> None:
    assert events_from(MERGED) == []
    for event in EVENTS:
        with pytest.raises(InvalidTransition):
            transition(MERGED, event, resume_to="pending_implementer")


@pytest.mark.parametrize("state", STATES)
def test_events_from_lists_exactly_the_events_that_transition_accepts(
    state: str, events_from: Callable[[str], list[Event]]
) -> None:
    accepted = set()
    for event in EVENTS:
        try:
            transition(state, event, resume_to="pending_implementer")
        except InvalidTransition:
            continue
        accepted.add(event)
    assert set(events_from(state)) == accepted


def test_no_state_but_merged_is_a_dead_end(events_from: Callable[[str], list[Event]]) -> None:
    # No state other than merged is a dead end: a task can always be halted or resumed.
    for state in STATES:
        assert events_from(state) or state == MERGED, state


def test_in_progress_states_each_have_an_interrupted_edge_back_to_their_pending_state() -> None:
    assert transition("implementation_in_progress", "interrupted") == "pending_implementer"
    assert transition("judge_review_in_progress", "interrupted") == "pending_judge_review"
    assert {s for (s, e) in TABLE if e == "interrupted"} == set(machine.IN_PROGRESS_STATES)
