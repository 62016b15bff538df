"""`hub mcp serve`: the hub's own MCP server, for a managing agent (Claude Code, Cursor, any MCP client).

Every tool is one call into the functions the CLI uses (`hub.phases.*`, `hub.review.rules`,
`hub.review.scan`, `hub.review.catalog`, `hub.state.backlog`); this module only adapts arguments and
results. A `HubError` becomes an MCP tool error (`is_error`) carrying the hub's own message and its hint,
which say what to do next.

Tools (names with underscores, as MCP clients expect):

- pipeline: hub_status, hub_create_task, hub_next, hub_read_review_request, hub_submit_verdict,
  hub_rebut, hub_resume, hub_log
- rules (context-sherpa's names and inputs): initialize_ast_grep, scan_code, scan_path,
  add_or_update_rule, remove_rule, search_community_rules, get_community_rule_details,
  import_community_rule
- backlog and notes (iteratr's verbs): task_add, task_update, task_list, task_next, note_add, note_list,
  iteration_summary, session_complete

The tools are registered by `mcp_pipeline`, `mcp_rules` and `mcp_backlog` (what they share is in
`mcp_common`); this module builds the server and serves it.

Transports: stdio (nothing but protocol on stdout; the SDK points fd 1 at stderr while serving, so a
child process cannot corrupt the stream either), or streamable HTTP at `/mcp`, bound to loopback by
default and, with a token, refusing any request without `Authorization: Bearer <token>` (401).
"""

from __future__ import annotations

import asyncio
import hmac
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from hub.core.config import load_config
from hub.core.errors import ConfigError
from hub.core.log import get_logger
from hub.faces.http_names import (
    MIN_TOKEN_CHARS,
    allowed_hosts,
    allowed_origins,
    bind_address,
    is_loopback,
    url_host,
)
from hub.faces.mcp_backlog import BACKLOG_TOOLS, add_backlog_tools
from hub.faces.mcp_pipeline import PIPELINE_TOOLS, add_pipeline_tools
from hub.faces.mcp_rules import RULES_TOOLS, add_rules_tools
from hub.phases.context import Context
from hub.repo.workspace import require_ready
from hub.workers.pool import WorkerPool

if TYPE_CHECKING:
    from hub.core.config import Config
    from hub.workers.pool import WorkerPool

log = get_logger(__name__)

SERVER_NAME = "agent-hub"
DEFAULT_HTTP_PORT = 8766
TOOL_NAMES = PIPELINE_TOOLS + RULES_TOOLS + BACKLOG_TOOLS

INSTRUCTIONS = """agent-hub moves coding tasks through local models, several at once, each in its own git
worktree: a contract (hub_create_task, or task_add + hub_next to promote from the backlog), then hub_next
runs the due phase of every task (implementer, local review, judge, merge); call it again until
hub_status says nothing is due. With several tasks in flight, pass task_id to the tools that act on one.
When the task waits for a judge (pending_judge_review), read the request with hub_read_review_request
and answer with hub_submit_verdict: that applies the verdict, and the next hub_next merges a PASS. After
a FAIL you may disagree with hub_rebut. A halted task (erik_consultation) needs hub_resume with a state
its halt file names. The rules tools manage the ast-grep rules the local review enforces."""


def build_server(
    repo_root: Path, handoff_dir: Path | None = None, workers: WorkerPool | None = None
) -> MCPServer:
    """The MCP server over one repository (config is re-read on every call, like the CLI). With
    `workers`, the phases its tools run share their MCP worker servers (`serve` passes one)."""
    server: MCPServer = MCPServer(SERVER_NAME, version=_version(), instructions=INSTRUCTIONS)

    def ctx(task_id: str | None = None) -> Context:
        config = load_config(repo_root, handoff_dir)
        require_ready(config)
        return Context(config, task_id=task_id, workers=workers)

    add_pipeline_tools(server, ctx)
    add_rules_tools(server, repo_root, ctx)
    add_backlog_tools(server, ctx)
    return server


def _version() -> str:
    try:
        return version("agent-hub")
    except PackageNotFoundError:
        return "0"


# --- transports ---------------------------------------------------------------------------------------


