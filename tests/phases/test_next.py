"""`hub next` in process: it runs the due phase, or nothing, and refuses a halted task."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from hub.errors import TaskHalted
from hub.phases.context import Context
from hub.phases.next import run_next

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver


def test_nothing_due_while_waiting_for_the_judge_is_exit_0_and_changes_nothing(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    before = task.hand.contract.read_bytes()
    outcome = run_next(ctx)
    assert outcome.exit_code == 0
    assert outcome.message.startswith("nothing to do: waiting for the judge")
    assert task.hand.contract.read_bytes() == before


def test_next_sets_up_a_new_task(task: TaskDriver, ctx: Context) -> None:
    task.new()
    outcome = run_next(ctx)
    assert outcome.data["ran"] == "setup-task"
    assert task.contract()["git"]["task_branch"] is not None


def test_next_finalizes_a_passed_task(task: TaskDriver, ctx: Context) -> None:
    task.to_review_complete("PASS")
    outcome = run_next(ctx)
    assert (outcome.data["ran"], outcome.to_state) == ("finalize-task", "merged")


def test_next_times_out_a_review_past_its_deadline(task: TaskDriver, ctx: Context, clock: Any) -> None:
    task.to_judge_review()
    clock.advance(hours=2)
    outcome = run_next(ctx)
    assert (outcome.data["ran"], outcome.exit_code) == ("timeout-judge", 4)


def test_next_finishes_a_verdict_a_killed_report_judge_recorded_but_did_not_apply(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    contract = task.record("review_started", "judge_complete")
    contract["handoff_data"]["judge_verdict"] = "FAIL"
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    outcome = run_next(ctx)
    assert (outcome.data["ran"], outcome.to_state) == ("report-judge", "pending_implementer")


def test_next_refuses_a_halted_task(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("CRITICAL_HALT")
    from hub.phases.judge import report_judge

    report_judge(ctx)
    with pytest.raises(TaskHalted, match="is halted"):
        run_next(ctx)


def test_next_archives_a_merged_task_left_in_place_by_a_killed_finalize(
    task: TaskDriver, ctx: Context
) -> None:
    task.new()
    contract = task.contract()
    contract["status"] = "merged"
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")

    assert run_next(ctx).message == "nothing to do: no active task and no backlog"

    assert not task.hand.contract.exists()
    assert (task.hand.archive / contract["task_id"] / "TASK_CONTRACT.json").exists()
