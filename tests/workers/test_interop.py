"""Interop with MCP servers nobody here wrote, installed by npm from package.json (`make install`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import WorkerServer
from hub.core.errors import ContextOverflow, ModelNotFound, WorkerError, WorkerTimeout, WorkerUnavailable
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest
from hub.workers.bridge import NPM_DIALECT, WorkerClient
from hub.workers.mcp_client import MCPClient


def check_everything(client: MCPClient) -> None:
    names = {t.name for t in client.list_tools()}
    assert {"echo", "get-sum"} <= names
    assert "hello interop" in client.call_tool("echo", {"message": "hello interop"}).text
    assert "42" in client.call_tool("get-sum", {"a": 40, "b": 2}).text


def test_mcp_client_drives_server_everything_over_stdio(
    node_server: Callable[[str], Path], log_dir: Path
) -> None:
    command = ["node", str(node_server("everything")), "stdio"]

    with MCPClient(command=command, name="everything", log_dir=log_dir) as client:
        check_everything(client)


def test_mcp_client_drives_server_everything_over_streamable_http(
    node_server: Callable[[str], Path], free_port: int, spawn_server: Callable[..., Any]
) -> None:
    argv = ["node", str(node_server("everything")), "streamableHttp"]
    spawn_server(argv, {"PORT": str(free_port)}, rf"listening on port {free_port}")

    with MCPClient("http", url=f"http://127.0.0.1:{free_port}/mcp", name="everything-http") as client:
        check_everything(client)


def test_worker_client_refuses_a_server_without_worker_tools_naming_what_it_found(
    node_server: Callable[[str], Path], log_dir: Path
) -> None:
    server = WorkerServer(name="everything", command=("node", str(node_server("everything")), "stdio"))

    with (
        WorkerClient(server, "http://127.0.0.1:9", log_dir=log_dir) as worker,
        pytest.raises(WorkerError) as caught,
    ):
        worker.generate(ChatRequest(model="m", prompt="hi"))

    message = str(caught.value)
    assert "neither ollama_run" in message and "get-sum" in message and "echo" in message


@pytest.fixture(scope="module")
def npm_worker(
    fake: FakeOllama, node_server: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Any:
    server = WorkerServer(name="npm", command=("node", str(node_server("ollama-mcp"))))
    with WorkerClient(server, fake.url, log_dir=tmp_path_factory.mktemp("logs")) as worker:
        yield worker


def test_worker_client_generates_through_npm_ollama_mcp(npm_worker: WorkerClient, fake: FakeOllama) -> None:
    fake.script("npm-coder", "<think>plan first</think>def f():\n    return 1\n")

    generation = npm_worker.generate(
        ChatRequest(model="npm-coder", prompt="write f", system="be terse", num_ctx=16_384)
    )

    assert npm_worker.dialect == NPM_DIALECT
    # npm ollama-mcp cannot pass num_ctx: the call ran in the server's default window, and says so.
    assert generation.num_ctx == 4096
    assert generation.text == "def f():\n    return 1"
    assert generation.thinking == "plan first"
    assert generation.completion_tokens > 0 and generation.prompt_tokens > 0
    sent = fake.chat_requests("npm-coder")[-1]
    # format markdown: no "format": "json" reaches Ollama; options arrive parsed from their JSON string.
    assert "format" not in sent or sent["format"] in (None, "")
    assert sent["messages"] == [
        {"role": "system", "content": "be terse"},
        {"role": "user", "content": "write f"},
    ]
    assert sent["options"]["temperature"] == 0.2


def test_npm_ollama_mcp_missing_model_becomes_model_not_found(npm_worker: WorkerClient) -> None:
    with pytest.raises(ModelNotFound):
        npm_worker.generate(ChatRequest(model="npm-absent", prompt="hi"))


def test_npm_ollama_mcp_silence_past_the_total_clock_becomes_a_worker_timeout(
    npm_worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("npm-slow", Reply("late", first_token_delay=5))

    with pytest.raises(WorkerTimeout) as caught:
        npm_worker.generate(ChatRequest(model="npm-slow", prompt="hi", total_timeout=0.5))

    assert caught.value.clock == "total"


def test_npm_ollama_mcp_health_lists_models_and_names_the_missing(
    npm_worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.add_model("npm-present")

    health = npm_worker.check_health(["npm-present", "npm-missing:7b"])

    assert not health.ok
    assert "npm-present:latest" in health.models
    assert health.missing == ("npm-missing:7b",)


def test_npm_ollama_mcp_without_ollama_is_worker_unavailable(
    node_server: Callable[[str], Path], log_dir: Path
) -> None:
    server = WorkerServer(name="npm-down", command=("node", str(node_server("ollama-mcp"))))

    with (
        WorkerClient(server, "http://127.0.0.1:9", log_dir=log_dir) as worker,
        pytest.raises(WorkerUnavailable),
    ):
        worker.generate(ChatRequest(model="m", prompt="hi"))


def test_npm_ollama_mcp_prompts_are_kept_within_ollamas_default_window(
    npm_worker: WorkerClient, fake: FakeOllama
) -> None:
    # It cannot pass num_ctx, so the 16,384 configured would silently be Ollama's 4,096 (FACTS: a
    # 7,744-token prompt ran as 2,051): refused before any call instead.
    fake.add_model("npm-big")
    prompt = "".join(f"def f_{n}(x):\n    return x * {n} + {n * 7}\n\n" for n in range(400))

    with pytest.raises(ContextOverflow) as caught:
        npm_worker.generate(ChatRequest(model="npm-big", prompt=prompt, num_ctx=16_384, num_predict=1024))

    assert caught.value.num_ctx == 4096
    assert fake.chat_requests("npm-big") == []


def test_doctor_warns_what_npm_ollama_mcp_drops(
    fake: FakeOllama, node_server: Callable[[str], Path], tmp_path: Path
) -> None:
    from hub.core.config import load_config
    from hub.faces.doctor import run_doctor

    fake.add_model("npm-doc")
    entry = node_server("ollama-mcp")
    (tmp_path / "hub.yaml").write_text(
        "roles:\n"
        "  implementer: {model: npm-doc, backend: mcp, worker: npm}\n"
        "  local_reviewer: {model: npm-doc, backend: ollama}\n"
        f"workers:\n  - {{name: npm, transport: stdio, command: [node, '{entry}']}}\n",
        encoding="utf-8",
    )
    config = load_config(tmp_path, env={"OLLAMA_HOST": fake.url})

    [check] = [c for c in run_doctor(config) if c.name == "worker 'npm' dialect"]

    assert check.ok
    assert "num_ctx" in check.detail and "keep_alive" in check.detail and "300 s" in check.detail
    assert "worker: hub" in check.hint
