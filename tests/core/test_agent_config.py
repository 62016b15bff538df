"""Agent mode's keys in hub.yaml: read into the Config, and every bad value refused naming key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.core.agent_config import MCPServer
from hub.core.config import load_config
from hub.core.errors import ConfigError


def config_of(tmp_path: Path, text: str) -> object:
    (tmp_path / "hub.yaml").write_text(text, encoding="utf-8")
    return load_config(tmp_path, env={})


def test_edit_mode_and_no_mcp_server_are_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={})

    assert config.role("implementer").mode == "edit"
    assert config.mcp_servers == ()
    assert (config.agent.max_turns, config.agent.max_tokens, config.agent.max_repeats) == (30, 1_000_000, 3)


def test_agent_mode_its_bounds_and_mcp_servers_are_read(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text(
        "roles:\n  implementer: {mode: agent}\nagent: {max_turns: 5, max_repeats: 2}\n"
        "mcp_servers:\n  - {name: ev, command: node server.js, args: [stdio, 3], env: {K: 1}, allow: [echo]}\n"
        "  - {name: web, url: 'http://127.0.0.1:3001/mcp', timeout: 5}\n",
        encoding="utf-8",
    )
    config = load_config(tmp_path, env={})

    assert config.role("implementer").mode == "agent"
    assert (config.agent.max_turns, config.agent.max_tokens, config.agent.max_repeats) == (5, 1_000_000, 2)
    assert config.mcp_servers == (
        MCPServer("ev", ("node", "server.js", "stdio", "3"), env={"K": "1"}, allow=("echo",)),
        MCPServer("web", url="http://127.0.0.1:3001/mcp", timeout=5.0),
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "roles:\n  implementer: {mode: agnt}\n",
            "roles.implementer.mode: 'agnt' is not allowed; did you mean 'agent'?",
        ),
        ("roles:\n  judge: {mode: agent}\n", "roles.judge.mode: agent mode is the implementer's only"),
        ("agent: {max_turns: 0}\n", "agent.max_turns: 0 is too small"),
        ("agent: {max_turn: 3}\n", "agent.max_turn"),
        ("mcp_servers:\n  - {name: a, allow: [x]}\n", "mcp_servers[0]: needs exactly one of command and url"),
        ("mcp_servers:\n  - {name: 'a b', command: x}\n", "mcp_servers[0].name: 'a b' is not a plain name"),
        (
            "mcp_servers:\n  - {name: a, command: x}\n  - {name: a, url: y}\n",
            "mcp_servers[1].name: 'a' is given twice",
        ),
        ("mcp_servers:\n  - {command: x}\n", "mcp_servers[0].name"),
        ("mcp_servers:\n  - {name: a, command: x, allow: echo}\n", "mcp_servers[0].allow"),
    ],
)
def test_bad_agent_keys_are_refused_naming_the_key_and_the_file(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_of(tmp_path, text)

    assert str(tmp_path / "hub.yaml") in str(caught.value) and said in str(caught.value)
