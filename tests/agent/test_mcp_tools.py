"""MCP servers as agent tools, against the real npm `@modelcontextprotocol/server-everything` over stdio
and streamable HTTP: only the allowed tools are offered, under mcp_<server>_<tool>; a failing server is
an error the model sees or, when it cannot start, a refusal before the loop."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.agent.builtin import ToolRefused
from hub.agent.mcp import MCPTools
from hub.core.agent_config import MCPServer

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


@pytest.fixture
def everything() -> Path:
    assert EVERYTHING.is_file(), f"{EVERYTHING} is missing: run `npm ci` (make install does)"
    return EVERYTHING


def stdio(entry: Path, allow: tuple[str, ...], timeout: float = 30.0) -> MCPServer:
    return MCPServer(name="ev", command=("node", str(entry), "stdio"), allow=allow, timeout=timeout)


def test_only_the_allowed_tools_are_offered_under_their_server_name(everything: Path, tmp_path: Path) -> None:
    servers = MCPTools([stdio(everything, ("echo", "get-sum", "no-such-tool"))], log_dir=tmp_path)
    try:
        tools = {t.name: t for t in servers.start()}
        echoed = tools["mcp_ev_echo"].run({"message": "hi"})
        summed = tools["mcp_ev_get-sum"].run({"a": 2, "b": 3})
    finally:
        servers.stop()

    assert sorted(tools) == ["mcp_ev_echo", "mcp_ev_get-sum"]  # get-env, the rest: never offered
    assert echoed == "Echo: hi"
    assert "5" in summed
    assert tools["mcp_ev_echo"].parameters["required"] == ["message"]
    assert "MCP server" in tools["mcp_ev_echo"].description


def test_nothing_is_offered_when_nothing_is_allowed(everything: Path, tmp_path: Path) -> None:
    servers = MCPTools([stdio(everything, ())], log_dir=tmp_path)
    try:
        assert servers.start() == []
    finally:
        servers.stop()


def test_a_call_the_server_fails_is_an_error_for_the_model(everything: Path, tmp_path: Path) -> None:
    servers = MCPTools([stdio(everything, ("get-sum",))], log_dir=tmp_path)
    try:
        [summed] = servers.start()
        answer = summed.run({"a": "two"})
    finally:
        servers.stop()

    assert answer.startswith("error from the MCP server")


def test_a_call_after_the_server_died_is_refused_with_the_reason(everything: Path, tmp_path: Path) -> None:
    servers = MCPTools([stdio(everything, ("echo",))], log_dir=tmp_path)
    try:
        [echo] = servers.start()
        pid = servers.clients[0].pid
        assert pid is not None
        os.kill(pid, 9)
        with pytest.raises(ToolRefused, match="ev"):
            echo.run({"message": "hi"})
    finally:
        servers.stop()


def test_a_server_that_cannot_start_is_refused_before_the_loop(tmp_path: Path) -> None:
    servers = MCPTools(
        [MCPServer(name="gone", command=("node", str(tmp_path / "missing.js")), allow=("x",))],
        log_dir=tmp_path,
    )

    with pytest.raises(ToolRefused, match="gone"):
        servers.start()
    assert servers.clients == []


@pytest.fixture
def http_everything(everything: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        ["node", str(everything), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if re.search(rf"listening on port {port}", line):
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(30) and process.poll() is None, "server-everything did not start"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
        assert process.stdout is not None
        process.stdout.close()


def test_an_http_server_s_allowed_tool_is_called(http_everything: str, tmp_path: Path) -> None:
    servers = MCPTools([MCPServer(name="web", url=http_everything, allow=("echo",))], log_dir=tmp_path)
    try:
        [echo] = servers.start()
        answer = echo.run({"message": "over http"})
    finally:
        servers.stop()

    assert echo.name == "mcp_web_echo" and answer == "Echo: over http"
