"""The hub's own worker inside the hub's process (`transport: inprocess`): the same tools, arguments,
results and errors as `hub worker serve` over MCP, with no process and no SDK; its clocks, outages,
crashes and restart."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.core.config import WorkerServer
from hub.core.errors import MCPServerCrashed, MCPTimeoutError, ModelNotFound, WorkerTimeout, WorkerUnavailable
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest, Generation
from hub.workers.bridge import HUB_DIALECT, WorkerClient
from hub.workers.inprocess import InProcessWorker
from hub.workers.ollama import OllamaProvider
from hub.workers.worker_server import RunOptions, build_server
from hub.workers.worker_tools import OPTIONS, Limit, ToolResult

INPROCESS = WorkerServer(name="hub", transport="inprocess")


@pytest.fixture
def worker(fake: FakeOllama) -> Iterator[WorkerClient]:
    with WorkerClient(INPROCESS, fake.url) as client:
        yield client


def over_the_sdk(provider: OllamaProvider, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolResult]:
    """The same calls through `hub worker serve`'s MCP server on the SDK's in-memory transport."""
    from mcp import Client
    from mcp.types import TextContent

    results: list[ToolResult] = []

    async def main() -> None:
        async with Client(build_server(provider)) as client:
            for name, args in calls:
                result = await client.call_tool(name, args)
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                results.append(ToolResult(text=text, is_error=bool(result.is_error)))

    anyio.run(main)
    return results


def test_every_tool_answers_as_the_mcp_server_does_over_the_sdk(fake: FakeOllama) -> None:
    fake.script("same", Reply("print(1)", thinking="hm", prompt_eval_count=9, eval_count=3))
    fake.script("same", Reply("print(1)", thinking="hm", prompt_eval_count=9, eval_count=3))
    fake.script("late", Reply("x", first_token_delay=5), Reply("x", first_token_delay=5))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ollama_run", {"model": "same", "prompt": "p", "options": {"num_ctx": 4096, "system": "s"}}),
        ("ollama_run", {"model": "absent", "prompt": "p"}),
        ("ollama_run", {"model": "late", "prompt": "p", "options": {"first_token_timeout": 100}}),
        ("ollama_run", {"model": "same", "prompt": "p", "options": {"num_ctx": 5}}),
        ("ollama_run", {"prompt": "no model"}),
        ("ollama_chat", {"model": "m", "messages": []}),
        ("ollama_chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "options": "{bad"}),
        ("ollama_list_models", {}),
        ("no_such_tool", {}),
    ]
    provider = OllamaProvider(fake.url)
    inprocess = InProcessWorker("hub", fake.url)
    inprocess.start()
    try:
        here = [inprocess.call_tool(name, args, timeout=30, raise_on_error=False) for name, args in calls]
        there = over_the_sdk(provider, calls)
    finally:
        inprocess.stop()
        provider.close()

    assert [without_clock(r) for r in here] == [without_clock(r) for r in there]
    assert [r.is_error for r in here] == [False, False, False, True, True, True, True, False, True]
    assert json.loads(here[0].text)["stdout"] == "print(1)"


def without_clock(result: ToolResult) -> tuple[object, bool]:
    """A result as both workers must give it: the wall-clock figures (`*_ms`) taken out, and a refusal
    of wrong arguments by its wording's start and the argument it names (pydantic words the rest)."""
    if result.is_error:
        head, _, rest = result.text.partition(": ")
        named = [word for word in ("num_ctx", "model", "options", "messages") if word in rest]
        return (head, named[:1]), True
    try:
        data = json.loads(result.text)
    except ValueError:
        return result.text, result.is_error
    metadata = data.get("metadata", {})
    data["metadata"] = {k: v for k, v in metadata.items() if not k.endswith("_ms")}
    return data, result.is_error


def test_the_option_limits_are_the_ones_the_mcp_server_publishes() -> None:
    published = RunOptions.model_json_schema()["properties"]
    kinds = {"string": str, "number": float, "integer": int}

    def limit(schema: dict[str, Any]) -> Limit:
        (typed,) = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return Limit(
            kinds[typed["type"]],
            ge=typed.get("minimum"),
            gt=typed.get("exclusiveMinimum"),
            le=typed.get("maximum"),
        )

    assert {name: limit(schema) for name, schema in published.items()} == OPTIONS


