"""What every phase shares (hub/phases/context.py, run.py, halts.py): checkpoints scoped to the
contract's allowed paths, the halt file and its resume command, costs, and the outcome document."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import pytest

from hub.phases.context import Context
from hub.phases.halts import NOTE_PLACEHOLDER, resume_command, suggested_resume_state
from hub.phases.outcome import Outcome
from hub.state.breakers import Trip
from hub.state.machine import RESUMABLE_STATES

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver


def test_a_checkpoint_commits_only_the_allowed_paths_titled_with_the_task_and_what_changed(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task_id = task.new(target="src/app.py")
    task.setup()
    run = task.run()
    run.record("lock_acquired")
    task.write({"src/app.py": "def greet(name):\n    return 'hello, ' + name\n", "README.md": "stray edit\n"})
    run.record("code_written")
    sha = run.checkpoint("code_written")
    repo = task.worktree
    assert sha == run_git(repo, "rev-parse", f"task/{task_id}")
    assert run_git(repo, "log", "-1", "--format=%s") == (
        f"[TASK: {task_id}] Greet politely: implementer attempt 1 changes src/app.py"
    )
    assert "State pending_local_review after code_written" in run_git(repo, "log", "-1", "--format=%b")
    assert run_git(repo, "show", "--name-only", "--format=", "HEAD") == "src/app.py"
    assert run_git(repo, "status", "--porcelain") == "M README.md"
    # The user's checkout never moved: still on main, clean, at the base.
    assert run_git(ctx.repo_root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert run_git(ctx.repo_root, "status", "--porcelain") == ""
    assert run.checkpoint("code_written") is None  # nothing new inside the allowed paths


def test_a_checkpoint_before_setup_does_nothing(task: TaskDriver, run_git: Any, ctx: Context) -> None:
    task.new()
    head = run_git(ctx.repo_root, "rev-parse", "HEAD")
    assert task.run().checkpoint("code_written") is None
    assert run_git(ctx.repo_root, "rev-parse", "HEAD") == head


def test_a_halt_records_the_trip_and_writes_a_halt_file_with_a_runnable_resume_command(
    task: TaskDriver, ctx: Context
) -> None:
    task.new()
    task.setup()
    run = task.run()
    outcome = run.halt(Trip("too_many_files", "23 files changed; the limit is 20", {"changed_files": 23}))
    assert (outcome.exit_code, outcome.to_state, outcome.data["trigger"]) == (
        4,
        "erik_consultation",
        "too_many_files",
    )
    contract = task.contract()
    assert contract["breaker"]["status"] == "tripped"
    assert contract["handoff_data"]["halt"] == {
        "trigger": "too_many_files",
        "reason": "23 files changed; the limit is 20",
        "from_state": "pending_implementer",
    }
    text = task.hand.halt_report.read_text(encoding="utf-8")
    assert "- Reason: 23 files changed; the limit is 20" in text
    assert "- changed_files: 23" in text
    command = resume_command(ctx, "pending_implementer", with_note=True, task_id=contract["task_id"])
    assert f"    {command}\n" in text
    assert shlex.split(command)[:3] == ["cd", str(ctx.repo_root), "&&"]
    assert shlex.split(command)[3:-2] == [
        "hub",
        "resume",
        "--to",
        "pending_implementer",
        "--note",
        NOTE_PLACEHOLDER,
    ]
    # Nothing was written on the branch: review, judge and merge would lead nowhere and are not offered.
    assert "pending_local_review" not in text and "review_complete" not in text
    # The command names its task: several may be in flight.
    assert f"--task {contract['task_id']}\n" in text


def test_a_halt_caused_outside_the_model_offers_a_resume_without_a_note(task: Any, ctx: Context) -> None:
    task.new()
    task.setup()
    task.run().halt(Trip("ollama_unavailable", "no Ollama at http://127.0.0.1:9"))
    text = task.hand.halt_report.read_text(encoding="utf-8")
    task_id = task.contract()["task_id"]
    assert f"    {resume_command(ctx, 'pending_implementer', task_id=task_id)}\n" in text
    assert "--note" not in text


def test_a_halt_after_the_work_was_written_offers_review_and_judge_with_what_each_does(
    task: Any, ctx: Context
) -> None:
    task.to_judge_review()
    run = task.run()
    run.halt(Trip("judge_timeout", "no verdict in 60 minutes"), event="circuit_breaker_halt")
    text = task.hand.halt_report.read_text(encoding="utf-8")
    task_id = task.contract()["task_id"]
    assert f"    {resume_command(ctx, 'pending_judge_review', task_id=task_id)}\n" in text
    assert "the local review checks the work on the task branch again" in text
    assert "review_complete" not in text  # no PASS verdict: a merge would lead nowhere


@pytest.mark.parametrize(
    ("before", "suggested"),
    [
        ("implementation_in_progress", "pending_implementer"),
        ("timeout_implementer", "pending_implementer"),
        ("judge_review_in_progress", "pending_judge_review"),
        ("timeout_judge", "pending_judge_review"),
        ("pending_rebuttal", "pending_judge_review"),
        ("pending_local_review", "pending_local_review"),
        ("review_complete", "review_complete"),
        ("merged", "pending_implementer"),
    ],
)
def test_the_suggested_resume_state_is_one_a_person_can_name(before: str, suggested: str) -> None:
    assert suggested_resume_state(before) == suggested
    # When the implementer's work caused the halt, the implementer is next (with a note).
    assert suggested_resume_state(before, trigger="critical_flaw") == "pending_implementer"
    assert suggested in RESUMABLE_STATES


def test_costs_add_up_per_role(task: TaskDriver) -> None:
    task.new()
    run = task.run()
    run.add_cost("judge", 100, 20, 1.5, 0.01)
    run.add_cost("judge", 50, 10, 0.5, 0.02)
    assert run.contract["cost"]["judge"] == {
        "tokens_in": 150,
        "tokens_out": 30,
        "seconds": 2.0,
        "usd": 0.03,
        "calls": 2,
    }
    assert run.tokens == 180
    run.save()
    assert task.contract()["cost"]["judge"]["calls"] == 2


def test_an_outcome_is_a_plain_document() -> None:
    assert Outcome("next", message="nothing to do").as_dict() == {
        "phase": "next",
        "task_id": None,
        "from": None,
        "to": None,
        "message": "nothing to do",
        "exit_code": 0,
    }
    assert Outcome("x", data={"ran": "setup-task"}).as_dict()["data"] == {"ran": "setup-task"}
