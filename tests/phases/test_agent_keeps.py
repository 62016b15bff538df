"""Agent mode keeps a small model's work (issue 34): `hub run-implementer` in agent mode against a
FakeOllama scripted with a small model's habits, on a real repository: it says it is done in words
instead of calling done, calls done bare, needs to be shown where the code is, and repeats a refused
call until it is told another way."""

from __future__ import annotations

import shlex
import sys

from hub.testing import Reply

from .conftest import GREET_FIXED, IMPL, Pipeline, git
from .test_agent import FIX, agent_mode, call, greet_check, sent

CALC_WRONG = "def add(a, b):\n    return a - b\n"
CALC_RIGHT = "def add(a, b):\n    return a + b\n"


def calc_check() -> str:
    code = "import calc; r = calc.add(2, 3); print('add(2, 3) returned', r); raise SystemExit(r != 5)"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def calc_task(pipe: Pipeline) -> None:
    pipe.commit("a calculator", {"calc.py": CALC_WRONG})
    agent_mode(pipe)


def test_the_right_file_written_then_done_in_words_goes_to_review_with_no_strike(pipe: Pipeline) -> None:
    # The scenario: this halted with the correct change in a stash (two agent_no_call strikes).
    calc_task(pipe)
    pipe.fake.script(IMPL, call("write_file", path="calc.py", content=CALC_RIGHT), "Done.")
    pipe.start(
        title="Fix add",
        requirements=["add(a, b) returns the sum"],
        target_file="calc.py",
        acceptance_commands=[calc_check()],
    )

    outcome = pipe.implement()

    assert (outcome.from_state, outcome.to_state) == ("pending_implementer", "pending_local_review")
    assert pipe.contract()["handoff_data"].get("stalls", []) == []
    branch = pipe.contract()["git"]["task_branch"]
    assert git(pipe.repo, "show", f"{branch}:calc.py") + "\n" == CALC_RIGHT
    assert len(pipe.fake.chat_requests(IMPL)) == 2
    turns = pipe.records("agent-turn")
    assert turns[-1]["ending"] == "done" and turns[-1]["outcome"] == "turn 2: no tool call; done"
    assert [c["outcome"] for c in pipe.records("command")] == ["ok"]


def test_done_in_words_after_a_wrong_write_is_told_the_failures_and_the_loop_goes_on(pipe: Pipeline) -> None:
    calc_task(pipe)
    pipe.fake.script(
        IMPL,
        call("write_file", path="calc.py", content="def add(a, b):\n    return a * b\n"),
        "I changed add. Done.",
        call("write_file", path="calc.py", content=CALC_RIGHT),
        "Done.",
    )
    pipe.start(
        requirements=["add(a, b) returns the sum"], target_file="calc.py", acceptance_commands=[calc_check()]
    )

    assert pipe.implement().to_state == "pending_local_review"

    told = sent(pipe, 2)[-1]["content"]
    assert "the acceptance commands fail" in told and "add(2, 3) returned 6" in told
    assert pipe.read("calc.py") == CALC_RIGHT


def test_done_in_words_after_a_write_that_keeps_failing_is_the_tests_failed_strike(pipe: Pipeline) -> None:
    calc_task(pipe)
    pipe.fake.script(
        IMPL, call("write_file", path="calc.py", content="def add(a, b):\n    return a * b\n"), *["Done."] * 3
    )
    pipe.start(
        requirements=["add(a, b) returns the sum"], target_file="calc.py", acceptance_commands=[calc_check()]
    )

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "tests_failed" and "add(2, 3) returned 6" in stall["detail"]


def test_done_without_a_summary_is_done(pipe: Pipeline) -> None:
    agent_mode(pipe)
    bare = '```json\n{"name": "done"}\n```\n'
    pipe.fake.script(IMPL, FIX, bare)
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"

    done = pipe.records("agent-turn")[-1]
    assert done["calls"][0]["name"] == "done" and not done["calls"][0]["problem"]
    assert done["ending"] == "done"
    assert len(pipe.fake.chat_requests(IMPL)) == 2


