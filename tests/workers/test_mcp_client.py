"""MCPClient against our own worker server, over a real stdio subprocess and over streamable HTTP and SSE."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.core.errors import MCPError, MCPServerCrashed, MCPTimeoutError
from hub.testing import FakeOllama, Reply
from hub.workers.mcp_client import MCPClient


@pytest.fixture(scope="module")
def client(
    fake: FakeOllama, hub_serve: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MCPClient]:
    """One stdio server for the module's tests that leave it running."""
    logs = tmp_path_factory.mktemp("logs")
    with MCPClient(command=hub_serve, env={"OLLAMA_HOST": fake.url}, name="hub", log_dir=logs) as c:
        yield c


def run(client: MCPClient, model: str, prompt: str = "hi", **options: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"model": model, "prompt": prompt}
    if options:
        arguments["options"] = options
    return json.loads(client.call_tool("ollama_run", arguments).text)


def test_worker_server_lists_its_three_tools(client: MCPClient) -> None:
    assert sorted(t.name for t in client.list_tools()) == ["ollama_chat", "ollama_list_models", "ollama_run"]


def test_ollama_run_returns_the_scripted_text_in_the_original_result_shape(
    client: MCPClient, fake: FakeOllama
) -> None:
    fake.script("run-shape", Reply("def add(a, b):\n    return a + b\n", prompt_eval_count=40, eval_count=12))

    result = run(client, "run-shape", "write add", system="be brief", temperature=0.1, num_ctx=4096)

    assert result["stdout"] == "def add(a, b):\n    return a + b"
    assert result["exitCode"] == 0 and result["stderr"] == ""
    meta = result["metadata"]
    assert meta["model_used"] == "run-shape"
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (40, 12)
    assert meta["done_reason"] == "stop" and meta["truncated"] is False
    assert isinstance(meta["duration_ms"], int)
    sent = fake.chat_requests("run-shape")[-1]
    assert sent["options"]["num_ctx"] == 4096 and sent["options"]["temperature"] == 0.1
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}


def test_ollama_run_reports_a_missing_model_with_a_nonzero_exit_code(client: MCPClient) -> None:
    result = run(client, "no-such-model")

    assert result["exitCode"] == 1
    assert "not found" in result["stderr"]
    assert result["metadata"]["error_type"] == "ModelNotFound"


def test_ollama_run_reports_a_server_side_timeout_as_exit_code_minus_one(
    client: MCPClient, fake: FakeOllama
) -> None:
    fake.script("run-late", Reply("too late", first_token_delay=5))

    result = run(client, "run-late", first_token_timeout=200)

    assert result["exitCode"] == -1 and result["error"] == "Timeout exceeded"
    meta = result["metadata"]
    assert meta["timed_out"] is True and meta["clock"] == "first_token" and meta["timeout_seconds"] == 0.2


def test_ollama_list_models_returns_the_names_ollama_has(client: MCPClient, fake: FakeOllama) -> None:
    fake.add_model("listed")

    models = json.loads(client.call_tool("ollama_list_models", {}).text)["models"]

    assert "listed:latest" in models


def test_ollama_chat_accepts_messages_and_options_as_a_json_string(
    client: MCPClient, fake: FakeOllama
) -> None:
    fake.script("chatty", "hello there")
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]

    result = client.call_tool(
        "ollama_chat", {"model": "chatty", "messages": messages, "options": '{"num_ctx": 2048}'}
    )

    assert json.loads(result.text)["stdout"] == "hello there"
    sent = fake.chat_requests("chatty")[-1]
    assert sent["messages"] == messages and sent["options"]["num_ctx"] == 2048


def test_an_unknown_tool_raises_mcp_error(client: MCPClient) -> None:
    with pytest.raises(MCPError, match="nope"):
        client.call_tool("nope", {})


def test_bad_arguments_are_a_tool_error(client: MCPClient) -> None:
    result = client.call_tool("ollama_run", {"model": "m"}, raise_on_error=False)

    assert result.is_error and "prompt" in result.text


def test_a_slow_tool_raises_mcp_timeout_and_the_session_stays_usable(
    client: MCPClient, fake: FakeOllama
) -> None:
    fake.script("slow-tool", Reply("late", first_token_delay=3))

    started = time.monotonic()
    with pytest.raises(MCPTimeoutError) as caught:
        client.call_tool("ollama_run", {"model": "slow-tool", "prompt": "hi"}, timeout=0.3)

    assert time.monotonic() - started < 2
    assert isinstance(caught.value, TimeoutError)
    assert client.call_tool("ollama_list_models", {}).is_error is False


