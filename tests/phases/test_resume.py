"""`hub resume`: a person clears a halt and names the state the task goes to; halted tasks refuse
every other phase."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.errors import TaskHalted, WrongState, describe, exit_code_for
from hub.phases.context import Context
from hub.phases.finalize import finalize_task, resume
from hub.phases.judge import report_judge
from hub.phases.setup import setup_task

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver


def halted(task: TaskDriver, ctx: Context) -> dict[str, Any]:
    task.to_judge_review()
    task.judge_report("CRITICAL_HALT", [{"description": "secrets in the diff"}])
    report_judge(ctx)
    return task.contract()


def test_resume_clears_the_halt_and_moves_the_task_to_the_named_state(task: TaskDriver, ctx: Context) -> None:
    before = halted(task, ctx)
    outcome = resume(ctx, "pending_judge_review", "removed the secret by hand")
    contract = task.contract()
    assert (outcome.from_state, outcome.to_state) == ("erik_consultation", "pending_judge_review")
    assert contract["status"] == "pending_judge_review"
    assert contract["breaker"] == {**before["breaker"], "status": "closed", "trigger": None, "reason": None}
    assert "halt" not in contract["handoff_data"]
    assert contract["handoff_data"]["resume_notes"] == ["removed the secret by hand"]
    assert contract["history"][-1]["event"] == "resume"
    assert contract["history"][-1]["reason"] == "resumed by a person: removed the secret by hand"
    assert contract["attempt"] == before["attempt"]
    # The halt file is kept with the task's runs, not deleted.
    assert not task.hand.halt_report.exists()
    kept = [p.name for p in task.hand.runs(contract["task_id"]).glob("*-halt.md")]
    assert len(kept) == 1


def test_resuming_to_the_implementer_starts_the_next_attempt(task: TaskDriver, ctx: Context) -> None:
    halted(task, ctx)
    resume(ctx, "pending_implementer")
    contract = task.contract()
    assert contract["status"] == "pending_implementer" and contract["attempt"] == 2
    assert contract["history"][-1]["reason"] == "resumed by a person"


def test_resume_clears_the_stall_and_interruption_counters_but_keeps_review_cycles(
    task: TaskDriver, ctx: Context
) -> None:
    halted(task, ctx)
    contract = task.contract()
    contract["breaker"]["counters"].update(stall_strikes=2, interruptions=3, review_cycles=1)
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    resume(ctx, "pending_local_review")
    assert task.contract()["breaker"]["counters"] == {"review_cycles": 1}


def test_resume_refuses_a_state_that_leads_nowhere_naming_those_that_do_and_changes_nothing(
    task: Any, ctx: Context
) -> None:
    halted(task, ctx)  # a CRITICAL_HALT verdict: there is no PASS to merge
    before = task.hand.contract.read_bytes()
    with pytest.raises(WrongState, match="to review_complete would lead nowhere") as caught:
        resume(ctx, "review_complete")
    assert "pending_judge_review: the work on the task branch goes to the judge" in describe(caught.value)
    assert task.hand.contract.read_bytes() == before


def test_the_note_placeholder_of_the_halt_file_is_refused_and_changes_nothing(
    task: Any, ctx: Context
) -> None:
    from hub.core.errors import HubError
    from hub.phases.halts import NOTE_PLACEHOLDER

    halted(task, ctx)
    before = task.hand.contract.read_bytes()
    with pytest.raises(HubError, match="still holds the halt file's placeholder"):
        resume(ctx, "pending_implementer", NOTE_PLACEHOLDER)
    assert task.hand.contract.read_bytes() == before


def test_resuming_to_the_judge_writes_a_fresh_review_request(task: Any, ctx: Context) -> None:
    halted(task, ctx)
    task.hand.review_request.unlink(missing_ok=True)
    task.hand.review_in_progress.unlink(missing_ok=True)
    resume(ctx, "pending_judge_review")
    assert "src/app.py" in task.hand.review_request.read_text(encoding="utf-8")


@pytest.mark.parametrize("target", ["implementation_in_progress", "merged", "erik_consultation", "nowhere"])
def test_resume_refuses_a_state_a_person_cannot_name_and_changes_nothing(
    task: TaskDriver, ctx: Context, target: str
) -> None:
    halted(task, ctx)
    before = task.hand.contract.read_bytes()
    with pytest.raises(WrongState, match=f"cannot resume to '{target}'") as caught:
        resume(ctx, target)
    assert describe(caught.value).startswith(
        f"cannot resume to '{target}'; fix: choose one of pending_implementer"
    )
    said = describe(caught.value)
    assert "timeout_" not in said and "pending_rebuttal" not in said  # lead nowhere
    assert task.hand.contract.read_bytes() == before
    assert task.hand.halt_report.exists()


def test_resume_when_nothing_is_halted_is_a_wrong_state(task: TaskDriver, ctx: Context) -> None:
    task.new()
    with pytest.raises(WrongState, match="resume needs the task in erik_consultation") as caught:
        resume(ctx, "pending_implementer")
    assert exit_code_for(caught.value) == 3


def test_a_halted_task_refuses_other_phases_with_exit_4_naming_the_halt_file(
    task: TaskDriver, ctx: Context
) -> None:
    halted(task, ctx)
    for phase in (setup_task, finalize_task, report_judge):
        with pytest.raises(TaskHalted) as caught:
            phase(ctx)
        assert exit_code_for(caught.value) == 4
        assert str(task.hand.halt_report) in describe(caught.value)


def test_resume_to_a_state_that_does_not_exist_is_a_usage_error_exit_2(hub: HubRunner) -> None:
    done = hub("resume", "--to", "bogus")

    assert done.returncode == 2, done.stderr
    assert "cannot resume to 'bogus'; fix: choose one of pending_implementer" in done.stderr
