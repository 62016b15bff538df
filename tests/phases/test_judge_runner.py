"""`hub run-judge`: a command judge (real subprocesses), a model judge (a fake worker passed in), what
happens when the judge times out or fails, and the agent-as-judge pair (read request, submit verdict)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.config import JudgeConfig
from hub.core.errors import ContractInvalid, WorkerTimeout, WrongState, describe
from hub.phases.context import Context
from hub.phases.judge_runner import extract_report, read_review_request, run_judge, submit_verdict
from hub.phases.next import run_next
from hub.state import store
from hub.state.contract import iso
from hub.state.provenance import read_records
from hub.workers.base import ChatRequest, Generation, Health

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver

WRITE_PASS = """
import json, os, sys
request = sys.stdin.read()
assert "Review request" in request, request[:200]
report = {"verdict": "PASS", "summary": "looks right", "blocking_issues": [], "suggestions": []}
with open(os.environ["HUB_JUDGE_REPORT"], "w", encoding="utf-8") as f:
    json.dump(report, f)
"""

PRINT_FAIL = """
import sys
sys.stdin.read()
print("I looked at it.")
print('```json\\n{"verdict": "fail", "summary": "no comma", '
      '"blocking_issues": [{"description": "greet() still says hello without a comma"}]}\\n```')
"""


def python_command(tmp_path: Path, name: str, code: str) -> str:
    script = tmp_path / name
    script.write_text(code, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def with_judge(
    ctx: Context, command: str | None = None, backend: str | None = None, worker: Any = None
) -> Context:
    config = ctx.config._replace(judge=JudgeConfig(command=command, backend=backend))
    factory = (lambda role: worker) if worker is not None else None
    return Context(config, clock=ctx.clock, worker_factory=factory)


def set_judge_minutes(task: TaskDriver, minutes: float) -> None:
    contract = task.contract()
    contract["limits"]["timeout_minutes"]["judge"] = minutes
    store.save(task.hand.contract, contract, task.ctx.clock())


def exited_within(pid: int, seconds: float) -> bool:
    """Whether the process has ended (a zombie awaiting its reaper counts) within `seconds`."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], seconds)
        return bool(readable)
    finally:
        os.close(fd)


class FakeJudgeModel:
    """A Worker that answers (or raises) what the test says, and remembers what it was asked."""

    def __init__(self, answer: str | BaseException) -> None:
        self.answer = answer
        self.requests: list[ChatRequest] = []
        self.closed = False

    def generate(self, request: ChatRequest) -> Generation:
        self.requests.append(request)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return Generation(text=self.answer, model=request.model, prompt_tokens=900, completion_tokens=60)

    def list_models(self) -> list[str]:
        return []

    def check_health(self, models: list[str]) -> Health:
        return Health(ok=True)

    def close(self) -> None:
        self.closed = True


def test_a_command_judge_that_writes_pass_is_applied(ctx: Context, task: TaskDriver, tmp_path: Path) -> None:
    task.to_judge_review()
    judged = with_judge(ctx, command=python_command(tmp_path, "judge.py", WRITE_PASS))

    outcome = run_judge(judged)

    assert (outcome.from_state, outcome.to_state, outcome.exit_code) == (
        "pending_judge_review",
        "review_complete",
        0,
    )
    contract = task.contract()
    assert contract["handoff_data"]["judge_verdict"] == "PASS"
    assert [h["event"] for h in contract["history"][-2:]] == ["review_started", "judge_complete"]
    hand = ctx.handoff
    assert not hand.review_request.exists() and not hand.review_in_progress.exists()
    assert not hand.judge_report_json.exists()  # set aside in runs/ by apply_verdict
    record = next(r for r in read_records(hand, contract["task_id"]) if r["kind"] == "judge")
    assert (record["judge"], record["exit_code"], record["verdict"]) == ("command", 0, "PASS")


def test_a_configured_judge_runs_once_however_long_the_review_waited_for_it(
    ctx: Context, task: TaskDriver, tmp_path: Path, clock: Any
) -> None:
    # Issue 35: a task that waited past limits.timeout_minutes.judge in the queue, or across a sleep or a
    # clock step, halted judge_timeout without a judge ever seeing it.
    task.to_judge_review()
    started = clock.advance(hours=2)  # the judge's clock is 60 minutes
    judged = with_judge(ctx, command=python_command(tmp_path, "judge.py", WRITE_PASS))

    outcome = run_next(judged)

    assert (outcome.data["ran"], outcome.exit_code) == ("run-judge", 0)
    contract = task.contract()
    assert contract["handoff_data"]["judge_verdict"] == "PASS"
    assert contract["handoff_data"]["judge_started_at"] == iso(started)


