"""The judge hand-off in process: REVIEW_REQUEST.md out, JUDGE_REPORT in, verdicts applied; the review
timeout and rebuttals."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.errors import ContractInvalid, TaskHalted, WrongState, describe, exit_code_for
from hub.phases.context import Context
from hub.phases.judge import rebut, report_judge, timeout_judge

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver

ISSUE = {
    "id": "B1",
    "severity": "major",
    "file": "src/app.py",
    "line": 2,
    "description": "the greeting lacks its comma",
    "fix_required": "return 'hello, ' + name",
}


def events(contract: dict[str, Any]) -> list[str]:
    return [entry["event"] for entry in contract["history"]]


def test_entering_judge_review_writes_a_review_request_with_requirements_and_diff(task: TaskDriver) -> None:
    contract = task.to_judge_review()
    assert contract["status"] == "pending_judge_review"
    text = task.hand.review_request.read_text(encoding="utf-8")
    assert f"# Review request: {contract['task_id']}" in text
    assert "greet() says 'hello, NAME'" in text
    assert '+    return "hello, " + name' in text


def test_a_pass_verdict_from_pending_judge_review_claims_the_request_and_completes_the_review(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("PASS", usage={"prompt_tokens": 1200, "completion_tokens": 300, "model": "judge:1"})
    outcome = report_judge(ctx)
    contract = task.contract()
    assert (outcome.from_state, outcome.to_state, outcome.exit_code) == (
        "pending_judge_review",
        "review_complete",
        0,
    )
    assert contract["status"] == "review_complete"
    assert events(contract)[-2:] == ["review_started", "judge_complete"]
    assert contract["handoff_data"]["judge_verdict"] == "PASS"
    assert contract["cost"]["judge"]["tokens_in"] == 1200 and contract["cost"]["judge"]["tokens_out"] == 300
    assert contract["lock"] is None
    # The request and the report are set aside, not deleted: the folder is ready for the next round.
    hand = task.hand
    assert not hand.review_request.exists() and not hand.review_in_progress.exists()
    assert not hand.judge_report_json.exists()
    kept = sorted(p.name for p in hand.runs(contract["task_id"]).iterdir())
    assert any(name.endswith("-judge-report.json") for name in kept)
    assert any(name.endswith("-review-request.md") for name in kept)


def test_a_markdown_report_with_a_verdict_line_is_read_when_there_is_no_json(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE], markdown=True)
    report_judge(ctx)
    contract = task.contract()
    assert contract["handoff_data"]["judge_verdict"] == "FAIL"
    assert contract["handoff_data"]["judge_blocking_issues"][0]["description"] == ISSUE["description"]
    assert not task.hand.judge_report_md.exists()


def test_a_fail_sends_the_task_back_with_its_blocking_issues_and_the_next_attempt(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE])
    outcome = report_judge(ctx)
    contract = task.contract()
    assert outcome.to_state == contract["status"] == "pending_implementer"
    assert contract["attempt"] == 2
    assert contract["handoff_data"]["judge_blocking_issues"] == [ISSUE]
    assert contract["breaker"]["counters"]["review_cycles"] == 1
    assert events(contract)[-3:] == ["review_started", "judge_complete", "fail_agree"]
    assert contract["history"][-1]["attempt"] == 2


@pytest.mark.parametrize("markdown", [False, True])
def test_a_fail_with_no_blocking_issue_is_refused_naming_the_field_and_the_task_waits(
    task: TaskDriver, ctx: Context, markdown: bool
) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [], markdown=markdown)
    before = task.contract()
    with pytest.raises(ContractInvalid) as caught:
        report_judge(ctx)
    said = describe(caught.value)
    assert (
        "blocking_issues: a FAIL verdict with no blocking issue" in said
        and "fix: list what must change" in said
    )
    assert exit_code_for(caught.value) == 1
    after = task.contract()
    assert after["status"] == before["status"] == "pending_judge_review" and after["attempt"] == 1


def test_a_conditional_verdict_is_rework_too(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("CONDITIONAL", [ISSUE])
    report_judge(ctx)
    contract = task.contract()
    assert contract["status"] == "pending_implementer" and contract["attempt"] == 2
    assert events(contract)[-1] == "conditional"


def test_critical_halt_stops_the_task_for_a_person_with_exit_4_and_a_halt_file(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("CRITICAL_HALT", [{**ISSUE, "description": "deletes the database"}])
    outcome = report_judge(ctx)
    assert outcome.exit_code == 4 and outcome.to_state == "erik_consultation"
    contract = task.contract()
    assert contract["status"] == "erik_consultation"
    assert contract["breaker"]["status"] == "tripped" and contract["breaker"]["trigger"] == "critical_halt"
    halt = task.hand.halt_report.read_text(encoding="utf-8")
    assert "Trigger: `critical_halt`" in halt and "deletes the database" in halt
    assert "hub resume --to pending_implementer --note '<<REPLACE" in halt
    assert "--to review_complete" not in halt  # no PASS to merge: that would lead nowhere


def test_review_cycles_over_the_limit_halt_instead_of_another_rework(task: TaskDriver, ctx: Context) -> None:
    task.new()
    contract = task.contract()
    contract["limits"]["max_review_cycles"] = 2
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE])
    report_judge(ctx)
    assert task.contract()["status"] == "pending_implementer"
    task.to_judge_review(files={"src/app.py": "def greet(name):\n    return 'hi ' + name\n"})
    task.judge_report("FAIL", [ISSUE])
    outcome = report_judge(ctx)
    assert outcome.exit_code == 4
    contract = task.contract()
    assert contract["breaker"]["trigger"] == "review_cycles"
    assert contract["attempt"] == 2  # no third attempt was started
    assert "2 judge reviews without a PASS; the limit is 2" in task.hand.halt_report.read_text(
        encoding="utf-8"
    )


def test_an_unknown_verdict_is_refused_naming_the_file_and_field_and_changes_nothing(
    task: TaskDriver, ctx: Context, snapshot: Any
) -> None:
    task.to_judge_review()
    report = task.judge_report("SHIP_IT")
    before = snapshot(task.hand.dir)
    with pytest.raises(ContractInvalid) as caught:
        report_judge(ctx)
    assert caught.value.file == str(report)
    assert caught.value.json_path == "$.verdict"
    assert exit_code_for(caught.value) == 1
    after = snapshot(task.hand.dir)
    assert {k: v for k, v in after.items() if k != ".hub.lock"} == {
        k: v for k, v in before.items() if k != ".hub.lock"
    }


def test_a_malformed_judge_report_is_refused_naming_the_file(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.hand.judge_report_json.write_text('{"verdict": "PASS",', encoding="utf-8")
    with pytest.raises(ContractInvalid, match=r"JUDGE_REPORT\.json: \$: not valid JSON"):
        report_judge(ctx)
    assert task.contract()["status"] == "pending_judge_review"


@pytest.mark.parametrize("name", ["JUDGE_REPORT.json", "JUDGE_REPORT.md"])
def test_a_judge_report_that_is_not_utf8_is_refused_naming_the_file(
    task: TaskDriver, ctx: Context, name: str
) -> None:
    task.to_judge_review()
    (task.hand.task_dir / name).write_bytes(b'{"verdict": "PASS\xff"}\nVerdict: PASS\xff\n')
    with pytest.raises(ContractInvalid, match=rf"{name}: \$: not UTF-8 text \(byte \d+\)"):
        report_judge(ctx)
    assert task.contract()["status"] == "pending_judge_review"


def test_report_judge_without_a_report_says_where_it_looked(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    with pytest.raises(ContractInvalid, match=r"no JUDGE_REPORT\.json or JUDGE_REPORT\.md in"):
        report_judge(ctx)


def test_report_judge_before_the_review_is_requested_is_a_wrong_state(task: TaskDriver, ctx: Context) -> None:
    task.new()
    task.judge_report("PASS")
    with pytest.raises(WrongState, match="report-judge needs the task in") as caught:
        report_judge(ctx)
    assert exit_code_for(caught.value) == 3


def test_timeout_judge_before_the_deadline_is_refused(task: TaskDriver, ctx: Context, clock: Any) -> None:
    task.to_judge_review()
    clock.advance(minutes=60)  # exactly at the deadline: not past it
    with pytest.raises(WrongState, match="is not past its deadline"):
        timeout_judge(ctx)
    assert task.contract()["status"] == "pending_judge_review"


def test_timeout_judge_after_the_deadline_halts_the_review(
    task: TaskDriver, ctx: Context, clock: Any
) -> None:
    task.to_judge_review()
    clock.advance(minutes=60, seconds=1)
    outcome = timeout_judge(ctx)
    assert outcome.exit_code == 4
    contract = task.contract()
    assert events(contract)[-3:] == ["review_started", "timeout", "escalate"]
    assert contract["breaker"]["trigger"] == "judge_timeout"
    assert "hub resume --to pending_judge_review" in task.hand.halt_report.read_text(encoding="utf-8")


def test_a_rebuttal_of_a_fail_goes_back_to_the_judge_with_the_rebuttal_in_the_request(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE])
    report_judge(ctx)
    outcome = rebut(ctx, "The comma is there: see line 2.\n")
    contract = task.contract()
    assert outcome.to_state == contract["status"] == "pending_judge_review"
    assert contract["attempt"] == 1  # the rework that FAIL started is taken back
    assert events(contract)[-2:] == ["fail_disagree", "rebuttal_accepted"]
    assert contract["breaker"]["counters"]["rebuttals"] == 1
    assert task.hand.rebuttal.read_text(encoding="utf-8") == "The comma is there: see line 2.\n"
    assert "The comma is there: see line 2." in task.hand.review_request.read_text(encoding="utf-8")


def test_rebuttals_over_max_rebuttals_halt(task: TaskDriver, ctx: Context) -> None:
    task.new()
    contract = task.contract()
    contract["limits"]["max_rebuttals"] = 1
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE])
    report_judge(ctx)
    rebut(ctx, "first rebuttal")
    task.judge_report("FAIL", [ISSUE])
    report_judge(ctx)
    outcome = rebut(ctx, "second rebuttal")
    assert outcome.exit_code == 4
    contract = task.contract()
    assert contract["status"] == "erik_consultation"
    assert events(contract)[-2:] == ["fail_disagree", "rebuttal_limit_exceeded"]
    assert contract["breaker"]["trigger"] == "rebuttal_limit"


def test_a_rebuttal_needs_a_fail_to_answer_and_some_text(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [ISSUE])
    report_judge(ctx)
    with pytest.raises(WrongState, match="the rebuttal is empty"):
        rebut(ctx, "  \n")
    task.to_judge_review()
    task.judge_report("PASS")
    report_judge(ctx)
    with pytest.raises(WrongState, match="there is none to answer"):
        rebut(ctx, "but why")


def test_a_halted_task_refuses_report_judge_with_exit_4(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("CRITICAL_HALT")
    report_judge(ctx)
    task.judge_report("PASS")
    with pytest.raises(TaskHalted) as caught:
        report_judge(ctx)
    assert "hub resume --to STATE" in caught.value.hint
    assert exit_code_for(caught.value) == 4


# --- a report-judge killed between two of its transitions ------------------------------------------------


def _killed_after_judge_complete(task: TaskDriver, verdict: str) -> None:
    """What a SIGKILL after `judge_complete` was saved, and before the verdict's own edge, leaves."""
    task.to_judge_review()
    contract = task.record("review_started", "judge_complete")
    contract["handoff_data"]["judge_verdict"] = verdict
    contract["handoff_data"]["judge_blocking_issues"] = [ISSUE]
    contract["breaker"]["counters"]["review_cycles"] = 1
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")


