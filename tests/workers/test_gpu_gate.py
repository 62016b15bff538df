"""The GPU gate (hub/workers/gpu_gate.py) and FakeOllama's simulated GPU: slots, the loaded model first, loads."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from hub.core.errors import WorkerTimeout, WorkerUnavailable
from hub.testing import FakeOllama
from hub.testing.fake_gpu import SimulatedGPU
from hub.workers.gpu_gate import Gate, Host, Loaded, order_hosts, should_defer

WAIT = 30.0  # a bound on every wait below, never a sleep


CODER, REVIEWER = Loaded("coder", 8192), Loaded("reviewer", 8192)


def test_a_server_that_ran_the_model_last_comes_first_then_an_idle_one() -> None:
    a, b, c = Host("http://a:11434"), Host("http://b:11434"), Host("http://c:11434")
    last = {a.key: CODER, b.key: None, c.key: REVIEWER}
    assert order_hosts([a, b, c], REVIEWER, last) == [c, b, a]
    assert order_hosts([a, b, c], CODER, last) == [a, b, c]


def test_the_same_model_with_another_num_ctx_is_not_loaded_and_ranks_below_an_idle_server() -> None:
    # Ollama reloads the weights for a changed num_ctx: as costly as another model.
    a, b, c = Host("http://a:11434"), Host("http://b:11434"), Host("http://c:11434")
    last = {a.key: Loaded("coder", 16384), b.key: None, c.key: Loaded("coder", None)}
    assert order_hosts([a, b, c], CODER, last) == [b, a, c]
    assert order_hosts([a, b, c], Loaded("coder", 16384), last) == [a, b, c]
    # None (the server's default window) matches only None.
    assert order_hosts([a, b, c], Loaded("coder", None), last) == [c, b, a]


def test_another_model_defers_only_while_calls_for_the_loaded_one_wait() -> None:
    assert should_defer(REVIEWER, CODER, Counter({CODER: 1})) is True
    assert should_defer(REVIEWER, CODER, Counter({REVIEWER: 3})) is False
    assert should_defer(CODER, CODER, Counter({CODER: 2})) is False
    assert should_defer(REVIEWER, None, Counter({CODER: 2})) is False


def test_the_loaded_model_with_another_num_ctx_defers_like_a_switch() -> None:
    wider = Loaded("coder", 16384)
    assert should_defer(wider, CODER, Counter({CODER: 1})) is True
    assert should_defer(Loaded("coder", None), CODER, Counter({CODER: 1})) is True
    assert should_defer(CODER, Loaded("coder", None), Counter({Loaded("coder", None): 1})) is True
    assert should_defer(wider, CODER, Counter({wider: 2})) is False


def test_never_more_calls_at_once_than_the_slots(tmp_path: Path) -> None:
    gate = Gate(tmp_path, [Host("http://gpu:11434", slots=2)])
    inside = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()
    two_in = threading.Event()

    def call() -> None:
        nonlocal inside, most
        with gate.slot("coder", 8192, time.monotonic() + WAIT):
            with lock:
                inside += 1
                most = max(most, inside)
                if inside == 2:
                    two_in.set()
            release.wait(WAIT)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    assert two_in.wait(WAIT)
    release.set()
    for t in threads:
        t.join(WAIT)
    assert most == 2


def test_waiting_calls_for_the_loaded_model_go_before_a_switch(tmp_path: Path) -> None:
    queued_count = threading.Semaphore(0)
    gate = Gate(tmp_path, [Host("http://gpu:11434", slots=1)], on_queued=lambda _m: queued_count.release())
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with gate.slot("coder", 8192, time.monotonic() + WAIT):
            first_in.set()
            release.wait(WAIT)

    def call(model: str) -> None:
        with gate.slot(model, 8192, time.monotonic() + WAIT):
            order.append(model)

    first = threading.Thread(target=holder)
    first.start()
    assert first_in.wait(WAIT)
    assert queued_count.acquire(timeout=WAIT)  # the holder's own call
    waiters = [threading.Thread(target=call, args=(model,)) for model in ("reviewer", "coder", "coder")]
    for t in waiters:
        t.start()
        assert queued_count.acquire(timeout=WAIT)  # counted as waiting before the next one starts
    release.set()
    for t in [first, *waiters]:
        t.join(WAIT)
    assert order == ["coder", "coder", "reviewer"]


def test_a_pool_sends_a_call_to_the_server_with_its_model_and_num_ctx_loaded(tmp_path: Path) -> None:
    a, b = Host("http://a:11434"), Host("http://b:11434")
    gate = Gate(tmp_path, [a, b])
    with (
        gate.slot("coder", 8192, time.monotonic() + WAIT) as first,
        gate.slot("coder", 16384, time.monotonic() + WAIT) as second,
    ):
        assert (first, second) == (a, b)
    # Both servers have `coder`; only b has it with a 16384 window (a would reload the weights).
    with gate.slot("coder", 16384, time.monotonic() + WAIT) as chosen:
        assert chosen == b
    with gate.slot("coder", 8192, time.monotonic() + WAIT) as chosen:
        assert chosen == a
    assert gate.loaded(a) == Loaded("coder", 8192) and gate.loaded(b) == Loaded("coder", 16384)


def test_waiting_calls_for_the_loaded_num_ctx_go_before_one_that_changes_it(tmp_path: Path) -> None:
    queued_count = threading.Semaphore(0)
    gate = Gate(tmp_path, [Host("http://gpu:11434", slots=1)], on_queued=lambda _m: queued_count.release())
    order: list[int | None] = []
    first_in = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with gate.slot("coder", 8192, time.monotonic() + WAIT):
            first_in.set()
            release.wait(WAIT)

    def call(num_ctx: int | None) -> None:
        with gate.slot("coder", num_ctx, time.monotonic() + WAIT):
            order.append(num_ctx)

    first = threading.Thread(target=holder)
    first.start()
    assert first_in.wait(WAIT)
    assert queued_count.acquire(timeout=WAIT)  # the holder's own call
    waiters = [threading.Thread(target=call, args=(n,)) for n in (16384, 8192, 8192)]
    for t in waiters:
        t.start()
        assert queued_count.acquire(timeout=WAIT)  # counted as waiting before the next one starts
    release.set()
    for t in [first, *waiters]:
        t.join(WAIT)
    assert order == [8192, 8192, 16384]


def test_a_call_that_cannot_get_a_slot_before_its_deadline_times_out(tmp_path: Path) -> None:
    gate = Gate(tmp_path, [Host("http://gpu:11434", slots=1)])
    with (
        gate.slot("coder", None, time.monotonic() + WAIT),
        pytest.raises(WorkerTimeout, match="gpu_queue"),
        gate.slot("coder", None, time.monotonic()),
    ):
        pass
    with gate.slot("coder", None, time.monotonic()):
        pass  # free again


def test_the_simulated_gpu_counts_a_load_for_every_switch_and_a_changed_num_ctx() -> None:
    gpu = SimulatedGPU(slots=1, max_loaded=1)
    with FakeOllama({"coder": lambda _b: "x", "reviewer": lambda _b: "y"}, gpu=gpu) as fake:

        def chat(model: str, num_ctx: int) -> None:
            body = {"model": model, "messages": [], "stream": False, "options": {"num_ctx": num_ctx}}
            assert httpx.post(fake.url + "/api/chat", json=body, timeout=WAIT).status_code == 200

        chat("coder", 8192)
        chat("coder", 8192)
        chat("reviewer", 8192)
        chat("coder", 8192)
        chat("coder", 16384)
        ps = httpx.get(fake.url + "/api/ps", timeout=WAIT).json()["models"]
    assert gpu.stats.loads == 4 and gpu.stats.generations == 5
    assert [m["name"] for m in ps] == ["coder:latest"]
    assert ps[0]["context_length"] == 16384


def test_the_simulated_gpu_counts_a_call_as_asked_for_until_its_answer_is_known_not_until_sent() -> None:
    # A client that has read the last bytes may send its next call before the server's thread for the
    # first runs again: that is one call at a time, and must not count as two.
    gpu = SimulatedGPU(slots=2)  # two slots: the second call runs while the first's handler is open

    with gpu.generation("coder", None) as answered:
        answered()
        with gpu.generation("coder", None):  # sent once the first's answer is out
            pass
    assert gpu.stats.max_requested == 1 and gpu.stats.generations == 2

    with gpu.generation("coder", None), gpu.generation("coder", None):  # no answer yet: two at once
        pass
    assert gpu.stats.max_requested == 2


# -- a pool with a dead server ---------------------------------------------------------------------------


def test_a_server_marked_down_is_left_out_while_another_is_not() -> None:
    a, b = Host("http://a:11434"), Host("http://b:11434")
    last = {a.key: CODER, b.key: None}
    assert order_hosts([a, b], CODER, last, frozenset({a.key})) == [b]
    # Every server down: the usual order, and the outage is the caller's to wait out.
    assert order_hosts([a, b], CODER, last, frozenset({a.key, b.key})) == [a, b]


def test_a_failed_call_marks_its_server_down_until_it_answers_a_probe_again(tmp_path: Path) -> None:
    now = [1000.0]
    answers = {"http://a:11434": False}
    a, b = Host("http://a:11434"), Host("http://b:11434")
    gate = Gate(tmp_path, [a, b], probe=lambda url: answers.get(url, True), clock=lambda: now[0])
    with pytest.raises(WorkerUnavailable), gate.slot("coder", 8192, time.monotonic() + WAIT) as first:
        assert first == a
        raise WorkerUnavailable("connection refused")
    with gate.slot("coder", 8192, time.monotonic() + WAIT) as chosen:
        assert chosen == b  # although a ran the model last
    now[0] += 10  # the mark has run out, but a does not answer: marked again, for longer
    with gate.slot("coder", 8192, time.monotonic() + WAIT) as chosen:
        assert chosen == b
    mark = gate.down(a)
    assert mark is not None and mark.failures == 2 and mark.until - now[0] == 10
    now[0] += 11
    answers["http://a:11434"] = True  # back
    with gate.slot("coder", 8192, time.monotonic() + WAIT) as chosen:
        assert chosen == a
    assert gate.down(a) is None


def test_a_down_mark_from_before_a_clock_step_back_runs_out_at_once(tmp_path: Path) -> None:
    now = [100_000.0]
    a = Host("http://a:11434")
    gate = Gate(tmp_path, [a], probe=lambda url: True, clock=lambda: now[0])
    gate.mark_down(a, "connection refused")
    now[0] -= 3600  # the clock stepped back an hour: the mark would otherwise hold for an hour and more
    assert gate.skipped() == frozenset()
    assert gate.down(a) is None
