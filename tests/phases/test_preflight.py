"""The acceptance commands tried on the base before the first model call (issue 36): a command that
cannot run halts at once with no model call spent; one that runs and fails is the task's to fix."""

from __future__ import annotations

import shlex
import sys

from .conftest import GREET_FIXED, IMPL, Pipeline, whole_file
from .test_implement import greet_check


def test_a_command_that_is_not_found_halts_before_any_model_call_naming_it(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=["no-such-test-runner-36 -q"])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.data["trigger"]) == ("erik_consultation", "command_cannot_run")
    assert pipe.fake.chat_requests(IMPL) == []
    halt = pipe.halt_text()
    assert "`no-such-test-runner-36 -q` cannot run on the task's base (exit 127: not found)" in halt
    assert "no model was called" in halt and "not found" in halt
    assert "fix: install what it needs" in halt
    assert [r["exit_code"] for r in pipe.records("preflight")] == [127]
    assert pipe.records("model-call") == []


def test_an_interpreter_without_pytest_halts_with_what_it_printed(pipe: Pipeline) -> None:
    # -S: the interpreter without its site-packages, as a hub installed without pytest runs `-m pytest`.
    command = f"{shlex.quote(sys.executable)} -S -m pytest -q"
    pipe.start(acceptance_commands=[command])

    outcome = pipe.implement()

    assert outcome.data["trigger"] == "command_cannot_run"
    assert "No module named pytest" in pipe.halt_text()
    assert pipe.fake.chat_requests(IMPL) == []


def test_tests_failing_on_the_base_are_the_task_and_run_once_per_base(pipe: Pipeline) -> None:
    wrong = [whole_file("src/app.py", f'def greet(name):\n    return "hi{n} " + name\n') for n in range(3)]
    pipe.fake.script(IMPL, *wrong, whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    first = pipe.implement()  # the base fails the check, as it must: the model is called
    assert (first.to_state, first.data["stall"]) == ("pending_implementer", "tests_failed")
    second = pipe.implement()

    assert second.to_state == "pending_local_review"
    # One run on the base for both attempts (the first stalled; the branch is still at the base).
    assert [r["exit_code"] for r in pipe.records("preflight")] == [1]
    assert [r["exit_code"] for r in pipe.records("command")][-1] == 0
