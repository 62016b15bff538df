"""The worker tools' translation between ollama_run's arguments/results and ChatRequest/Generation."""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys

from hub.core.errors import ContextOverflow, ModelNotFound, WorkerTimeout
from hub.workers.base import ChatRequest, Generation
from hub.workers.worker_tools import chat_request, error_result, flatten_messages, run_result


def test_options_in_milliseconds_become_the_three_clocks_in_seconds() -> None:
    options = {"timeout": 90_000, "first_token_timeout": 30_000, "stall_timeout": 5_000, "num_ctx": 2048}

    request = chat_request("m", "p", options)

    assert (request.total_timeout, request.first_token_timeout, request.stall_timeout) == (90, 30, 5)
    assert request.num_ctx == 2048


def test_unset_options_keep_the_request_defaults() -> None:
    assert chat_request("m", "p", {}) == ChatRequest(model="m", prompt="p")


def test_a_single_user_message_is_the_prompt_and_system_messages_the_system() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]

    assert flatten_messages(messages) == ("be brief", "hi")


def test_earlier_turns_become_a_transcript() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "more"},
    ]

    assert flatten_messages(messages) == (None, "User: hi\n\nAssistant: hello\n\nUser: more")


def test_a_generation_becomes_the_original_result_shape_with_thinking_kept_apart() -> None:
    generation = Generation(
        text="ok",
        model="m",
        thinking="hmm",
        prompt_tokens=3,
        completion_tokens=1,
        seconds=1.5,
        done_reason="stop",
    )

    result = run_result(generation, "code")

    assert (result["stdout"], result["stderr"], result["exitCode"]) == ("ok", "", 0)
    assert result["metadata"] | {"duration_ms": 0} == {
        "model_used": "m",
        "task_type": "code",
        "prompt_tokens": 3,
        "completion_tokens": 1,
        "duration_ms": 0,
        "first_token_ms": 0,
        "load_ms": 0,
        "tokens_estimated": False,
        "done_reason": "stop",
        "truncated": False,
        "timed_out": False,
        "thinking": "hmm",
    }
    assert result["metadata"]["duration_ms"] == 1500


def test_a_timeout_keeps_the_partial_output_and_names_its_clock() -> None:
    result = error_result(WorkerTimeout("stall", 60, partial_text="half a fun"), "m", 61.0)

    assert (result["stdout"], result["exitCode"], result["error"]) == ("half a fun", -1, "Timeout exceeded")
    meta = result["metadata"]
    assert (meta["error_type"], meta["clock"], meta["timeout_seconds"], meta["timed_out"]) == (
        "WorkerTimeout",
        "stall",
        60,
        True,
    )


def test_other_failures_exit_1_with_enough_detail_to_rebuild_the_error() -> None:
    overflow = error_result(ContextOverflow(9000, 8192), "m", 0.0)["metadata"]
    missing = error_result(ModelNotFound("m"), "m", 0.0)

    assert (overflow["error_type"], overflow["prompt_tokens"], overflow["num_ctx"]) == (
        "ContextOverflow",
        9000,
        8192,
    )
    assert missing["exitCode"] == 1 and missing["metadata"]["model_missing"] == "m"
    assert missing["stderr"] == "model 'm' not found"


def test_a_stdio_worker_dies_with_the_hub_that_spawned_it() -> None:
    # A stand-in hub: a shell that spawns the worker, says its pid, then waits; SIGKILLed like a hub.
    hub = subprocess.Popen(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -m hub worker serve & echo $!; wait"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HUB_LOG_FORMAT": "json"},
    )
    assert hub.stdout is not None and hub.stderr is not None and hub.stdin is not None
    worker = int(hub.stdout.readline())
    watch = os.pidfd_open(worker)
    try:
        # The worker's first log line comes after it armed its parent-death signal: the event to wait on.
        for line in hub.stderr:
            if "worker.serve" in line:
                break
        hub.send_signal(signal.SIGKILL)
        hub.wait(timeout=30)

        ready, _, _ = select.select([watch], [], [], 30)

        assert ready, "the worker outlived the hub that spawned it"
    finally:
        os.close(watch)
        hub.stdout.close()
        hub.stderr.close()
        hub.stdin.close()
