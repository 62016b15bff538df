"""OllamaProvider against a real FakeOllama: streaming, the three clocks, errors and retries."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from hub.core.errors import (
    ContextOverflow,
    MalformedStream,
    ModelNotFound,
    RunawayOutput,
    WorkerTimeout,
    WorkerUnavailable,
)
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest
from hub.workers.ollama import OllamaProvider


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def provider(fake: FakeOllama) -> Iterator[OllamaProvider]:
    with OllamaProvider(fake.url, retries=2, backoff=0.01) as p:
        yield p


def request(**overrides: Any) -> ChatRequest:
    values: dict[str, Any] = {
        "model": "m",
        "prompt": "write a function",
        "first_token_timeout": 2.0,
        "stall_timeout": 2.0,
        "total_timeout": 5.0,
    }
    values.update(overrides)
    return ChatRequest(**values)


def timeout_of(provider: OllamaProvider, req: ChatRequest) -> tuple[WorkerTimeout, float]:
    started = time.monotonic()
    with pytest.raises(WorkerTimeout) as caught:
        provider.generate(req)
    return caught.value, time.monotonic() - started


def test_streamed_chunks_are_assembled_into_the_text(fake: FakeOllama, provider: OllamaProvider) -> None:
    text = "def add(a, b):\n    return a + b\n" * 5
    fake.script("m", Reply(text=text, chunk_chars=3))
    generation = provider.generate(request())
    assert generation.text == text.strip()
    assert generation.raw == text
    assert generation.model == "m"
    assert generation.done_reason == "stop"
    assert len(fake.chat_requests()) == 1


def test_every_call_sends_num_ctx_temperature_and_keep_alive(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", "one", "two")
    provider.generate(request(num_ctx=4096, system="be brief"))
    provider.generate(request(num_ctx=4096, temperature=0.0, num_predict=64))
    first, second = fake.chat_requests("m")
    assert first["options"] == {"num_ctx": 4096, "temperature": 0.2}
    assert second["options"] == {"num_ctx": 4096, "temperature": 0.0, "num_predict": 64}
    assert first["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "write a function"},
    ]
    assert first["stream"] is True and first["keep_alive"] == "30m"


def test_a_slow_first_token_fires_the_first_token_clock(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="late", first_token_delay=0.5))
    error, seconds = timeout_of(provider, request(first_token_timeout=0.2, stall_timeout=0.05))
    assert (error.clock, error.seconds, error.partial_text) == ("first_token", 0.2, "")
    assert seconds < 0.45
    assert len(fake.chat_requests()) == 1  # a timeout is never retried


def test_the_first_token_clock_also_runs_after_early_headers(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="late", first_token_delay=30, early_headers=True))
    error, seconds = timeout_of(provider, request(first_token_timeout=0.2, stall_timeout=0.05))
    assert error.clock == "first_token"
    assert seconds < 1.0


def test_a_first_token_within_its_clock_is_not_a_stall(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="worth the wait", first_token_delay=0.15))
    generation = provider.generate(request(first_token_timeout=1.0, stall_timeout=0.05))
    assert generation.text == "worth the wait"
    assert generation.first_token_seconds >= 0.15


def test_a_stall_mid_stream_fires_the_stall_clock_with_the_partial_text(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="abcdefgh" * 4, stall_after_chars=8, stall_seconds=30))
    error, seconds = timeout_of(provider, request(stall_timeout=0.2, total_timeout=10.0))
    assert (error.clock, error.seconds, error.partial_text) == ("stall", 0.2, "abcdefgh")
    assert seconds < 1.0  # caught by the stall clock, long before the total
    assert len(fake.chat_requests()) == 1


def test_a_pause_shorter_than_the_stall_clock_passes(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="abcdefgh" * 4, stall_after_chars=8, stall_seconds=0.1))
    assert provider.generate(request(stall_timeout=0.5)).text == "abcdefgh" * 4


def test_a_slow_but_steady_stream_fires_the_total_clock(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="x" * 40, chunk_chars=2, chunk_delay=0.05))
    error, seconds = timeout_of(
        provider, request(first_token_timeout=0.3, stall_timeout=0.3, total_timeout=0.4)
    )
    assert (error.clock, error.seconds) == ("total", 0.4)
    assert 0 < len(error.partial_text) < 40
    assert 0.35 < seconds < 0.8


def test_an_unknown_model_is_model_not_found(fake: FakeOllama, provider: OllamaProvider) -> None:
    with pytest.raises(ModelNotFound) as caught:
        provider.generate(request(model="ghost:7b"))
    assert caught.value.model == "ghost:7b"
    assert "ghost:7b" in str(caught.value)
    assert "try pulling it first" in str(caught.value)
    assert fake.chat_requests() == []  # the load before the call found it missing


def test_a_broken_ndjson_line_is_a_malformed_stream_naming_it(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="abcdefghijklmnop", truncate_line=True))
    with pytest.raises(MalformedStream, match=r'not a JSON object: \{"model":"m"'):
        provider.generate(request())
    assert len(fake.chat_requests()) == 1


def test_a_connection_reset_mid_stream_is_an_outage_with_the_partial_text_and_not_retried_here(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="0123456789" * 3, drop_after_chars=12), "a retry would get this")
    with pytest.raises(WorkerUnavailable, match="reset mid-generation after 12 characters") as caught:
        provider.generate(request())
    assert caught.value.partial_text == "012345678901"
    assert len(fake.chat_requests()) == 1


def test_a_stream_cut_just_before_its_final_chunk_is_an_outage(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="complete text", drop_after_chars=10_000))
    with pytest.raises(WorkerUnavailable, match="13 characters"):
        provider.generate(request())


def test_a_server_error_is_retried_then_succeeds(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(status=500), "second time lucky")
    assert provider.generate(request()).text == "second time lucky"
    assert len(fake.chat_requests()) == 2


def test_server_errors_past_the_retries_are_unavailable_naming_the_host(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", *[Reply(status=503, error="loading model")] * 3, "never reached")
    with pytest.raises(WorkerUnavailable, match="loading model") as caught:
        provider.generate(request())
    assert fake.url in str(caught.value)
    assert len(fake.chat_requests()) == 3


def test_a_refused_connection_is_unavailable_naming_the_host() -> None:
    with FakeOllama() as gone:
        url = gone.url
    with OllamaProvider(url, retries=1, backoff=0.01) as provider, pytest.raises(WorkerUnavailable) as caught:
        provider.generate(request())
    assert url in str(caught.value)
    assert "Connection refused" in str(caught.value)


def test_an_error_line_mid_stream_is_raised_with_its_message(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="partial", error="CUDA error: out of memory"))
    with pytest.raises(WorkerUnavailable, match="CUDA error: out of memory") as caught:
        provider.generate(request())
    assert caught.value.partial_text == "partial"
    assert len(fake.chat_requests()) == 1


def test_think_blocks_are_stripped_and_kept_apart(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="the answer", thinking="first, consider"))
    generation = provider.generate(request())
    assert (generation.text, generation.thinking) == ("the answer", "first, consider")
    assert generation.raw.startswith("<think>")


def test_a_separate_thinking_field_is_kept_apart_too(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text="the answer", thinking="pondering", thinking_field=True))
    generation = provider.generate(request())
    assert (generation.text, generation.thinking) == ("the answer", "pondering")


def test_token_counts_durations_and_done_reason_are_reported(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script(
        "m",
        Reply(
            text="x" * 30, prompt_eval_count=11, eval_count=7, done_reason="length", first_token_delay=0.05
        ),
        # The continuation of the cut answer adds nothing and is cut again: the answer stays "length".
        Reply(text="x" * 30, eval_count=0, done_reason="length"),
    )
    generation = provider.generate(request())
    assert (generation.prompt_tokens, generation.completion_tokens) == (11, 7)
    assert generation.done_reason == "length"
    assert 0.05 <= generation.first_token_seconds <= generation.seconds < 2


def test_a_prompt_larger_than_num_ctx_is_refused_before_sending(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", "unused")
    with pytest.raises(ContextOverflow) as caught:
        provider.generate(request(prompt="def f(x): return x + 1\n" * 300, system="s" * 100, num_ctx=1024))
    assert caught.value.num_ctx == 1024
    assert caught.value.prompt_tokens > 1024
    assert "1024" in str(caught.value) and str(caught.value.prompt_tokens) in str(caught.value)
    assert fake.chat_requests() == []


def test_a_prompt_eval_count_far_below_the_prompt_is_flagged_as_truncation(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script("m", Reply(text="ok", prompt_eval_count=200))
    with structlog.testing.capture_logs() as logs:
        generation = provider.generate(request(prompt="y" * 8000, num_ctx=8192))
    assert generation.truncated is True
    warnings = [e for e in logs if e["event"] == "worker.prompt_truncated"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    assert warnings[0]["prompt_eval_count"] == 200


def test_a_full_prompt_eval_count_is_not_truncation(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", "ok")
    assert provider.generate(request(prompt="y" * 8000, num_ctx=8192)).truncated is False


def test_health_lists_models_and_names_the_missing_ones(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.add_model("qwen2.5-coder:7b")
    fake.add_model("tiny")
    health = provider.check_health(["qwen2.5-coder:7b", "tiny", "absent:1b"])
    assert health.ok is False
    assert health.models == ("qwen2.5-coder:7b", "tiny:latest")
    assert health.missing == ("absent:1b",)
    assert provider.check_health(["tiny:latest"]).ok is True
    assert provider.list_models() == ["qwen2.5-coder:7b", "tiny:latest"]


def test_health_of_an_unreachable_server_is_not_ok() -> None:
    with FakeOllama() as gone:
        url = gone.url
    with OllamaProvider(url) as provider:
        health = provider.check_health(["m"])
        assert health.ok is False and url in health.detail
        with pytest.raises(WorkerUnavailable):
            provider.list_models()


def test_closing_the_provider_leaves_no_thread_behind(fake: FakeOllama) -> None:
    fake.script("m", "one", Reply(text="two", stall_after_chars=1, stall_seconds=30))
    with OllamaProvider(fake.url) as provider:
        provider.generate(request())
        with pytest.raises(WorkerTimeout):
            provider.generate(request(stall_timeout=0.1))
    assert not [t for t in threading.enumerate() if t.name == "hub-stream-watchdog"]


def test_a_bare_host_is_accepted_like_ollama_host(fake: FakeOllama) -> None:
    fake.script("m", "hi")
    with OllamaProvider(f"127.0.0.1:{fake.port}") as provider:
        assert provider.host == fake.url
        assert provider.generate(request()).text == "hi"


CODE = "def add(a, b):\n    return a + b\n\n\n" * 12


def test_an_answer_cut_off_at_num_predict_is_continued_where_it_stopped(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    fake.script(
        "m", Reply(text=CODE[:70], done_reason="length", eval_count=20), Reply(text=CODE, eval_count=30)
    )
    generation = provider.generate(request(num_predict=20))

    assert generation.text == CODE.strip()
    assert generation.done_reason == "stop"
    assert generation.completion_tokens == 50
    first, second = fake.chat_requests()
    # The same conversation, with the answer so far as the assistant's turn to continue.
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1] == {"role": "assistant", "content": CODE[:70]}
    assert not generation.truncated  # the server's cache makes the continuation's count small: no cut


def test_continuing_stops_after_two_continuations_and_the_answer_stays_cut(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    cuts = [Reply(text=CODE[:n], done_reason="length") for n in (40, 80, 120)]
    fake.script("m", *cuts, Reply(text=CODE))
    generation = provider.generate(request(num_predict=20))

    assert generation.done_reason == "length"
    assert generation.raw == CODE[:120]
    assert len(fake.chat_requests()) == 3


def test_a_continuation_that_would_not_fit_the_window_is_not_sent(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    partial = CODE * 4  # with the room for another num_predict, more than the window holds
    fake.script("m", Reply(text=partial, done_reason="length"), Reply(text=partial + "more"))
    generation = provider.generate(request(num_ctx=1024, num_predict=500))

    assert generation.done_reason == "length"
    assert len(fake.chat_requests()) == 1


def test_a_continuation_that_fails_leaves_the_answer_cut(fake: FakeOllama, provider: OllamaProvider) -> None:
    fake.script("m", Reply(text=CODE[:70], done_reason="length"), Reply(status=400, error="bad request"))
    generation = provider.generate(request(num_predict=20))

    assert (generation.raw, generation.done_reason) == (CODE[:70], "length")


def test_the_models_context_length_is_asked_once_per_process_not_per_phase(fake: FakeOllama) -> None:
    # The answer is kept per process, by server and model: a model no other test asks for, so a fake that
    # an earlier test ran on the same port cannot have answered it already.
    fake.script("context-asked-once", "one", "two")
    for _ in range(2):  # each phase makes its own provider
        with OllamaProvider(fake.url) as provider:
            provider.generate(request(model="context-asked-once"))
    assert len([r for r in fake.requests if r.path == "/api/show"]) == 1


LOOP = "def abbreviate(words):\n" + "".join(
    f'    words = words.replace("{c}", "")\n' for c in "-.,!?;:()[]{}|/<>@#$%^&*" * 40
)


def test_an_answer_that_loops_is_stopped_early_with_what_it_said(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    # A real Qwen2.5-Coder-1.5B wrote this kind of cycle until its 900 s clock ran out.
    fake.script("m", Reply(text=LOOP, chunk_chars=40))
    with pytest.raises(RunawayOutput) as caught:
        provider.generate(request())
    assert "the answer repeats itself" in str(caught.value)
    partial = caught.value.partial_text
    assert partial.startswith("def abbreviate(words):") and len(partial) < len(LOOP) / 2


def test_a_loop_inside_one_line_is_stopped_early_too(fake: FakeOllama, provider: OllamaProvider) -> None:
    # The same model on exercism's luhn: one line of chained .replace(...) calls, for 900 s.
    chain = "".join(f'.replace("{c}", "")' for c in "?!@#$%^&*()[]{}|:;~`'" * 200)
    fake.script(
        "m",
        Reply(text=f"class Luhn:\n    def __init__(self, n):\n        self.n = n{chain}\n", chunk_chars=40),
    )
    with pytest.raises(RunawayOutput) as caught:
        provider.generate(request())
    assert "one piece of" in str(caught.value) and len(caught.value.partial_text) < len(chain) / 2


def test_long_code_with_many_repeated_short_lines_is_no_loop(
    fake: FakeOllama, provider: OllamaProvider
) -> None:
    text = "".join(
        f"def f{i}(x):\n    if x:\n        pass\n    return (\n        x + {i}\n    )\n\n" for i in range(300)
    )
    fake.script("m", Reply(text=text, chunk_chars=200))
    assert provider.generate(request()).text == text.strip()
