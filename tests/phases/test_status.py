"""`hub status` and `hub log` as documents, and `due`: what `hub next` runs in each state."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from hub.phases.context import Context
from hub.phases.status import due, log_entries, status
from hub.state.contract import iso
from hub.state.handoff import phase_lock
from hub.state.new_task import new_contract

from .conftest import archived_at_the_next_read

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def contract_in(state: str, **data: Any) -> dict[str, Any]:
    contract = new_contract(project="demo", title="t", requirements=["r"], now=NOW, roles={})
    contract["status"] = state
    contract["git"]["task_branch"] = "task/x"
    contract["handoff_data"].update(data)
    return contract


@pytest.mark.parametrize(
    ("state", "data", "judge", "phase"),
    [
        ("pending_implementer", {}, False, "run-implementer"),
        ("implementation_in_progress", {}, False, "run-implementer"),
        ("timeout_implementer", {}, False, "run-implementer"),
        ("pending_local_review", {}, False, "run-local-review"),
        ("pending_judge_review", {}, False, None),
        ("pending_judge_review", {}, True, "run-judge"),
        ("judge_review_in_progress", {}, False, None),
        ("timeout_judge", {}, False, "timeout-judge"),
        ("review_complete", {"judge_verdict": "PASS"}, False, "finalize-task"),
        ("review_complete", {"judge_verdict": "FAIL"}, False, "report-judge"),
        ("pending_rebuttal", {}, False, None),
        ("erik_consultation", {}, True, None),
        ("merged", {}, True, None),
    ],
)
def test_due_names_the_phase_each_state_needs(
    state: str, data: dict[str, Any], judge: bool, phase: str
) -> None:
    assert due(contract_in(state, **data), NOW, judge)[0] == phase


def test_due_sets_up_a_task_without_a_branch_and_promotes_the_backlog_without_a_task() -> None:
    contract = contract_in("pending_implementer")
    contract["git"]["task_branch"] = None
    assert due(contract, NOW, False)[0] == "setup-task"
    assert due(None, NOW, False)[0] == "promote-backlog"


def test_due_times_out_a_review_by_a_judge_outside_the_hub_only_after_its_deadline() -> None:
    contract = contract_in("pending_judge_review", review_requested_at=iso(NOW))
    assert due(contract, NOW + timedelta(minutes=60), False)[0] is None
    phase, why = due(contract, NOW + timedelta(minutes=60, seconds=1), False)
    assert phase == "timeout-judge" and "2026-05-01T13:00:00Z" in why


@pytest.mark.parametrize("state", ["pending_judge_review", "judge_review_in_progress"])
def test_due_runs_a_configured_judge_however_long_the_task_waited_for_it(state: str) -> None:
    # Issue 35: in the queue, across a laptop's sleep or a clock step; the judge's clock is its own run's.
    contract = contract_in(state, review_requested_at=iso(NOW), judge_started_at=iso(NOW))
    assert due(contract, NOW + timedelta(days=3), True)[0] == "run-judge"


@pytest.mark.parametrize(
    "requested",
    [NOW + timedelta(hours=5), NOW - timedelta(days=400)],
    ids=["in the future", "before the task was created"],
)
def test_due_takes_a_request_time_the_clock_cannot_have_measured_as_no_timeout(
    requested: datetime,
) -> None:
    contract = contract_in("pending_judge_review", review_requested_at=iso(requested))
    assert due(contract, NOW + timedelta(hours=2), False)[0] is None


def test_status_without_a_task_says_so(ctx: Context) -> None:
    doc = status(ctx)
    assert doc["tasks"] == [] and doc["handoff"] == str(ctx.handoff.dir)


def test_status_shows_state_attempt_branch_last_three_transitions_and_what_runs_next(
    task: TaskDriver, ctx: Context
) -> None:
    contract = task.to_judge_review()
    (doc,) = status(ctx)["tasks"]
    assert doc["worktree"] == contract["git"]["worktree"]
    assert doc["needs_person"] is not None and "a verdict" in doc["needs_person"]
    assert (doc["task_id"], doc["status"], doc["attempt"]) == (contract["task_id"], "pending_judge_review", 1)
    assert doc["branch"] == contract["git"]["task_branch"]
    assert [t["event"] for t in doc["last_transitions"]] == ["lock_acquired", "code_written", "local_pass"]
    assert doc["next"]["phase"] is None and "JUDGE_REPORT.json" in doc["next"]["why"]
    assert doc["halt_file"] is None and doc["running"] is None
    assert doc["breaker"]["status"] == "closed"


def test_status_shows_who_holds_the_lock_and_the_halt_file(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("CRITICAL_HALT")
    from hub.phases.judge import report_judge

    report_judge(ctx)
    with phase_lock(ctx.handoff, "report-judge", NOW):
        (doc,) = status(ctx)["tasks"]
    assert doc["running"]["phase"] == "report-judge"
    assert doc["halt_file"] == str(ctx.handoff.halt_report)
    assert doc["breaker"]["trigger"] == "critical_halt"


def test_status_changes_nothing(task: TaskDriver, ctx: Context, snapshot: Any) -> None:
    task.to_judge_review()
    before = snapshot(ctx.handoff.dir)
    status(ctx)
    log_entries(ctx)
    assert snapshot(ctx.handoff.dir) == before


def test_the_log_lists_every_transition_in_order(task: TaskDriver, ctx: Context) -> None:
    contract = task.to_review_complete("PASS")
    entries = log_entries(ctx)
    assert [e["event"] for e in entries] == [h["event"] for h in contract["history"]]
    assert all(e["kind"] == "transition" and e["task_id"] == contract["task_id"] for e in entries)
    assert [e["event"] for e in log_entries(ctx, "another-task")] == []


def test_status_does_not_show_a_killed_phase_as_running(task: TaskDriver, ctx: Context) -> None:
    task.new()
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait(timeout=30)
    owner = {"pid": gone.pid, "host": socket.gethostname(), "phase": "setup-task", "since": iso(NOW)}
    ctx.handoff.lock_owner.write_text(json.dumps(owner), encoding="utf-8")
    assert status(ctx)["tasks"][0]["running"] is None


def test_status_marks_a_lease_whose_process_is_gone_as_stale_and_a_live_ones_not(
    task: TaskDriver, ctx: Context
) -> None:
    from hub.faces.cli_plain import render_status
    from hub.state.handoff import hostname

    task.new()
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait(timeout=30)
    lease = {"held_by": f"{hostname()}:{gone.pid}", "acquired_at": iso(NOW), "expires_at": iso(NOW)}
    contract = task.contract()
    contract["lock"] = lease
    ctx.handoff.contract.write_text(json.dumps(contract), encoding="utf-8")

    doc = status(ctx)
    assert doc["tasks"][0]["lease_stale"] is True
    assert "STALE: that process is gone; the next `hub next` recovers the task" in render_status(doc)

    contract["lock"] = {**lease, "held_by": f"{hostname()}:{os.getpid()}"}
    ctx.handoff.contract.write_text(json.dumps(contract), encoding="utf-8")
    assert status(ctx)["tasks"][0]["lease_stale"] is False


def test_status_lists_every_task_and_what_each_needs_from_a_person(task: Any, ctx: Context) -> None:
    first = task.to_judge_review()["task_id"]
    from hub.phases.setup import create

    second = str(create(ctx, {"title": "Second", "requirements": ["r"], "target_file": "README.md"}).task_id)
    doc = status(ctx)
    assert [t["task_id"] for t in doc["tasks"]] == sorted([first, second])
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert by_id[second]["next"]["phase"] == "setup-task" and by_id[second]["needs_person"] is None
    assert "a verdict" in by_id[first]["needs_person"]
    assert [t["task_id"] for t in status(ctx.for_task(second))["tasks"]] == [second]
    from hub.core.errors import TaskChoice

    with pytest.raises(TaskChoice, match="no task nope in flight"):
        status(ctx.for_task("nope"))


def test_the_command_status_names_as_next_runs_when_several_tasks_are_in_flight(
    task: Any, ctx: Context
) -> None:
    # Without --task a phase command exits 2 once two tasks fit; the command shown must be the one to run.
    first = task.new()
    from hub.faces.cli_plain import render_status
    from hub.phases.setup import create
    from hub.phases.status_md import render_status_md

    second = str(create(ctx, {"title": "Second", "requirements": ["r"], "target_file": "README.md"}).task_id)
    doc = status(ctx)
    text, md = render_status(doc), render_status_md(doc)
    for task_id in (first, second):
        assert f"next     hub setup-task --task {task_id}  (" in text
        assert f"- Next: `hub setup-task --task {task_id}` (" in md


def test_with_no_task_and_an_empty_backlog_status_says_how_to_start_instead_of_promoting(
    ctx: Context, task: Any
) -> None:
    from hub.phases.status import status
    from hub.state import backlog

    assert status(ctx)["next"].startswith("nothing: no proposals in the backlog; start a task: hub new")
    later = "# Later\n\nTarget: src/app.py\n\n## Requirements\n\n- r\n"
    backlog.add_tasks(ctx.handoff, ctx.clock, [{"id": "later", "content": later}])
    before = ctx.handoff.backlog.read_bytes()
    assert status(ctx)["next"].startswith("`hub next` promotes backlog proposal later")
    assert ctx.handoff.backlog.read_bytes() == before


def test_status_names_the_proposal_hub_next_blocks_as_blocked_not_as_promoted(ctx: Context) -> None:
    from hub.phases.next import run_next
    from hub.state import backlog

    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [
            {"id": "typo", "content": "Greet\nTarget: src/app.py\nSource: src/ap.py", "priority": 1},
            {"id": "outside", "content": "Greet\nTarget: ../app.py", "priority": 2},
        ],
    )
    for backlog_id, says in (
        ("typo", "did you mean src/app.py?"),
        ("outside", "is not inside the repository"),
    ):
        shown = status(ctx)["next"]
        assert shown.startswith(f"`hub next` blocks backlog proposal {backlog_id}: ") and says in shown
        reason = shown.split(": ", 1)[1]
        assert run_next(ctx).message == f"backlog task {backlog_id} blocked: {reason}"
        assert not ctx.handoff.contract.exists()
    assert status(ctx)["next"].startswith("nothing: no proposals in the backlog")


def test_status_leaves_out_a_task_archived_while_it_is_read(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    task.to_judge_review()
    archived_at_the_next_read(monkeypatch, ctx, task.contract()["task_id"])
    assert status(ctx)["tasks"] == []


def test_status_of_a_named_task_archived_while_it_is_read_says_where_it_went(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.core.errors import TaskChoice

    task.to_judge_review()
    task_id = task.contract()["task_id"]
    archived_at_the_next_read(monkeypatch, ctx, task_id)
    with pytest.raises(TaskChoice, match=f"no task {task_id} in flight \\(finished: see archive/\\)"):
        status(ctx.for_task(task_id))


def test_with_two_tasks_waiting_for_a_verdict_the_command_each_names_is_one_that_runs(
    task: Any, ctx: Context, hub: Any
) -> None:
    import re
    import shlex

    from hub.phases.setup import create

    first = task.to_judge_review()["task_id"]
    second = str(create(ctx, {"title": "Second", "requirements": ["r"], "target_file": "README.md"}).task_id)
    type(task)(ctx.for_task(second)).to_judge_review({"README.md": "# changed\n"})
    needs = {t["task_id"]: t["needs_person"] for t in status(ctx)["tasks"]}
    assert needs[second] and "a verdict" in needs[second]
    found = re.search(r"`(hub report-judge[^`]*)`", needs[first] or "")
    assert found, needs[first]
    type(task)(ctx.for_task(first)).judge_report("PASS")

    done = hub(*shlex.split(found.group(1))[1:])

    assert done.returncode == 0, done.stderr
    assert {t["task_id"]: t["status"] for t in status(ctx)["tasks"]} == {
        first: "review_complete",
        second: "pending_judge_review",
    }