def test_a_server_killed_mid_call_raises_server_crashed_within_a_second(
    fake: FakeOllama, hub_serve: tuple[str, ...], log_dir: Path
) -> None:
    killed_at: list[float] = []
    with MCPClient(command=hub_serve, env={"OLLAMA_HOST": fake.url}, name="doomed", log_dir=log_dir) as c:
        pid = c.pid
        assert pid is not None

        def kill_then_hang(body: dict[str, Any]) -> Reply:
            # FakeOllama calls this when the server's request arrives: the server is mid-call.
            killed_at.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)
            return Reply("never", first_token_delay=30)

        fake.respond_with("doomed-model", kill_then_hang)
        with pytest.raises(MCPServerCrashed) as caught:
            c.call_tool("ollama_run", {"model": "doomed-model", "prompt": "hi"}, timeout=60)
        crashed_at = time.monotonic()

        assert crashed_at - killed_at[0] < 1.0
        assert caught.value.server_exit_code == -signal.SIGKILL
        assert "worker.serve" in caught.value.stderr_tail  # the server's own startup line, from its log
        with pytest.raises(MCPServerCrashed):
            c.list_tools()


def test_a_server_that_exits_at_startup_raises_server_crashed_with_its_stderr(log_dir: Path) -> None:
    command = [sys.executable, "-c", "import sys; sys.stderr.write('no config here\\n'); sys.exit(3)"]

    with pytest.raises(MCPServerCrashed) as caught:
        MCPClient(command=command, name="broken", log_dir=log_dir).start()

    assert caught.value.server_exit_code == 3
    assert "no config here" in caught.value.stderr_tail
    assert (log_dir / "mcp-broken.stderr.log").read_text(encoding="utf-8") == "no config here\n"


def test_a_command_that_does_not_exist_is_a_clear_error(log_dir: Path) -> None:
    with pytest.raises(MCPError, match="cannot run /no/such/server"):
        MCPClient(command=["/no/such/server"], name="ghost", log_dir=log_dir).start()


def test_the_client_leaves_no_thread_and_no_process_behind(
    fake: FakeOllama, node_server: Callable[[str], Path], log_dir: Path
) -> None:
    before = set(threading.enumerate())
    command = ["node", str(node_server("ollama-mcp"))]
    with MCPClient(command=command, env={"OLLAMA_HOST": fake.url}, name="tidy", log_dir=log_dir) as c:
        pid = c.pid
        assert c.list_tools()

    assert set(threading.enumerate()) <= before
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
def test_the_worker_server_answers_over_http_transports(
    transport: str,
    path: str,
    fake: FakeOllama,
    hub_serve: tuple[str, ...],
    free_port: int,
    spawn_server: Callable[..., Any],
) -> None:
    port = free_port
    argv = [*hub_serve, "--transport", transport, "--port", str(port)]
    spawn_server(argv, {"OLLAMA_HOST": fake.url}, r"Uvicorn running on")
    fake.script(f"over-{transport}", f"hello over {transport}")

    with MCPClient(transport, url=f"http://127.0.0.1:{port}{path}", name=f"hub-{transport}") as c:
        assert c.pid is None
        result = json.loads(c.call_tool("ollama_run", {"model": f"over-{transport}", "prompt": "hi"}).text)

    assert result["stdout"] == f"hello over {transport}"


def test_an_http_server_killed_mid_call_raises_server_crashed_within_a_second(
    fake: FakeOllama, hub_serve: tuple[str, ...], free_port: int, spawn_server: Callable[..., Any]
) -> None:
    argv = [*hub_serve, "--transport", "http", "--port", str(free_port)]
    server = spawn_server(argv, {"OLLAMA_HOST": fake.url}, r"Uvicorn running on")
    killed_at: list[float] = []

    def kill_then_hang(body: dict[str, Any]) -> Reply:
        killed_at.append(time.monotonic())
        server.process.kill()
        return Reply("never", first_token_delay=30)

    fake.respond_with("doomed-http", kill_then_hang)
    with MCPClient("http", url=f"http://127.0.0.1:{free_port}/mcp", name="doomed-http") as c:
        with pytest.raises(MCPServerCrashed) as caught:
            c.call_tool("ollama_run", {"model": "doomed-http", "prompt": "hi"}, timeout=60)

        assert time.monotonic() - killed_at[0] < 1.0
        assert caught.value.server_exit_code is None and caught.value.stderr_tail == ""


def test_a_stopped_client_starts_again_with_a_fresh_server(
    fake: FakeOllama, node_server: Callable[[str], Path], log_dir: Path
) -> None:
    client = MCPClient(command=["node", str(node_server("ollama-mcp"))], name="again", log_dir=log_dir)
    with client:
        first = client.pid
    with client:
        assert client.running and client.pid != first
        assert client.list_tools()
    assert not client.running
