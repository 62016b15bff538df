"""Agent mode through the worker bridge: the hub's own worker (in process and `hub worker serve` over
MCP stdio) carries the tools and the turns to Ollama and brings the model's calls back; its ollama_run
holds them to limits; npm ollama-mcp gets the turns as text and no tools."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.core.config import WorkerServer
from hub.core.errors import WorkerError
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest, ToolCall
from hub.workers.bridge import HUB_DIALECT, NPM_DIALECT, WorkerClient
from hub.workers.inprocess import InProcessWorker
from hub.workers.ollama import OllamaProvider
from hub.workers.worker_server import build_server
from hub.workers.worker_tools import RUN_ARGUMENTS

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
TURNS = (
    {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [ToolCall("read_file", {"path": "calc.py"}, "c1")],
    },
    {
        "role": "tool",
        "content": "1: def add(a, b):\n2:     return a - b",
        "tool_call_id": "c1",
        "name": "read_file",
    },
)


@pytest.fixture(scope="module", params=["inprocess", "mcp"])
def worker(
    request: pytest.FixtureRequest,
    fake: FakeOllama,
    hub_serve: tuple[str, ...],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WorkerClient]:
    server = (
        WorkerServer(name="hub", transport="inprocess")
        if request.param == "inprocess"
        else WorkerServer(name="hub", command=hub_serve)
    )
    with WorkerClient(server, fake.url, log_dir=tmp_path_factory.mktemp("logs")) as client:
        yield client


def ask(model: str, **overrides: Any) -> ChatRequest:
    values: dict[str, Any] = {
        "model": model,
        "prompt": "Fix add in calc.py.",
        "tools": (READ_TOOL,),
        "num_ctx": 4096,
    }
    return ChatRequest(**{**values, **overrides})


def test_the_hub_worker_carries_tools_and_turns_and_brings_the_calls_back(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    model = f"agent-{worker.server.transport}"
    edit = {"name": "edit_file", "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"}, "id": "e1"}
    fake.script(model, Reply(text="Found it.", tool_calls=(edit,)))
    generation = worker.generate(ask(model, system="You fix code.", turns=TURNS))
    assert worker.dialect == HUB_DIALECT and worker.carries_turns
    assert generation.text == "Found it."
    assert generation.tool_calls == (
        ToolCall("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}, "e1"),
    )
    (sent,) = fake.chat_requests(model)
    assert sent["tools"] == [READ_TOOL]
    assert sent["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "calc.py"}}}],
        },
        {"role": "tool", "content": "1: def add(a, b):\n2:     return a - b", "tool_name": "read_file"},
    ]


def test_a_broken_call_keeps_its_problem_across_the_bridge(worker: WorkerClient, fake: FakeOllama) -> None:
    model = f"broken-{worker.server.transport}"
    fake.script(model, Reply(tool_calls=({"name": "read_file", "arguments": "path=calc.py"},)))
    (call,) = worker.generate(ask(model)).tool_calls
    assert (call.name, call.arguments) == ("read_file", {})
    assert "not valid JSON" in call.problem


def test_a_reply_without_calls_has_none(worker: WorkerClient, fake: FakeOllama) -> None:
    model = f"plain-{worker.server.transport}"
    fake.script(model, "just text")
    generation = worker.generate(ask(model, tools=()))
    assert generation.text == "just text" and generation.tool_calls == ()
    assert "tools" not in fake.chat_requests(model)[0]


def over_the_sdk(provider: OllamaProvider, calls: list[dict[str, Any]]) -> list[tuple[bool, str]]:
    from mcp import Client
    from mcp.types import TextContent

    results: list[tuple[bool, str]] = []

    async def main() -> None:
        async with Client(build_server(provider)) as client:
            for args in calls:
                result = await client.call_tool("ollama_run", args)
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                results.append((bool(result.is_error), text))

    anyio.run(main)
    return results


BAD_ARGUMENTS = [
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0]"),
    ({"tools": [READ_TOOL] * 129}, "at most 128 tools"),
    ({"turns": [{"role": "system", "content": "x"}]}, "turns[0]"),
    (
        {"turns": [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "x=1"}]}]},
        "turns[0].tool_calls[0]",
    ),
    ({"turns": [{"role": "tool", "content": "r", "tool_call_id": 7}]}, "turns[0].tool_call_id"),
]


def test_ollama_run_refuses_malformed_tools_and_turns_in_process_and_over_mcp(fake: FakeOllama) -> None:
    fake.add_model("limits")
    calls = [{"model": "limits", "prompt": "p", **extra} for extra, _ in BAD_ARGUMENTS]
    inprocess = InProcessWorker("hub", fake.url)
    inprocess.start()
    provider = OllamaProvider(fake.url)
    try:
        here = [inprocess.call_tool("ollama_run", args, timeout=30, raise_on_error=False) for args in calls]
        there = over_the_sdk(provider, calls)
    finally:
        inprocess.stop()
        provider.close()
    for (_, words), mine, sdk in zip(BAD_ARGUMENTS, here, there, strict=True):
        assert mine.is_error and sdk[0], words
        assert words in mine.text, mine.text
        # The SDK checks the argument types first (tool_call_id 7), our limits then: both refuse.
        assert "ollama_run" in sdk[1]
    assert fake.chat_requests("limits") == []


def test_the_in_process_worker_lists_ollama_runs_arguments_as_the_sdk_publishes_them() -> None:
    from mcp import Client

    published: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(OllamaProvider("http://127.0.0.1:9"))) as client:
            for tool in (await client.list_tools()).tools:
                if tool.name == "ollama_run":
                    published.update(tool.input_schema["properties"])

    anyio.run(main)
    assert sorted(published) == sorted(RUN_ARGUMENTS)
    inprocess = InProcessWorker("hub", "http://127.0.0.1:9")
    inprocess.start()
    try:
        (run,) = [t for t in inprocess.list_tools() if t.name == "ollama_run"]
    finally:
        inprocess.stop()
    assert sorted(run.input_schema["properties"]) == sorted(RUN_ARGUMENTS)


@pytest.fixture(scope="module")
def npm_worker(
    fake: FakeOllama, node_server: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerClient]:
    server = WorkerServer(name="npm", command=("node", str(node_server("ollama-mcp"))))
    with WorkerClient(server, fake.url, log_dir=tmp_path_factory.mktemp("logs")) as worker:
        yield worker


def test_npm_ollama_mcp_gets_the_turns_as_text_and_no_tools(
    npm_worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("npm-agent", '```json\n{"name": "read_file", "arguments": {"path": "b.py"}}\n```')
    generation = npm_worker.generate(ask("npm-agent", turns=TURNS))
    assert npm_worker.dialect == NPM_DIALECT and not npm_worker.carries_turns
    # No native calls: the reply's text holds the call, for the agent's text fallback to read.
    assert generation.tool_calls == () and '"read_file"' in generation.text
    sent = fake.chat_requests("npm-agent")[-1]
    assert not sent.get("tools")
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    called = sent["messages"][1]["content"]
    assert called.startswith("Let me look.\n\n```json\n")
    assert json.loads(called.split("```json\n")[1].split("\n```")[0]) == {
        "name": "read_file",
        "arguments": {"path": "calc.py"},
    }
    assert sent["messages"][2]["content"] == "Result of read_file:\n\n1: def add(a, b):\n2:     return a - b"


ORIGINAL = """
import json
from mcp.server.mcpserver import MCPServer

server = MCPServer("original-ollama-mcp")


@server.tool(structured_output=False)
def ollama_run(model: str, prompt: str, task_type: str | None = None, options: dict | None = None) -> str:
    return json.dumps({"stdout": "ran: " + prompt, "stderr": "", "exitCode": 0, "metadata": {}})


@server.tool(structured_output=False)
def ollama_list_models() -> str:
    return json.dumps({"models": ["m"]})


server.run()
"""


def test_a_worker_whose_ollama_run_takes_no_turns_refuses_them_rather_than_drop_them(tmp_path: Path) -> None:
    # The original ollama-mcp's contract: its schema would strip tools and turns without a word.
    script = tmp_path / "original.py"
    script.write_text(ORIGINAL, encoding="utf-8")
    server = WorkerServer(name="original", command=(sys.executable, str(script)))
    with WorkerClient(server, "http://127.0.0.1:9", log_dir=tmp_path / "logs") as worker:
        assert worker.generate(ChatRequest(model="m", prompt="hi")).text == "ran: hi"
        assert worker.dialect == HUB_DIALECT and not worker.carries_turns
        with pytest.raises(WorkerError, match=r"'original' cannot carry agent mode's tools and turns"):
            worker.generate(ask("m", turns=TURNS))