def test_a_fail_interrupted_after_judge_complete_is_finished_by_the_next_report_judge(
    task: TaskDriver, ctx: Context
) -> None:
    _killed_after_judge_complete(task, "FAIL")
    report_judge(ctx)
    contract = task.contract()
    assert contract["status"] == "pending_implementer" and contract["attempt"] == 2
    assert contract["breaker"]["counters"]["review_cycles"] == 1  # not counted twice


def test_a_critical_halt_interrupted_after_judge_complete_halts_on_the_next_report_judge(
    task: TaskDriver, ctx: Context
) -> None:
    _killed_after_judge_complete(task, "CRITICAL_HALT")
    assert report_judge(ctx).exit_code == 4
    assert task.contract()["breaker"]["trigger"] == "critical_halt"


def test_report_judge_after_a_pass_points_at_finalize(task: TaskDriver, ctx: Context) -> None:
    task.to_review_complete("PASS")
    with pytest.raises(WrongState) as caught:
        report_judge(ctx)
    assert "finalize-task" in describe(caught.value)


def test_a_timeout_interrupted_before_its_escalation_is_finished_by_the_next_timeout_judge(
    task: TaskDriver, ctx: Context, clock: Any
) -> None:
    task.to_judge_review()
    task.record("review_started", "timeout")
    clock.advance(hours=2)
    assert timeout_judge(ctx).exit_code == 4
    assert events(task.contract())[-1] == "escalate"
