"""Circuit breakers: each trips at its threshold and not one step below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hub.state import breakers
from hub.state.contract import iso
from hub.state.new_task import new_contract

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def contract(**counters: int) -> dict[str, Any]:
    c = new_contract(project="demo", title="t", requirements=["r"], now=NOW, roles={})
    c["breaker"]["counters"].update(counters)
    return c


def test_rebuttals_trip_once_the_limit_is_used_up() -> None:
    c = contract(rebuttals=1)
    c["limits"]["max_rebuttals"] = 2
    assert breakers.rebuttals_exceeded(c) is None
    c["breaker"]["counters"]["rebuttals"] = 2
    trip = breakers.rebuttals_exceeded(c)
    assert trip is not None and trip.trigger == "rebuttal_limit"
    assert trip.reason == "2 rebuttals filed; the limit is 2"


def test_zero_rebuttals_allowed_trips_on_the_first() -> None:
    c = contract()
    c["limits"]["max_rebuttals"] = 0
    assert breakers.rebuttals_exceeded(c) is not None


def test_review_cycles_trip_at_the_limit() -> None:
    c = contract(review_cycles=2)
    c["limits"]["max_review_cycles"] = 3
    assert breakers.review_cycles_exceeded(c) is None
    c["breaker"]["counters"]["review_cycles"] = 3
    trip = breakers.review_cycles_exceeded(c)
    assert trip is not None and trip.trigger == "review_cycles"
    assert trip.evidence == {"review_cycles": 3, "max_review_cycles": 3}


@pytest.mark.parametrize(
    ("added", "removed", "trips"),
    [(10, 10, False), (10, 11, True), (0, 1, True), (1, 0, False), (0, 0, False), (49, 51, True)],
)
def test_a_diff_trips_when_more_than_half_of_its_changed_lines_are_deletions(
    added: int, removed: int, trips: bool
) -> None:
    trip = breakers.destructive_diff(added, removed)
    assert (trip is not None) is trips
    if trip:
        assert trip.trigger == "destructive_diff" and trip.evidence == {"added": added, "removed": removed}


def test_a_destructive_diff_is_fine_when_deletion_is_allowed() -> None:
    assert breakers.destructive_diff(0, 100, delete_allowed=True) is None


def test_too_many_files_trips_above_the_limit_and_defaults_to_20() -> None:
    c = contract()
    assert breakers.too_many_files(c, 20) is None
    trip = breakers.too_many_files(c, 21)
    assert trip is not None and trip.reason == "21 files changed; the limit is 20"
    del c["limits"]["max_changed_files"]
    assert breakers.too_many_files(c, 20) is None and breakers.too_many_files(c, 21) is not None
    c["limits"]["max_changed_files"] = 3
    assert breakers.too_many_files(c, 3) is None and breakers.too_many_files(c, 4) is not None


def test_a_hash_loop_trips_only_on_content_an_earlier_attempt_was_failed_for() -> None:
    c = contract()
    c["attempt"] = 3
    c["handoff_data"]["attempts"] = [
        {"attempt": 1, "content_hash": "aaa", "verdict": "FAIL"},
        {"attempt": 2, "content_hash": "bbb", "verdict": None},
    ]
    assert breakers.hash_loop(c, "ccc") is None
    assert breakers.hash_loop(c, "bbb") is None  # never judged: not a loop yet
    trip = breakers.hash_loop(c, "aaa")
    assert trip is not None and trip.trigger == "hash_loop"
    assert trip.evidence["earlier_attempt"] == 1
    c["handoff_data"]["attempts"][0]["verdict"] = "CONDITIONAL"
    assert breakers.hash_loop(c, "aaa") is not None
    c["handoff_data"]["attempts"][0]["verdict"] = "PASS"
    assert breakers.hash_loop(c, "aaa") is None


def test_the_token_budget_trips_above_its_limit_counting_every_role_in_and_out() -> None:
    c = contract()
    c["limits"]["token_budget"] = 1000
    c["cost"] = {"implementer": {"tokens_in": 400, "tokens_out": 100}, "judge": {"tokens_in": 500}}
    assert breakers.budget_exceeded(c) is None
    c["cost"]["judge"]["tokens_out"] = 1
    trip = breakers.budget_exceeded(c)
    assert trip is not None and trip.trigger == "token_budget" and trip.evidence == {"tokens": 1001}


def test_the_cost_ceiling_trips_above_its_limit() -> None:
    c = contract()
    c["limits"].update(token_budget=None, cost_ceiling_usd=1.0)
    c["cost"] = {"judge": {"usd": 0.6}, "implementer": {"usd": 0.4}}
    assert breakers.budget_exceeded(c) is None
    c["cost"]["judge"]["usd"] = 0.61
    trip = breakers.budget_exceeded(c)
    assert trip is not None and trip.trigger == "cost_ceiling"


def test_budgets_set_to_none_never_trip() -> None:
    c = contract()
    c["limits"].update(token_budget=None, cost_ceiling_usd=None)
    c["cost"] = {"judge": {"tokens_in": 10**9, "usd": 10**6}}
    assert breakers.budget_exceeded(c) is None


def test_the_global_timeout_trips_only_after_the_deadline() -> None:
    c = contract()
    deadline = NOW + timedelta(hours=4)
    assert c["timestamps"]["deadline_at"] == iso(deadline)
    assert breakers.global_timeout(c, deadline) is None
    trip = breakers.global_timeout(c, deadline + timedelta(seconds=1))
    assert trip is not None and trip.trigger == "global_timeout"
    c["timestamps"]["deadline_at"] = None
    assert breakers.global_timeout(c, deadline + timedelta(days=9)) is None


def test_interruptions_trip_at_three_in_a_row() -> None:
    assert breakers.interruptions_exceeded(contract(interruptions=2)) is None
    trip = breakers.interruptions_exceeded(contract(interruptions=3))
    assert trip is not None and trip.trigger == "interruptions"


def test_before_phase_checks_budget_deadline_and_interruptions_in_that_order() -> None:
    c = contract(interruptions=3)
    late = NOW + timedelta(hours=5)
    assert breakers.before_phase(contract(), NOW) is None
    assert breakers.before_phase(c, NOW).trigger == "interruptions"  # type: ignore[union-attr]
    assert breakers.before_phase(c, late).trigger == "global_timeout"  # type: ignore[union-attr]
    c["cost"] = {"judge": {"tokens_in": 10**7}}
    assert breakers.before_phase(c, late).trigger == "token_budget"  # type: ignore[union-attr]


def test_after_implementation_checks_files_then_deletions_then_loops_then_budget() -> None:
    c = contract()
    c["handoff_data"]["attempts"] = [{"attempt": 1, "content_hash": "h", "verdict": "FAIL"}]
    assert breakers.after_implementation(c, 1, 5, 1, "new") is None
    assert breakers.after_implementation(c, 21, 0, 9, "h").trigger == "too_many_files"  # type: ignore[union-attr]
    assert breakers.after_implementation(c, 1, 0, 9, "h").trigger == "destructive_diff"  # type: ignore[union-attr]
    assert breakers.after_implementation(c, 1, 9, 0, "h").trigger == "hash_loop"  # type: ignore[union-attr]
    c["cost"] = {"implementer": {"tokens_out": 10**7}}
    assert breakers.after_implementation(c, 1, 9, 0, "x").trigger == "token_budget"  # type: ignore[union-attr]
