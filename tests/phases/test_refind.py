"""A task whose files the hub found chooses them again after a wrong choice (issue 34): the retry's first
call is the find-files call once more, told what was chosen and what failed, its map led by the files the
test output names. In-process against a FakeOllama, in a real repository of a few modules."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from hub.phases.attempt_refind import mentioned_files, refind_from
from hub.phases.finalize import finalize_task
from hub.state.contract import StallRecord

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, git, whole_file
from .test_find_files import MODULES

# What the acceptance command prints when greet is wrong: pytest's way of naming the failing test and the
# line of the code under test.
FAILING = "src/app.py:2: in greet\nFAILED tests/test_app.py::test_greet - AssertionError: "
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b  # {}\n"


CHECK = (
    "import sys\nsys.path.insert(0, 'src')\nimport app\n\nr = app.greet('x')\nok = r == 'hello, x'\n"
    f"print('ok' if ok else {FAILING!r} + repr(r))\nsys.exit(not ok)\n"
)


def start(pipe: Pipeline, **fields: object) -> str:
    """A task whose words point at the calculator, though the fix is the greeting's; its check is a
    forbidden file, so the command's words do not name the module either."""
    pipe.commit("a few modules", {**MODULES, "tests/check.py": CHECK})
    values: dict[str, object] = {
        "title": "The calculator's comma",
        "requirements": ["the calculator module's add and mul need a comma"],
        "acceptance_commands": [f"{shlex.quote(sys.executable)} tests/check.py"],
        "forbidden_paths": ["tests"],
        "target_file": None,
    }
    values.update(fields)
    return pipe.start(**values)


def map_files(prompt: str) -> list[str]:
    """The files of the map in a find-files prompt, in the order shown."""
    shown = prompt.split("## The repository's map", 1)[1].split("## How to answer", 1)[0]
    return [line.rstrip(":") for line in shown.splitlines() if line and not line.startswith((" ", "The "))]


def test_a_wrong_choice_whose_tests_fail_is_chosen_again_with_the_failures_and_the_task_merges(
    pipe: Pipeline,
) -> None:
    pipe.fake.script(
        IMPL,
        "src/calc.py\n",
        whole_file("src/calc.py", CALC.format(1)),
        whole_file("src/calc.py", CALC.format(2)),
        whole_file("src/calc.py", CALC.format(3)),
        "src/app.py\n",
        whole_file("src/app.py", GREET_FIXED),
    )
    pipe.fake.script(REV, PASS_REVIEW)
    start(pipe)

    first = pipe.implement()
    assert first.to_state == "pending_implementer" and first.data["stall"] == "tests_failed"
    assert pipe.implement().to_state == "pending_local_review"

    purposes = [r["purpose"] for r in pipe.records("model-call")]
    assert purposes == [
        "find-files",
        "implement",
        "reflection-1",
        "reflection-2",
        "find-files",
        "implement",
    ]
    find, again = pipe.prompts()[0], pipe.prompts()[4]
    assert map_files(find)[0] == "src/calc.py"
    # Told what it chose, that the tests still failed, which failed; the file the output names leads.
    assert "In the last attempt you chose: src/calc.py." in again
    assert "the acceptance tests still failed" in again
    assert "- test_greet" in again and "names at a line (shown first on the map below): src/app.py" in again
    assert map_files(again)[0] == "src/app.py"
    records = pipe.records("files-found")
    assert [r["files"] for r in records] == [["src/calc.py"], ["src/app.py"]]
    assert records[1]["again_after"] == "tests_failed" and records[1]["pinned"] == ["src/app.py"]
    assert pipe.review().to_state == "pending_judge_review"
    pipe.judge("PASS")
    assert finalize_task(pipe.ctx).to_state == "merged"
    assert git(pipe.repo, "show", "main:src/app.py") + "\n" == GREET_FIXED


def test_an_answer_that_changes_only_files_it_was_not_given_is_a_wrong_choice_chosen_again(
    pipe: Pipeline,
) -> None:
    pipe.fake.script(
        IMPL,
        "src/calc.py\n",
        whole_file("src/app.py", GREET_FIXED),
        "src/app.py\n",
        whole_file("src/app.py", GREET_FIXED),
    )
    start(pipe)

    first = pipe.implement()

    assert first.data["stall"] == "wrong_files"
    (stall,) = pipe.contract()["handoff_data"]["stalls"]
    assert "changed only files it was not given (src/app.py); it was given src/calc.py" in stall["detail"]
    assert pipe.implement().to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED
    again = pipe.prompts()[2]
    assert "changed, or asked for, other files than those you were given" in again
    assert pipe.contract()["specification"]["source_files"] == ["src/app.py"]


def test_an_answer_asking_for_a_file_it_was_not_given_is_a_wrong_choice(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, "src/calc.py\n", "I cannot fix this without seeing `src/app.py`.")
    start(pipe)

    assert pipe.implement().data["stall"] == "wrong_files"

    (stall,) = pipe.contract()["handoff_data"]["stalls"]
    assert "asked for only files it was not given (src/app.py)" in stall["detail"]


