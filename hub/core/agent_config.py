"""Agent mode's part of hub.yaml (issue 19): `agent:` (its bounds) and `mcp_servers:` (the servers whose
allowed tools it may call), read from a hub.yaml that `config_schema` already checked."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple


class AgentSettings(NamedTuple):
    """`agent:` in hub.yaml: agent mode's bounds (hub/agent/loop.py)."""

    max_turns: int = 30
    max_tokens: int = 1_000_000
    max_repeats: int = 3


class MCPServer(NamedTuple):
    """An entry of `mcp_servers:`: a server whose `allow`ed tools agent mode offers as mcp_<name>_<tool>.
    It runs outside the sandbox, with the user's rights: none is configured by default."""

    name: str
    command: tuple[str, ...] = ()  # stdio: the command and its args
    url: str | None = None  # HTTP (streamable)
    env: Mapping[str, str] = MappingProxyType({})
    allow: tuple[str, ...] = ()
    timeout: float = 60.0  # seconds one call may take


def agent_settings(raw: Mapping[str, Any]) -> AgentSettings:
    return AgentSettings(**{str(k): int(v) for k, v in raw.items() if v is not None})


def mcp_servers(raw: Any) -> tuple[MCPServer, ...]:
    return tuple(_server(entry) for entry in raw or [])


def _server(raw: Mapping[str, Any]) -> MCPServer:
    command = raw.get("command") or []
    command = command.split() if isinstance(command, str) else command
    return MCPServer(
        name=str(raw["name"]),
        command=tuple(str(part) for part in [*command, *(raw.get("args") or [])]),
        url=raw.get("url"),
        env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
        allow=tuple(str(t) for t in raw.get("allow") or ()),
        timeout=float(raw.get("timeout") or 60),
    )
