"""`hub next` in process: it runs the due phase, or nothing, and refuses a halted task."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.errors import TaskHalted
from hub.phases.context import Context
from hub.phases.finalize import archive_merged
from hub.phases.judge import report_judge
from hub.phases.next import due_jobs, run_concurrently, run_next, run_until_idle
from hub.state import store

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, archived_at_the_next_read, git

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


def test_a_next_that_lost_the_race_to_apply_a_pass_has_nothing_to_do(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("PASS")
    jobs, _ = due_jobs(ctx)  # this run decides on report-judge ...
    assert [phase for _, phase, _ in jobs] == ["report-judge"]
    report_judge(ctx)  # ... and another run applies the verdict first

    (outcome,) = run_concurrently(jobs, parallel=1)

    assert outcome.exit_code == 0
    assert "another run moved the task" in outcome.message
    assert task.contract()["status"] == "review_complete"


def test_a_next_that_lost_the_race_to_a_finalize_has_nothing_to_do_and_leaves_no_folder(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.state import handoff

    task.to_review_complete("PASS")
    folder = task.hand.task_dir
    jobs, _ = due_jobs(ctx)  # this run decides on finalize-task, finds the task, goes for its lock ...
    assert [phase for _, phase, _ in jobs] == ["finalize-task"]
    lock = handoff.phase_lock

    def merged_first(*args: Any) -> Any:  # ... and another run merges and archives it just before
        monkeypatch.setattr(handoff, "phase_lock", lock)
        assert run_next(ctx).to_state == "merged"
        return lock(*args)

    monkeypatch.setattr(handoff, "phase_lock", merged_first)
    (outcome,) = run_concurrently(jobs, parallel=1)

    assert outcome.exit_code == 0
    assert outcome.message.startswith("nothing to do: another run moved the task")
    assert not folder.exists()  # no husk left in tasks/ for the lock


def test_a_merged_task_its_finalize_is_still_archiving_stops_no_other_task(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.phases import finalize

    task.to_review_complete("PASS")
    seen = []
    remove_worktree = finalize.cleanup

    def look_meanwhile(run: Any) -> None:  # another `hub next` looks while the merge's run holds the task
        seen.append(due_jobs(ctx))
        remove_worktree(run)

    monkeypatch.setattr(finalize, "cleanup", look_meanwhile)
    assert run_next(ctx).to_state == "merged"
    assert seen == [([], [])]  # nothing due, nothing halted; before, LockBusy stopped that whole run


def test_archiving_a_merged_task_another_run_archived_meanwhile_is_nothing_to_do(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_review_complete("PASS")
    bound = ctx.for_task(task.contract()["task_id"])
    assert run_next(ctx).to_state == "merged"

    assert archive_merged(bound) is None
    assert not bound.handoff.task_dir.exists()


def test_until_idle_goes_on_while_phases_move_the_task(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("PASS")

    outcome = run_until_idle(ctx)

    assert [p["data"]["ran"] for p in outcome.data["ran"]] == ["report-judge", "finalize-task"]
    assert outcome.exit_code == 0 and outcome.data["rounds"] == 2
    assert not task.hand.contract.exists()  # merged and archived


def test_until_idle_starts_no_new_round_once_told_to_stop(task: TaskDriver, ctx: Context) -> None:
    task.to_judge_review()
    task.judge_report("PASS")

    outcome = run_until_idle(ctx, go_on=lambda: False)

    assert outcome.data["ran"] == "report-judge"
    assert task.contract()["status"] == "review_complete"


def test_until_idle_does_not_run_a_failed_task_again_while_another_goes_on(
    task: TaskDriver, ctx: Context
) -> None:
    driver = type(task)  # a driver per task (tests cannot import conftest)
    held = driver(ctx.for_task(task.new(title="Held elsewhere", target="README.md")))
    held.setup()
    contract = held.record("lock_acquired")  # in progress, its lease held by a live run on another host
    contract["lock"] = {"held_by": "otherhost:4242", "expires_at": "2999-01-01T00:00:00Z"}
    held.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    passing = driver(ctx.for_task(task.new(title="Greet")))
    passing.to_judge_review()
    passing.judge_report("PASS")

    outcome = run_until_idle(ctx)

    ran = [(p["task_id"], p["data"]["ran"] if "data" in p else p["phase"]) for p in outcome.data["ran"]]
    assert ran.count((held.ctx.task_id, "run-implementer")) == 1  # refused once, not again each round
    assert (passing.ctx.task_id, "finalize-task") in ran
    assert outcome.exit_code == 75  # the most severe: the task another host holds
    assert held.contract()["status"] == "implementation_in_progress"


def test_until_idle_does_not_retry_a_merge_waiting_on_the_users_checkout_while_another_task_goes_on(
    task: TaskDriver, ctx: Context
) -> None:
    driver = type(task)
    waiting = driver(ctx.for_task(task.new(title="Greet")))
    waiting.to_review_complete("PASS")
    (ctx.repo_root / "src/app.py").write_text("the user's unsaved work\n", encoding="utf-8")
    other = driver(ctx.for_task(task.new(title="Docs", target="README.md")))
    other.to_judge_review({"README.md": "# demo, documented\n"})
    other.judge_report("PASS")

    outcome = run_until_idle(ctx)

    ran = [(p["task_id"], p["data"]["ran"]) for p in outcome.data["ran"]]
    # Each round rewrote the waiting task's contract and STATUS.md: the folder changed, the task did not.
    assert ran.count((waiting.ctx.task_id, "finalize-task")) == 1
    assert (other.ctx.task_id, "finalize-task") in ran  # merged in the same run
    assert outcome.exit_code == 0
    assert waiting.contract()["handoff_data"]["merge_wait"].startswith("merge waits")


def test_a_task_archived_while_next_reads_its_contract_is_no_halt(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    task.to_judge_review()
    archived_at_the_next_read(monkeypatch, ctx, task.contract()["task_id"])
    assert due_jobs(ctx) == ([], [])


def test_until_idle_merges_a_task_while_another_tasks_model_call_runs(pipe: Pipeline) -> None:
    # Rounds made a task whose review had ended wait for every other task's call before its judge and
    # merge ran, and the model server idled through them (issue 25). Now a thread takes its task on.
    first = pipe.start()
    pipe.fake.respond_with(IMPL, lambda _body: f"src/app.py\n```python\n{GREET_FIXED}```\n")
    pipe.fake.respond_with(REV, lambda _body: PASS_REVIEW)
    pipe.implement()
    pipe.review()
    report = {"verdict": "PASS", "summary": "ok", "blocking_issues": [], "suggestions": []}
    pipe.ctx.handoff.judge_report_json.write_text(json.dumps(report), encoding="utf-8")
    pipe.commit("another file", {"src/other.py": "X = 1\n"})
    second = pipe.start(title="Change X", target_file="src/other.py", requirements=["X is 2"])
    first_folder = pipe.ctx.for_task(first).handoff.task_dir
    seen_merged: list[bool] = []

    def answer(body: dict[str, Any]) -> str:
        if "src/other.py" not in json.dumps(body.get("messages", "")):
            return f"src/app.py\n```python\n{GREET_FIXED}```\n"
        # The second task's call, held (for at most 10 s) until the first task is merged and archived.
        archived = threading.Event()
        deadline = time.monotonic() + 10
        while first_folder.exists() and time.monotonic() < deadline:
            archived.wait(0.02)
        seen_merged.append(not first_folder.exists())
        return "src/other.py\n```python\nX = 2\n```\n"

    pipe.fake.respond_with(IMPL, answer)

    outcome = run_until_idle(pipe.ctx)

    assert seen_merged == [True]
    assert outcome.exit_code == 0, outcome.message
    assert git(pipe.repo, "show", "main:src/app.py") == GREET_FIXED.strip()
    ran = [(p["task_id"], p["data"]["ran"]) for p in outcome.data["ran"]]
    assert [phase for task_id, phase in ran if task_id == first] == ["report-judge", "finalize-task"]
    assert [phase for task_id, phase in ran if task_id == second] == ["run-implementer", "run-local-review"]
    assert pipe.ctx.for_task(second).handoff.review_request.exists()  # waiting for its judge


def two_passed_tasks(task: TaskDriver, ctx: Context) -> list[str]:
    """Two tasks waiting in judge review, each with a PASS report beside it: report-judge is due for both."""
    driver = type(task)
    ids = []
    for title, target, files in (
        ("Greet", "src/app.py", None),
        ("Docs", "README.md", {"README.md": "# doc\n"}),
    ):
        other = driver(ctx.for_task(task.new(title=title, target=target)))
        other.to_judge_review(files)
        other.judge_report("PASS")
        ids.append(str(other.ctx.task_id))
    return ids


def test_a_task_is_not_taken_on_while_another_waits_for_a_thread(task: TaskDriver, ctx: Context) -> None:
    two_passed_tasks(task, ctx)
    jobs, _ = due_jobs(ctx)
    first, second = (str(bound.task_id) for bound, _, _ in jobs)

    outcomes = run_concurrently(jobs, parallel=1, go_on=lambda: True)

    # One thread: the second task's turn comes before the first's merge, as in a round; the last takes on.
    ran = [(o.task_id, o.data["ran"]) for o in outcomes]
    assert ran == [(first, "report-judge"), (second, "report-judge"), (second, "finalize-task")]


def test_a_run_told_to_stop_takes_no_task_on(task: TaskDriver, ctx: Context) -> None:
    two_passed_tasks(task, ctx)
    jobs, _ = due_jobs(ctx)

    outcomes = run_concurrently(jobs, parallel=2, go_on=lambda: False)

    assert [(o.data["ran"], o.to_state) for o in outcomes] == [("report-judge", "review_complete")] * 2


def test_a_second_ctrl_c_that_python_turns_into_a_lock_error_still_stops_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CPython 3.11: a KeyboardInterrupt landing as threading.Condition.wait begins comes out as
    # "RuntimeError: release unlocked lock"; escaping, it reached the pool's shutdown(wait=True), which
    # waited for minutes-long model calls (seen once in the full suite).
    from concurrent.futures import Future, ThreadPoolExecutor

    from hub.phases import next as next_module

    def interrupted_wait(_futures: Any) -> None:
        raise RuntimeError("release unlocked lock")

    exits: list[int] = []

    def record_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(next_module, "wait", interrupted_wait)
    monkeypatch.setattr(next_module.os, "_exit", record_exit)
    pending: Future[list[Any]] = Future()
    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(SystemExit):
        next_module._interrupted(pool, [pending], threading.Event())
    assert exits == [130]


def test_a_first_ctrl_c_that_python_turns_into_a_lock_error_waits_for_the_phases_and_aborts(
    task: TaskDriver, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same CPython race at the first Ctrl-C, in the main thread's wait for a future: the error is
    # taken for the Ctrl-C it was (the running phases finished first), not raised as a bug.
    from concurrent.futures import Future

    two_passed_tasks(task, ctx)
    jobs, _ = due_jobs(ctx)

    def interrupted_result(self: Future[Any], timeout: float | None = None) -> Any:
        raise RuntimeError("release unlocked lock")

    monkeypatch.setattr(Future, "result", interrupted_result)
    with pytest.raises(KeyboardInterrupt):
        run_concurrently(jobs, parallel=2, go_on=lambda: True)

    for bound, _, _ in jobs:  # no phase left half way (a merged task is archived: no contract)
        if bound.handoff.contract.exists():
            assert "in_progress" not in store.load(bound.handoff.contract)["status"]
