"""What `hub board` shows without a browser: the eval reports as a table and charts, and a clear page
for a task id that names nothing (or names a path). The board runs in-process on a free port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from hub.evals.report import EvalReport, TaskResult
from hub.faces.board import make_server, serve
from hub.phases.context import Context

if TYPE_CHECKING:
    from conftest import TaskDriver


def result(name: str, solved: bool) -> TaskResult:
    return TaskResult(
        name=name,
        task_id=f"t-{name}",
        status="merged" if solved else "erik_consultation",
        solved=solved,
        tests_pass=solved,
        halt_trigger=None if solved else "stall",
        halt_reason=None,
        stalls=0,
        attempts=1,
        model_calls=2,
        tokens_in=100,
        tokens_out=50,
        model_seconds=12.5,
        hub_seconds=0.8,
    )


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    root = tmp_path / "eval"
    for run, model, solved in (
        ("20260101-120000", "qwen2.5-coder:7b", 1),
        ("20260102-120000", "qwen2.5-coder:32b", 2),
    ):
        report = EvalReport(
            suite="evals/python",
            config="hub.yaml",
            models={"implementer": model},
            seconds=40.0,
            tasks=[result("leap", solved >= 1), result("bob", solved >= 2)],
        )
        (root / run).mkdir(parents=True)
        (root / run / "report.json").write_text(json.dumps(report.to_json()), encoding="utf-8")
    return root


@pytest.fixture
def board_url(ctx: Context, evals: Path) -> Iterator[str]:
    server, url = make_server(ctx, "127.0.0.1", 0, None, [evals])
    thread = threading.Thread(target=serve, args=(server,), daemon=True)
    thread.start()
    yield url
    server.shutdown()
    thread.join(timeout=10)


def test_eval_reports_show_as_a_table_and_charts_of_solved_and_time(board_url: str) -> None:
    base, _, token = board_url.partition("/?token=")

    page = httpx.get(f"{base}/evals?token={token}").text

    assert "qwen2.5-coder:7b" in page and "qwen2.5-coder:32b" in page
    assert "1 / 2" in page and "2 / 2" in page
    assert page.count("<svg") == 2
    assert "solved per model and run" in page and "model time against hub time" in page


def test_a_task_id_that_names_nothing_or_a_path_gets_a_message_not_a_file(board_url: str) -> None:
    base, _, token = board_url.partition("/?token=")

    missing = httpx.get(f"{base}/task/no-such-task?token={token}")
    path = httpx.get(f"{base}/task/..%2F..%2Fetc?token={token}")

    assert missing.status_code == 409 and "no task no-such-task" in missing.text
    assert path.status_code in (404, 409) and "root:" not in path.text


def test_index_shows_the_phase_running_and_its_model_call_with_tokens_per_second(
    ctx: Context, task: TaskDriver, board_url: str
) -> None:
    from hub.phases.live import CALL_FILE, Call
    from hub.state import handoff

    base, _, token = board_url.partition("/?token=")
    task_id = task.new()
    hand = ctx.for_task(task_id).handoff
    with handoff.phase_lock(hand, "run-implementer", ctx.clock()):
        call = Call("implementer", "qwen2.5-coder:7b", hand.task_dir / CALL_FILE)
        call.progress(1)
        call.progress(40)
        call.waits_for(None)  # written now, not a second later
        running = httpx.get(f"{base}/live?token={token}").json()["parts"]["tasks"]
    done = httpx.get(f"{base}/live?token={token}").json()["parts"]["tasks"]

    assert "run-implementer" in running and "40 tokens" in running and "tokens/s" in running
    assert "qwen2.5-coder:7b" in running
    assert "tokens/s" not in done
