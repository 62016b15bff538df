"""The two-strike rule: a first stall retries with attempt + 1, a second halts with STALL_REPORT.md."""

from __future__ import annotations

from hub.state import handoff
from hub.testing import Reply

from .conftest import GREET_FIXED, IMPL, Pipeline, whole_file

MALFORMED = "Here is my plan: first I will open the file, then I will add the comma.\nTHE-END-OF-MY-ANSWER"


def test_second_stall_halts_with_a_stall_report_and_the_resume_command(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, Reply(text=""), MALFORMED)
    task_id = pipe.start()

    first = pipe.implement()
    second = pipe.implement()

    assert (first.to_state, first.exit_code) == ("pending_implementer", 0)
    assert (second.to_state, second.exit_code) == ("erik_consultation", 4)
    contract = pipe.contract()
    assert contract["breaker"]["trigger"] == "stall"
    assert [s["reason"] for s in contract["handoff_data"]["stalls"]] == ["empty_output", "malformed_output"]
    assert pipe.events() == ["lock_acquired", "stall", "retry", "lock_acquired", "stall", "escalate"]

    report = pipe.stall_text()
    assert f"# Stall report: {task_id}" in report
    assert "## Attempt 1: empty_output" in report
    assert "## Attempt 2: malformed_output" in report
    assert "THE-END-OF-MY-ANSWER" in report
    assert "no fenced code block" in report
    assert "Timings: none recorded" not in report
    assert "## What to try" in report
    assert "The model answered with nothing" in report
    assert "No edit could be parsed" in report

    halt = pipe.halt_text()
    assert "`stall`" in halt and "STALL_REPORT.md" in halt
    assert f"cd {pipe.repo}" in halt or f"cd '{pipe.repo}'" in halt
    assert "hub resume --to pending_implementer" in halt


def test_the_stall_report_names_the_folder_the_calls_are_in_and_points_up_at_the_output(
    pipe: Pipeline,
) -> None:
    pipe.fake.script(IMPL, Reply(text=""), MALFORMED)
    task_id = pipe.start()
    pipe.implement()
    pipe.implement()

    report = pipe.stall_text()
    [named] = [line for line in report.splitlines() if line.startswith("Every model call is recorded in")]
    folder = named.split("`")[1]
    assert folder == f"_handoff/tasks/{task_id}/runs/"
    assert any((pipe.repo / folder).iterdir())
    # The attempts and their output come first, the advice after them.
    assert report.index("THE-END-OF-MY-ANSWER") < report.index("## What to try")
    from hub.phases.stall import ADVICE

    assert not [kind for kind, text in ADVICE.items() if "below" in text or "_handoff/runs/" in text]


