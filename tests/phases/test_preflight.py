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


def pytest_command() -> str:
    return f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"


def test_a_command_running_no_test_halts_when_the_task_cannot_add_one(pipe: Pipeline) -> None:
    # The README's walk-through copied with calc.py alone: pytest finds no test, and `--target` lets the
    # model write only the code, so every answer would fail "no tests ran".
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[pytest_command()])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.data["trigger"]) == ("erik_consultation", "command_cannot_run")
    assert pipe.fake.chat_requests(IMPL) == []
    halt = pipe.halt_text()
    assert f"`{pytest_command()}` runs no test on the task's base (no tests ran)" in halt
    assert "(src/app.py)" in halt and "no model was called" in halt
    assert "fix: add a test the command finds beside the code (e.g. `test_app.py`)" in halt
    assert "hub resume --to pending_implementer" in halt
    assert [r["exit_code"] for r in pipe.records("preflight")] == [5]


def test_the_same_task_with_a_committed_test_calls_the_model(pipe: Pipeline) -> None:
    pipe.commit(
        "a test of greet",
        {
            "test_app.py": 'from src.app import greet\n\n\ndef test_greet():\n    assert greet("x") == "hello, x"\n'
        },
    )
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[pytest_command()])

    outcome = pipe.implement()

    assert outcome.to_state == "pending_local_review"
    assert [r["exit_code"] for r in pipe.records("preflight")] == [1]  # the base fails the test
    assert pipe.records("preflight-note") == []


def test_a_task_that_may_write_tests_carries_on_with_a_note(pipe: Pipeline) -> None:
    test = 'from src.app import greet\n\n\ndef test_greet():\n    assert greet("x") == "hello, x"\n'
    pipe.fake.script(
        IMPL, whole_file("src/app.py", GREET_FIXED) + "\n" + whole_file("tests/test_app.py", test)
    )
    pipe.start(acceptance_commands=[pytest_command()], allowed_paths=["src/app.py", "tests/"])

    outcome = pipe.implement()

    assert outcome.to_state == "pending_local_review"
    assert len(pipe.fake.chat_requests(IMPL)) == 1
    assert [r["exit_code"] for r in pipe.records("preflight")] == [5]
    assert [r["command"] for r in pipe.records("preflight-note")] == [pytest_command()]
    assert [r["exit_code"] for r in pipe.records("command")][-1] == 0