class BearerAuth:
    """ASGI middleware: a 401 for any HTTP request without `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    def _authorized(self, header: bytes) -> bool:
        # The scheme is case-insensitive (RFC 9110 11.1): `bearer x` and `BEARER x` are `Bearer x`.
        scheme, _, credentials = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.expected)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            supplied = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not self._authorized(supplied):
                body = json.dumps(
                    {"error": "unauthorized", "error_description": "send Authorization: Bearer <token>"}
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="agent-hub"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class WholeBody:
    """ASGI middleware: a request's body is read whole before the SDK sees it. A client that goes away
    half-way through its body, or that http_guard closes at its deadline, ends here with a debug line;
    the SDK logged each as an error with a traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                log.debug(
                    "mcp.http.request_abandoned", path=scope.get("path"), received=sum(map(len, chunks))
                )
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        whole: list[dict[str, Any]] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> dict[str, Any]:
            # The body once, then what the connection says next (a disconnect, for a stream's end).
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)


def transport_security(host: str, port: int) -> Any:
    """DNS-rebinding protection for a loopback bind, whatever the loopback address: only requests whose
    Host (and Origin, when sent) name the address bound, or localhost, are served. The SDK's own guard
    knows only 127.0.0.1, localhost and ::1, so `--host 127.0.0.2` served `Host: evil.example`."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts(host, port),
        allowed_origins=allowed_origins(host, port),
    )


def http_app(server: MCPServer, host: str, token: str | None, port: int = DEFAULT_HTTP_PORT) -> Any:
    """The streamable HTTP app (endpoint /mcp): behind the bearer check when there is a token, and on a
    loopback address behind the Host/Origin check too (a browser page cannot send the token, but it can
    make a request to a rebound name)."""
    loopback = is_loopback(host)
    if not token and not loopback:
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could drive the hub",
            hint="pass --token or set HUB_MCP_TOKEN (or bind 127.0.0.1)",
        )
    if token and not loopback and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"refusing to serve on {host} with a {len(token)}-character token: anyone who can reach it could "
            "guess it",
            hint=f"use at least {MIN_TOKEN_CHARS} random characters (`python -c 'import secrets; "
            "print(secrets.token_urlsafe(24))'`)",
        )
    security = transport_security(host, port) if loopback else None
    app = WholeBody(server.streamable_http_app(host=bind_address(host), transport_security=security))
    return BearerAuth(app, token) if token else app


def serve(
    repo_root: Path,
    handoff_dir: Path | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_HTTP_PORT,
    token: str | None = None,
    idle_seconds: float = 30.0,
    max_per_client: int = 64,
    max_connections: int | None = None,
) -> None:
    """Serve until stdin closes (stdio) or the process is stopped (http). The phases the tools run, for
    as long as this serves, share their MCP worker servers: each is spawned once, not per phase. Over
    HTTP, at most `max_per_client` connections from one address and `max_connections` in all (default:
    head-room below the descriptor limit; hub.faces.http_guard)."""
    config = load_config(repo_root, handoff_dir)
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport '{transport}' (stdio or http)")
    workers = WorkerPool()
    try:
        _serve(
            build_server(repo_root, handoff_dir, workers),
            config,
            transport,
            host,
            port,
            token,
            (idle_seconds, max_per_client, max_connections),
        )
    finally:
        workers.close()


def _serve(
    server: MCPServer,
    config: Config,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    guard: tuple[float, int, int | None] = (30.0, 64, None),
) -> None:
    if transport == "stdio":
        log.info("mcp.serve", transport="stdio", repo=str(config.repo_root))
        server.run("stdio")
        return
    # Only the HTTP transport needs uvicorn; a stdio server's spawn-to-initialized time does not pay for it.
    import uvicorn

    token = token or config.mcp_token
    app = http_app(server, host, token, port)
    log.info("mcp.serve", transport="http", url=f"http://{url_host(host)}:{port}/mcp", auth=bool(token))
    # Here, not at the top: it loads uvicorn, which only this transport needs.
    from hub.faces import http_guard

    # uvicorn's INFO lines go to stderr and say when it listens; access logs would drown them. The
    # asyncio loop (not uvloop): http_guard answers 503 from its accept-error handler.
    server_ = uvicorn.Server(
        uvicorn.Config(
            app,
            host=bind_address(host),
            port=port,
            log_level="info",
            access_log=False,
            lifespan="on",
            http=http_guard.GuardedH11,
            loop="asyncio",
        )
    )
    asyncio.run(http_guard.serve(server_, *guard))