def test_a_task_whose_files_a_person_named_is_never_asked_for_its_files_again(pipe: Pipeline) -> None:
    pipe.fake.script(
        IMPL,
        whole_file("src/app.py", 'def greet(name):\n    return "hi " + name\n'),
        whole_file("src/app.py", 'def greet(name):\n    return "hey " + name\n'),
        whole_file("src/app.py", 'def greet(name):\n    return "yo " + name\n'),
        whole_file("src/app.py", GREET_FIXED),
    )
    start(pipe, target_file="src/app.py")

    assert pipe.implement().data["stall"] == "tests_failed"
    assert pipe.implement().to_state == "pending_local_review"

    purposes = [r["purpose"] for r in pipe.records("model-call")]
    assert "find-files" not in purposes and purposes[-1] == "implement"
    assert pipe.contract()["specification"]["source_files"] == []


def test_a_retry_whose_new_answer_names_no_file_keeps_the_last_choice(pipe: Pipeline) -> None:
    pipe.fake.script(
        IMPL,
        "src/app.py\n",
        whole_file("src/app.py", 'def greet(name):\n    return "hi " + name\n'),
        whole_file("src/app.py", 'def greet(name):\n    return "hey " + name\n'),
        whole_file("src/app.py", 'def greet(name):\n    return "yo " + name\n'),
        "I do not know.",
        whole_file("src/app.py", GREET_FIXED),
    )
    start(pipe)

    assert pipe.implement().data["stall"] == "tests_failed"
    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.contract()["constraints"]["allowed_paths"] == ["src/app.py"]
    assert pipe.read("src/app.py") == GREET_FIXED


# --- the hints -----------------------------------------------------------------------------------------

REPOSITORY = ("tenacity/__init__.py", "tenacity/wait.py", "tests/test_wait.py", "os.py", "setup.py")

PYTEST_OUTPUT = """\
____________________________ TestWait.test_jitter ____________________________
tests/test_wait.py:88: in test_jitter
    self.assertLess(w(retry_state), 5)
{root}/tenacity/wait.py:123: in __call__
    return min(self.max, jitter)
/usr/lib/python3.11/os.py:40: in helper
/venv/lib/python3.11/site-packages/tenacity/__init__.py:300: in call
E   AssertionError: 7 not less than 5
=========================== short test summary info ============================
FAILED tests/test_wait.py::TestWait::test_jitter - AssertionError: 7 not less than 5
FAILED tests/test_wait.py::test_max_delay
"""


def test_the_files_a_test_output_names_at_a_line_are_the_repositorys_most_named_first(tmp_path: Path) -> None:
    output = PYTEST_OUTPUT.format(root=tmp_path) + 'File "tenacity/wait.py", line 7, in <module>\n'

    found = mentioned_files(output, REPOSITORY, tmp_path)

    # The worktree's absolute path and an installed copy both count; the standard library does not.
    assert found == ["tenacity/wait.py", "tests/test_wait.py", "tenacity/__init__.py"]


def test_the_failing_tests_are_read_from_pytest_and_unittest_summaries(tmp_path: Path) -> None:
    stall: StallRecord = {
        "timestamp": "",
        "role": "implementer",
        "attempt": 1,
        "reason": "tests_failed",
        "detail": PYTEST_OUTPUT.format(root=tmp_path) + "FAIL: test_stop (tests.test_stop.TestStop)\n",
        "raw_tail": "",
        "timings": {},
    }

    refind = refind_from(stall, ["tenacity/__init__.py"], REPOSITORY, tmp_path)

    assert refind.tests == ("TestWait::test_jitter", "test_max_delay", "test_stop")
    assert set(refind.mentioned) == {"tenacity/wait.py", "tests/test_wait.py", "tenacity/__init__.py"}


def test_the_users_secret_on_the_map_of_the_second_find_files_call_is_redacted(pipe: Pipeline) -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    (pipe.repo / ".env").write_text(f"SERVICE_TOKEN={secret}\n", encoding="utf-8")
    pipe.commit(
        "a client",
        {".gitignore": ".env\n", "src/client.py": f"def connect(name, token='{secret}'):\n    return name\n"},
    )
    pipe.fake.script(
        IMPL,
        "src/calc.py\n",
        whole_file("src/app.py", GREET_FIXED),
        "src/app.py\n",
        whole_file("src/app.py", GREET_FIXED),
    )
    start(pipe, requirements=["the calculator's add and mul need a comma, as the client's connect"])

    assert pipe.implement().data["stall"] == "wrong_files"
    assert pipe.implement().to_state == "pending_local_review"

    find, again = pipe.prompts()[0], pipe.prompts()[2]
    assert "In the last attempt you chose: src/calc.py." in again
    for prompt in (find, again):
        assert "def connect(name, token=" in prompt and secret not in prompt
