"""`hub doctor` on agent mode's MCP servers, against the real npm server-everything: what each offers the
agent, allowed tools it does not have, and a server that does not start."""

from __future__ import annotations

from pathlib import Path

from hub.core.agent_config import MCPServer
from hub.core.config import Config, load_config
from hub.faces.doctor import check_mcp_servers

EVERYTHING = (
    Path(__file__).resolve().parents[2] / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def config(tmp_path: Path, *servers: MCPServer) -> Config:
    return load_config(tmp_path, env={})._replace(mcp_servers=servers)


def everything(allow: tuple[str, ...]) -> MCPServer:
    assert EVERYTHING.is_file(), f"{EVERYTHING} is missing: run `npm ci`"
    return MCPServer("ev", ("node", str(EVERYTHING), "stdio"), allow=allow)


def test_no_mcp_server_no_check(tmp_path: Path) -> None:
    assert check_mcp_servers(config(tmp_path)) == []


def test_a_server_is_started_and_what_it_offers_the_agent_is_shown(tmp_path: Path) -> None:
    [check] = check_mcp_servers(config(tmp_path, everything(("echo",))))

    assert check.ok and check.name == "MCP server 'ev'"
    assert (
        "offers the agent mcp_ev_echo" in check.detail
        and "unused: roles.implementer.mode is edit" in check.detail
    )


def test_allowed_tools_the_server_lacks_fail_naming_them(tmp_path: Path) -> None:
    [check] = check_mcp_servers(config(tmp_path, everything(("echo", "ech0"))))

    assert not check.ok and "not on the server: ech0" in check.detail and "ech0" in check.hint


def test_a_server_that_does_not_start_fails_with_the_key_to_fix(tmp_path: Path) -> None:
    gone = MCPServer("gone", ("node", str(tmp_path / "missing.js")), allow=("x",))

    [check] = check_mcp_servers(config(tmp_path, gone))

    assert not check.ok and "gone" in check.detail and "mcp_servers" in check.hint