def test_a_role_on_the_inprocess_worker_gets_the_hub_dialect_and_unwrapped_replies(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("coder", Reply("print('hi')", thinking="wants hi", prompt_eval_count=30, eval_count=5))

    generation = worker.generate(ChatRequest(model="coder", prompt="say hi", num_ctx=4096))

    assert worker.dialect == HUB_DIALECT
    assert (generation.text, generation.thinking) == ("print('hi')", "wants hi")
    assert (generation.prompt_tokens, generation.completion_tokens) == (30, 5)
    assert fake.chat_requests("coder")[-1]["options"]["num_ctx"] == 4096


def test_its_clocks_and_a_missing_model_arrive_as_the_same_hub_errors(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("staller", Reply("abcdefgh", stall_after_chars=4, stall_seconds=5, chunk_chars=2))

    with pytest.raises(WorkerTimeout) as stalled:
        worker.generate(ChatRequest(model="staller", prompt="hi", stall_timeout=0.3))
    with pytest.raises(ModelNotFound):
        worker.generate(ChatRequest(model="nowhere", prompt="hi"))

    assert (stalled.value.clock, stalled.value.partial_text) == ("stall", "abcd")


def test_an_unreachable_ollama_is_an_outage_the_phase_waits_out(free_port: int) -> None:
    with WorkerClient(INPROCESS, f"http://127.0.0.1:{free_port}") as client:
        with pytest.raises(WorkerUnavailable):
            client.generate(ChatRequest(model="m", prompt="hi"))
        health = client.check_health(["m"])

    assert not health.reached


class Blocked:
    """A provider whose generation waits until released (a hang no clock of its own ends)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def generate(self, request: ChatRequest) -> Generation:
        self.release.wait(30)
        return Generation(text="late", model=request.model)

    def list_models(self) -> list[str]:
        return []

    def close(self) -> None:
        self.release.set()


def test_a_call_that_hangs_is_cut_at_its_timeout_as_an_mcp_request_is() -> None:
    provider = Blocked()
    inprocess = InProcessWorker("hub", "http://unused", provider_factory=lambda host: provider)
    inprocess.start()
    try:
        with pytest.raises(MCPTimeoutError, match=r"timed out after 0\.2s"):
            inprocess.call_tool("ollama_run", {"model": "m", "prompt": "p"}, timeout=0.2)
    finally:
        inprocess.stop()


class Crashing:
    """A provider that breaks the way no provider should (a bug), once; then answers."""

    made = 0

    def __init__(self) -> None:
        Crashing.made += 1
        self.first = Crashing.made == 1

    def generate(self, request: ChatRequest) -> Generation:
        if self.first:
            raise KeyError("a bug in the worker")
        return Generation(text="fresh", model=request.model)

    def list_models(self) -> list[str]:
        return ["m"]

    def close(self) -> None:
        pass


def test_a_crash_is_reported_with_its_traceback_and_the_next_call_gets_a_fresh_worker() -> None:
    Crashing.made = 0
    inprocess = InProcessWorker("hub", "http://unused", provider_factory=lambda host: Crashing())
    inprocess.start()
    args = {"model": "m", "prompt": "p"}

    with pytest.raises(MCPServerCrashed, match="crashed during tools/call ollama_run: KeyError") as crash:
        inprocess.call_tool("ollama_run", args)
    stopped = not inprocess.running
    inprocess.start()
    result = inprocess.call_tool("ollama_run", args)
    inprocess.stop()

    assert stopped and Crashing.made == 2
    assert "a bug in the worker" in crash.value.stderr_tail and "Traceback" in crash.value.stderr_tail
    assert json.loads(result.text)["stdout"] == "fresh"


def test_the_default_worker_reaches_a_model_without_importing_the_sdk_or_pydantic(
    fake: FakeOllama, tmp_path: Path
) -> None:
    fake.script("coder", "done")
    script = (
        "import sys\n"
        "from hub.core.config import WorkerServer\n"
        "from hub.workers.base import ChatRequest\n"
        "from hub.workers.bridge import WorkerClient\n"
        f"with WorkerClient(WorkerServer(name='hub', transport='inprocess'), {fake.url!r}) as w:\n"
        "    print(w.generate(ChatRequest(model='coder', prompt='p')).text)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'pydantic'}))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["done", "[]"]  # structlog unconfigured logs to stdout
