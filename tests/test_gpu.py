"""The GPU gate (hub/gpu.py) and FakeOllama's simulated GPU: slots, the loaded model first, loads."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from hub.errors import WorkerTimeout
from hub.gpu import Gate, Host, order_hosts, should_defer
from hub.testing import FakeOllama
from hub.testing.gpu import SimulatedGPU

WAIT = 30.0  # a bound on every wait below, never a sleep


def test_a_server_that_ran_the_model_last_comes_first_then_an_idle_one() -> None:
    a, b, c = Host("http://a:11434"), Host("http://b:11434"), Host("http://c:11434")
    last = {a.key: "coder", b.key: None, c.key: "reviewer"}
    assert order_hosts([a, b, c], "reviewer", last) == [c, b, a]
    assert order_hosts([a, b, c], "coder", last) == [a, b, c]


def test_another_model_defers_only_while_calls_for_the_loaded_one_wait() -> None:
    assert should_defer("reviewer", "coder", Counter({"coder": 1})) is True
    assert should_defer("reviewer", "coder", Counter({"reviewer": 3})) is False
    assert should_defer("coder", "coder", Counter({"coder": 2})) is False
    assert should_defer("reviewer", None, Counter({"coder": 2})) is False


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