def test_an_empty_report_a_killed_judge_left_is_set_aside_and_the_judge_runs_again(
    ctx: Context, task: TaskDriver, tmp_path: Path
) -> None:
    # Issue 35: every later run failed on it the same way.
    task.to_judge_review()
    ctx.handoff.judge_report_json.write_bytes(b"")
    judged = with_judge(ctx, command=python_command(tmp_path, "judge.py", WRITE_PASS))

    outcome = run_judge(judged)

    assert (outcome.to_state, task.contract()["handoff_data"]["judge_verdict"]) == ("review_complete", "PASS")
    kept = list(ctx.handoff.runs(task.contract()["task_id"]).glob("*-damaged-judge-report.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == b""


def test_a_judge_printing_its_report_is_applied_and_the_task_goes_back(
    ctx: Context, task: TaskDriver, tmp_path: Path
) -> None:
    task.to_judge_review()

    outcome = run_judge(with_judge(ctx, command=python_command(tmp_path, "judge.py", PRINT_FAIL)))

    assert outcome.to_state == "pending_implementer"
    contract = task.contract()
    assert contract["attempt"] == 2
    assert contract["handoff_data"]["judge_blocking_issues"][0]["description"].startswith("greet() still")


def test_a_judge_that_times_out_halts_the_task_and_leaves_no_process_behind(
    ctx: Context, task: TaskDriver, tmp_path: Path
) -> None:
    task.to_judge_review()
    set_judge_minutes(task, 0.01)
    pid_file = tmp_path / "grandchild.pid"
    command = f"sleep 300 & echo $! > {shlex.quote(str(pid_file))}; wait"

    outcome = run_judge(with_judge(ctx, command=command))

    assert (outcome.to_state, outcome.exit_code) == ("erik_consultation", 4)
    contract = task.contract()
    assert [h["event"] for h in contract["history"][-3:]] == ["review_started", "timeout", "escalate"]
    assert contract["breaker"]["trigger"] == "judge_timeout"
    assert "hub resume" in ctx.handoff.halt_report.read_text(encoding="utf-8")
    assert exited_within(int(pid_file.read_text(encoding="utf-8")), seconds=5.0)


def test_hub_run_judge_exits_4_when_the_judge_times_out(task: TaskDriver, hub: HubRunner) -> None:
    task.to_judge_review()
    set_judge_minutes(task, 0.01)

    done = hub("run-judge", env={"HUB_JUDGE_COMMAND": "sleep 300"})

    assert done.returncode == 4, done.stderr
    assert "judge_timeout" in done.stdout
    assert task.contract()["status"] == "erik_consultation"


def test_a_failing_judge_returns_the_request_and_halts_after_three_failures(
    ctx: Context, task: TaskDriver
) -> None:
    task.to_judge_review()
    judged = with_judge(ctx, command="echo 'no credits left' >&2; exit 2")

    for n in (1, 2, 3):
        outcome = run_judge(judged)
        assert (outcome.to_state, outcome.exit_code) == ("pending_judge_review", 1)
        assert "no credits left" in outcome.message
        assert ctx.handoff.review_request.exists()
        assert task.contract()["breaker"]["counters"]["interruptions"] == n
    halted = run_judge(judged)

    assert (halted.to_state, halted.exit_code) == ("erik_consultation", 4)
    assert task.contract()["breaker"]["trigger"] == "interruptions"


def test_a_report_already_waiting_is_applied_without_running_the_judge(
    ctx: Context, task: TaskDriver, tmp_path: Path
) -> None:
    task.to_judge_review()
    task.judge_report("PASS")
    never = tmp_path / "ran"

    outcome = run_judge(with_judge(ctx, command=f"touch {shlex.quote(str(never))}"))

    assert outcome.to_state == "review_complete"
    assert not never.exists()


def test_a_model_judge_answer_after_a_think_block_is_applied(ctx: Context, task: TaskDriver) -> None:
    task.to_judge_review()
    model = FakeJudgeModel(
        '<think>Is {"verdict": "FAIL"} right? No.</think>\nVerdict below.\n```json\n'
        '{"verdict": "PASS", "summary": "fine", "blocking_issues": []}\n```'
    )

    outcome = run_judge(with_judge(ctx, backend="ollama", worker=model))

    assert outcome.to_state == "review_complete"
    assert model.closed
    assert "Review request" in model.requests[0].prompt
    assert "JSON" in (model.requests[0].system or "")
    cost = task.contract()["cost"]["judge"]
    assert (cost["tokens_in"], cost["tokens_out"]) == (900, 60)


def test_a_model_judge_that_runs_out_of_time_halts(ctx: Context, task: TaskDriver) -> None:
    task.to_judge_review()
    model = FakeJudgeModel(WorkerTimeout("total", 60.0, partial_text='{"verd'))

    outcome = run_judge(with_judge(ctx, backend="ollama", worker=model))

    assert (outcome.to_state, outcome.exit_code) == ("erik_consultation", 4)
    assert task.contract()["breaker"]["trigger"] == "judge_timeout"


def test_a_model_judge_that_answers_without_a_report_is_asked_again(ctx: Context, task: TaskDriver) -> None:
    task.to_judge_review()
    model = FakeJudgeModel("Looks good to me!")

    outcome = run_judge(with_judge(ctx, backend="ollama", worker=model))

    assert (outcome.to_state, outcome.exit_code) == ("pending_judge_review", 1)
    assert "not a report" in outcome.message


def test_run_judge_without_a_judge_says_how_to_configure_one(ctx: Context, task: TaskDriver) -> None:
    from hub.core.errors import ConfigError

    task.to_judge_review()
    with pytest.raises(ConfigError) as caught:
        run_judge(ctx)
    assert "judge.command" in describe(caught.value)
    assert task.contract()["status"] == "pending_judge_review"


@pytest.mark.parametrize(
    "text",
    [
        '{"verdict": "PASS"}',
        'Sure.\n```json\n{"verdict": "pass", "blocking_issues": []}\n```\nDone.',
        '<think>{"verdict": "FAIL"}</think>{"verdict": "PASS"}',
        'prefix {not json} then {"summary": "s", "verdict": "PASS"} suffix',
    ],
)
def test_extract_report_finds_the_verdict_in_what_a_model_says(text: str) -> None:
    assert extract_report(text)["verdict"] == "PASS"


def test_extract_report_refuses_answers_without_a_valid_report() -> None:
    with pytest.raises(ContractInvalid, match="no JSON object"):
        extract_report("PASS, ship it")
    with pytest.raises(ContractInvalid, match="verdict"):
        extract_report('{"verdict": "MAYBE"}')


def test_an_agent_reads_the_request_and_submits_a_verdict(ctx: Context, task: TaskDriver) -> None:
    with pytest.raises(WrongState, match="no active task"):
        read_review_request(ctx)
    task.to_judge_review()

    request = read_review_request(ctx)
    outcome = submit_verdict(ctx, {"verdict": "PASS", "summary": "ok"})

    assert request["status"] == "pending_judge_review" and "Review request" in request["text"]
    assert outcome.to_state == "review_complete"
    assert not ctx.handoff.judge_report_json.exists()


def test_an_invalid_or_untimely_verdict_writes_nothing(ctx: Context, task: TaskDriver, snapshot: Any) -> None:
    task.new()
    before = snapshot(ctx.handoff.dir)
    with pytest.raises(WrongState, match="not waiting for a verdict"):
        submit_verdict(ctx, {"verdict": "PASS"})
    assert snapshot(ctx.handoff.dir) == before

    task.to_judge_review()
    before = snapshot(ctx.handoff.dir)
    with pytest.raises(ContractInvalid, match="verdict"):
        submit_verdict(ctx, {"verdict": "SHIP IT"})
    with pytest.raises(ContractInvalid, match="description"):
        submit_verdict(ctx, {"verdict": "FAIL", "blocking_issues": [{"file": "x.py"}]})
    assert snapshot(ctx.handoff.dir) == before
    assert json.loads(ctx.handoff.contract.read_text(encoding="utf-8"))["status"] == "pending_judge_review"
