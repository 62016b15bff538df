"""MCP servers as agent tools (`mcp_servers:` in hub.yaml): each server started at the loop's start, its
tools listed, and those its `allow` list names offered as `mcp_<server>_<tool>`; nothing else of it.

A server runs outside the sandbox with the user's rights (README): none is configured by default, and
only the tools a person allowed are offered at all, so a call to any other is an unknown tool to the
loop, answered with an error and never sent. A server that cannot start or list its tools stops the
attempt (`ToolRefused` to the phase); one that fails, times out or dies during a call answers that call
with an error the model sees (hub/workers/mcp_client.py turns each into an MCPError).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hub.agent.builtin import Tool, ToolRefused
from hub.core.agent_config import MCPServer
from hub.core.errors import MCPError, describe
from hub.core.log import get_logger
from hub.workers.mcp_client import MCPClient

log = get_logger(__name__)

STARTUP_SECONDS = 30.0


def tool_name(server: str, tool: str) -> str:
    return f"mcp_{server}_{tool}"


class MCPTools:
    """The configured servers' allowed tools, for one run of the loop: `start` them, `stop` them after."""

    def __init__(
        self, servers: Sequence[MCPServer], cwd: Path | None = None, log_dir: Path | None = None
    ) -> None:
        self.servers = list(servers)
        self.cwd = cwd
        self.log_dir = log_dir
        self.clients: list[MCPClient] = []
        self.missing: dict[str, list[str]] = {}  # per server: allowed tools it does not offer

    def start(self) -> list[Tool]:
        """Start every server and list its tools; the allowed ones as agent tools. ToolRefused (with
        every server stopped again) when one cannot start or list them."""
        tools: list[Tool] = []
        try:
            for server in self.servers:
                tools += self._start(server)
        except MCPError as exc:
            self.stop()
            raise ToolRefused(describe(exc)) from None
        return tools

    def _start(self, server: MCPServer) -> list[Tool]:
        client = MCPClient(
            "stdio" if server.command else "http",
            command=server.command,
            url=server.url,
            env=server.env,
            cwd=self.cwd,
            name=server.name,
            log_dir=self.log_dir,
            startup_timeout=STARTUP_SECONDS,
        )
        self.clients.append(client)
        client.start()
        listed = {spec.name: spec for spec in client.list_tools(timeout=STARTUP_SECONDS)}
        missing = [name for name in server.allow if name not in listed]
        self.missing[server.name] = missing
        if missing:
            log.warning(
                "agent.mcp_tools_missing", server=server.name, missing=missing, offered=sorted(listed)
            )
        log.info("agent.mcp_server", server=server.name, allowed=[n for n in server.allow if n in listed])
        return [
            Tool(
                tool_name(server.name, name),
                f"({server.name}, an MCP server) {listed[name].description}".strip(),
                _parameters(listed[name].input_schema),
                _caller(client, name, server.timeout),
            )
            for name in server.allow
            if name in listed
        ]

    def stop(self) -> None:
        for client in self.clients:
            try:
                client.stop()
            except MCPError as exc:  # stopping a server that already died: nothing left to do
                log.debug("agent.mcp_stop_failed", server=client.name, error=str(exc))
        self.clients = []


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's input schema as a function's parameters: always an object."""
    params = {k: v for k, v in (schema or {}).items() if k != "$schema"}
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params


def _caller(client: MCPClient, name: str, timeout: float) -> Any:
    def call(args: Mapping[str, Any]) -> str:
        try:
            result = client.call_tool(name, dict(args), timeout=timeout, raise_on_error=False)
        except MCPError as exc:
            raise ToolRefused(describe(exc)) from None
        if result.is_error:
            return f"error from the MCP server: {result.text}"
        return result.text or "(the tool returned no text)"

    return call
