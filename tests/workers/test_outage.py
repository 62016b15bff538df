"""The outage wait (hub/workers/outage.py) on a simulated clock, and through the real CLI: an outage is
waited out to its limit, a server that answers broken is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.core.errors import ServerBroken, ServerFailed, WorkerUnavailable
from hub.testing import FakeOllama, Reply
from hub.workers.outage import BROKEN_TRIES, Wait, wait_out


class SimClock:
    """A clock that moves only when slept on, and by each call's own duration."""

    def __init__(self, call_seconds: float = 0.0) -> None:
        self.now = 0.0
        self.call_seconds = call_seconds
        self.calls: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def failing(self, *outcomes: Exception | None) -> Any:
        """A call that raises each of `outcomes` in turn (None: succeeds), the last one again and again."""
        queue = list(outcomes)

        def call() -> str:
            self.calls.append(self.now)
            self.now += self.call_seconds
            outcome = queue.pop(0) if len(queue) > 1 else queue[0]
            if outcome is None:
                return "ok"
            raise outcome

        return call


@pytest.mark.parametrize("call_seconds", [0.0, 0.2, 1.5])
def test_the_last_pause_is_cut_to_end_at_the_limit_and_the_call_is_tried_there(call_seconds: float) -> None:
    # Before: with a 15 s limit a server that never came back halted at 8.2 s (ollama), 12.7 s (mcp).
    clock = SimClock(call_seconds)
    with pytest.raises(WorkerUnavailable, match="still unavailable"):
        wait_out(
            clock.failing(WorkerUnavailable("refused")),
            limit_seconds=15,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    assert clock.calls[-1] - clock.calls[0] >= 15 - call_seconds
    assert clock.now < 15 + 2 * call_seconds + 0.001


def test_a_server_back_just_before_the_limit_is_used() -> None:
    clock = SimClock()
    outage = [WorkerUnavailable("refused")] * 4  # tries at 0, 1, 3, 7: down; at 15 (the limit): back
    waits: list[Wait | None] = []
    result = wait_out(
        clock.failing(*outage, None), limit_seconds=15, sleep=clock.sleep, clock=lambda: clock.now,
        on_wait=waits.append,
    )  # fmt: skip
    assert result == "ok" and clock.calls == [0, 1, 3, 7, 15]
    assert waits[-1] is None and [w.next_pause for w in waits if w] == [1, 2, 4, 8]


def test_a_server_that_answers_broken_is_given_a_few_tries_in_seconds_not_the_whole_wait() -> None:
    clock = SimClock(call_seconds=0.5)
    with pytest.raises(ServerBroken, match="answered broken 3 times") as caught:
        wait_out(
            clock.failing(ServerFailed("stream ended without its final message", partial_text="half")),
            limit_seconds=30 * 60,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    assert len(clock.calls) == BROKEN_TRIES and clock.now < 5
    assert caught.value.partial_text == "half"


def test_an_outage_between_broken_answers_starts_their_count_again() -> None:
    clock = SimClock()
    broken, down = ServerFailed("error mid-stream"), WorkerUnavailable("refused")
    result = wait_out(
        clock.failing(broken, broken, down, broken, broken, None),
        limit_seconds=600,
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    assert result == "ok" and len(clock.calls) == 6


# -- through the CLI ---------------------------------------------------------------------------------------

IMPL, REV = "impl-model", "rev-model"


def hub_yaml() -> str:
    return f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama}}
  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
limits: {{server_wait_minutes: 30}}
"""


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(text="src/app.py\n```python\nx = 1\n```\n", drop_after_chars=10_000), "reset mid-generation"),
        (
            Reply(text="src/app.py\n```", error="llama runner process has terminated: out of memory"),
            "out of memory",
        ),
    ],
    ids=["stream without its final message", "error mid-stream"],
)
def test_a_server_answering_broken_costs_two_strikes_of_three_tries_then_halts_with_its_message(
    git_repo: Path, run_git: Any, reply: Reply, said: str
) -> None:
    (git_repo / "hub.yaml").write_text(hub_yaml(), encoding="utf-8")
    run_git(git_repo, "commit", "-qam", "configure")
    with FakeOllama({IMPL: lambda _b: reply}) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")

        def hub(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "hub", *args], cwd=git_repo, env=env, capture_output=True, text=True,
                timeout=120, check=False,
            )  # fmt: skip

        assert hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py").returncode == 0
        setup = hub("next", "--json")
        assert json.loads(setup.stdout)["phase"] == "setup-task", setup.stdout + setup.stderr
        first = hub("next", "--json")
        assert first.returncode == 0, first.stdout + first.stderr
        assert json.loads(first.stdout)["to"] == "pending_implementer"  # a strike
        assert len(fake.chat_requests(IMPL)) == BROKEN_TRIES  # not 30 minutes of them
        second = hub("next", "--json")

    assert second.returncode == 4, second.stdout + second.stderr
    assert json.loads(second.stdout)["to"] == "erik_consultation"
    assert len(fake.chat_requests(IMPL)) == 2 * BROKEN_TRIES
    [report] = (git_repo / "_handoff" / "tasks").glob("*/STALL_REPORT.md")
    text = report.read_text(encoding="utf-8")
    assert "server_error" in text and said in text and "answered broken 3 times" in text
    assert "lower models.<model>.num_ctx" in text