def test_a_halted_task_resumes_to_the_implementer_and_succeeds(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, "", "", whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    pipe.implement()
    assert pipe.implement().exit_code == 4

    resumed = pipe.resume("pending_implementer", "asked for the whole file explicitly")
    done = pipe.implement()

    assert resumed.to_state == "pending_implementer"
    assert done.to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED
    contract = pipe.contract()
    assert contract["attempt"] == 3
    assert contract["breaker"]["status"] == "closed"
    assert "asked for the whole file explicitly" in pipe.prompts()[2]
    # The reports a person dealt with are kept beside the task's records, not deleted.
    hand = pipe.ctx.handoff
    assert not hand.stall_report.exists() and not hand.halt_report.exists()
    kept = sorted(p.name for p in hand.runs(contract["task_id"]).iterdir())
    assert any(name.endswith("-stall.md") for name in kept)
    assert any(name.endswith("-halt.md") for name in kept)


def test_a_stall_timeout_twice_halts_naming_the_clock_and_keeping_the_partial_output(pipe: Pipeline) -> None:
    pipe.configure(stall=0.3)
    slow = Reply(
        text="src/app.py\n```python\nPARTIAL-BEFORE-THE-STALL\n",
        stall_after_chars=40,
        stall_seconds=10,
        chunk_chars=100,  # all of it in one chunk: a slow machine cannot stall between chunks
    )
    pipe.fake.script(IMPL, slow, slow)
    pipe.start()

    first = pipe.implement()
    second = pipe.implement()

    assert first.data["stall"] == "timeout: stall"
    assert second.exit_code == 4
    stalls = pipe.contract()["handoff_data"]["stalls"]
    assert [s["reason"] for s in stalls] == ["timeout: stall", "timeout: stall"]
    assert "stall timeout after 0.3s" in stalls[0]["detail"]
    assert [h["event"] for h in pipe.contract()["history"]].count("timeout") == 2
    report = pipe.stall_text()
    assert "## Attempt 1: timeout: stall" in report
    assert "PARTIAL-BEFORE" in report
    assert "the model stopped mid-stream" in report
    assert pipe.read("src/app.py").startswith("def greet")


def test_a_success_clears_the_strikes_so_a_later_stall_is_strike_one_again(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, "", whole_file("src/app.py", GREET_FIXED), "")
    pipe.fake.script("rev-model", '{"passed": true, "critical": false, "issues": []}')
    pipe.start()
    pipe.implement()
    pipe.implement()
    pipe.review()
    pipe.judge("FAIL", [{"id": "B1", "severity": "major", "description": "also greet in French"}])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.exit_code) == ("pending_implementer", 0)
    assert pipe.contract()["breaker"]["counters"]["stall_strikes"] == 1


def test_a_task_left_in_timeout_implementer_is_settled_by_the_next_run(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    # A phase that died between recording the stall and the retry leaves the task here.
    contract = pipe.contract()
    contract["handoff_data"]["stalls"] = [{"role": "implementer", "attempt": 1, "reason": "empty_output"}]
    for event in ("lock_acquired", "stall"):
        handoff.record(pipe.ctx.handoff, contract, event, pipe.ctx.clock())

    settled = pipe.implement()
    done = pipe.implement()

    assert (settled.from_state, settled.to_state) == ("timeout_implementer", "pending_implementer")
    assert pipe.fake.chat_requests(IMPL) != []
    assert done.to_state == "pending_local_review"


def slow_model(pipe: Pipeline, answer: str, minutes: float) -> None:
    """The implementer answers `answer`, each call taking `minutes` of the phase's clock (simulated)."""

    def respond(body: dict[str, object]) -> str:
        if body.get("messages"):
            pipe.monotonic += minutes * 60
        return answer

    pipe.fake.respond_with(IMPL, respond)


def test_an_acceptance_command_does_not_start_once_the_implementers_clock_is_spent(pipe: Pipeline) -> None:
    # limits.timeout_minutes.implementer is 30: the one model call used 31 of them.
    slow_model(pipe, whole_file("src/app.py", GREET_FIXED), 31)
    pipe.start(acceptance_commands=["true"])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.data["stall"]) == ("pending_implementer", "phase_timeout")
    assert pipe.records("command") == []
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert "run-implementer spent its clock (30 min) before the acceptance command `true`" in stall["detail"]
    assert pipe.events() == ["lock_acquired", "timeout", "retry"]


def test_no_model_call_starts_once_the_implementers_clock_is_spent_and_the_second_time_halts(
    pipe: Pipeline,
) -> None:
    # A SEARCH block that matches nothing: the feedback call is due, but the clock is spent.
    missing = "src/app.py\n<<<<<<< SEARCH\nno such line\n=======\nx = 1\n>>>>>>> REPLACE\n"
    slow_model(pipe, missing, 31)
    pipe.start()

    first = pipe.implement()
    second = pipe.implement()

    assert first.data["stall"] == "phase_timeout"
    assert (second.to_state, second.exit_code) == ("erik_consultation", 4)
    # One call per attempt: the feedback calls never started.
    assert len(pipe.prompts()) == 2
    reasons = [s["reason"] for s in pipe.contract()["handoff_data"]["stalls"]]
    assert reasons == ["phase_timeout", "phase_timeout"]
    assert "before the implementer model call (block-feedback)" in pipe.stall_text()