def test_a_native_done_with_an_empty_summary_is_done(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(IMPL, FIX, Reply(tool_calls=({"name": "done", "arguments": {"summary": ""}},)))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED


def test_the_first_prompt_shows_the_repository_map_with_the_named_file_first(pipe: Pipeline) -> None:
    pipe.commit(
        "more code",
        {
            "src/farewell.py": "def farewell(name):\n    return 'bye ' + name\n",
            "src/zeta.py": "class Zeta:\n    def spin(self, turns):\n        return turns\n",
        },
    )
    agent_mode(pipe)
    pipe.fake.script(IMPL, FIX, call("done"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    prompt = sent(pipe, 0)[1]["content"]
    assert "The repository's map" in prompt
    shown = prompt.split("The repository's map", 1)[1]
    assert "def greet(name)" in shown and "def farewell(name)" in shown and "def spin(self, turns)" in shown
    # The task's own file first, and the hub's control files never (the tools would not show them).
    assert shown.index("src/app.py") < shown.index("src/farewell.py")
    assert "hub.yaml" not in shown
    assert pipe.fake.chat_requests(IMPL)[0]["messages"][1]["role"] == "user"


def test_a_write_outside_the_allowed_paths_refused_twice_is_told_which_paths_are_allowed(
    pipe: Pipeline,
) -> None:
    agent_mode(pipe)
    outside = call("write_file", path="src/other.py", content="x = 1\n")
    pipe.fake.script(
        IMPL, outside, call("write_file", path="lib/other.py", content="x = 2\n"), FIX, call("done")
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    first, second = (" ".join(sent(pipe, n)[-1]["content"].split()) for n in (1, 2))
    assert "not inside allowed_paths" in first and "You may write only" not in first
    assert "second time in a row that write_file was refused" in second
    assert "You may write only these paths: src/app.py." in second


def test_an_edit_whose_search_is_not_in_the_file_refused_twice_is_told_to_read_and_copy(
    pipe: Pipeline,
) -> None:
    agent_mode(pipe)
    miss = [
        call("edit_file", path="src/app.py", search=f"return 'hello' + {n}\n", replace="x\n") for n in "ab"
    ]
    pipe.fake.script(IMPL, *miss, FIX, call("done"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    first, second = (" ".join(sent(pipe, n)[-1]["content"].split()) for n in (1, 2))
    assert "read_file on src/app.py" not in first
    assert "Call read_file on src/app.py and copy the lines you change exactly" in second
    assert "write the whole file with write_file" in second
    assert pipe.read("src/app.py") == GREET_FIXED


def test_a_refusal_after_a_call_that_was_not_refused_is_not_told_as_repeated(pipe: Pipeline) -> None:
    agent_mode(pipe)
    outside = call("write_file", path="src/other.py", content="x = 1\n")
    pipe.fake.script(IMPL, outside, call("read_file", path="src/app.py"), outside, FIX, call("done"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert "second time in a row" not in sent(pipe, 3)[-1]["content"]
    assert pipe.read("src/app.py") == GREET_FIXED


def test_the_users_secret_in_a_signature_is_redacted_from_the_map(pipe: Pipeline) -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    (pipe.repo / ".env").write_text(f"SERVICE_TOKEN={secret}\n", encoding="utf-8")
    pipe.commit(
        "a client",
        {".gitignore": ".env\n", "src/client.py": f"def connect(token='{secret}'):\n    return token\n"},
    )
    agent_mode(pipe)
    pipe.fake.script(IMPL, FIX, call("done"))
    pipe.start(requirements=["greet() says 'hello, NAME' and connect keeps its token"])

    assert pipe.implement().to_state == "pending_local_review"

    prompt = sent(pipe, 0)[1]["content"]
    assert "def connect(" in prompt and secret not in prompt
