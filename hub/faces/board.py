"""`hub board`: a local web page of the pipeline that keeps itself up to date, and the actions a person
takes on it (resume a halt, give a verdict).

The server is the standard library's `ThreadingHTTPServer`, not the uvicorn/starlette stack the MCP
HTTP face runs on: the board's views and actions are the CLI's own blocking functions (`hub status`'s
reads, `hub resume`, `hub report-judge` under their file locks), which a thread per request calls as
they are; a page polled twice a second by one person needs no event loop; and `hub board` starts without
paying for the MCP SDK's import (over a second here).

What the board answers (`Guard`):
- only a request carrying the token the command printed (`?token=`; compared in constant time);
- on a loopback bind, only a Host naming the address bound or localhost (a DNS-rebinding page names
  its own host), the same names the MCP HTTP face answers (`hub.faces.http_names`);
- a request with an Origin only from the board's own pages, and a POST only with such an Origin (a
  form on another site cannot post here even in a browser that has the token's URL open).

Every view reads through `board_views` (the functions `hub status` and `hub log` use); every action
calls the function its CLI command calls. Nothing the board does is something the CLI would not do.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from hub.core.errors import ConfigError, ContractInvalid, HubError, WrongState, describe
from hub.core.log import get_logger
from hub.faces.board_html import Links, e, page, part
from hub.faces.http_names import (
    MIN_TOKEN_CHARS,
    allowed_hosts,
    allowed_origins,
    bind_address,
    is_loopback,
    url_host,
)

if TYPE_CHECKING:
    from hub.phases.context import Context

log = get_logger(__name__)

DEFAULT_PORT = 8767
IDLE_SECONDS = 30.0  # a connection that sends no complete request for this long is closed
MAX_FORM_BYTES = 64 * 1024
TASK_PATH = re.compile(r"^/task/([^/]+)(/live|/resume|/verdict)?$")


class Refused(Exception):
    """A request the board does not serve: its status and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


class Guard:
    """The token, Host and Origin checks of every request (see the module's docstring)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.token = token.encode()
        self.loopback = is_loopback(host)
        self.hosts = set(allowed_hosts(host, port))
        self.origins = set(allowed_origins(host, port))

    def check(self, method: str, headers: Any, query: dict[str, list[str]]) -> None:
        host = headers.get("Host", "")
        if self.loopback and host not in self.hosts:
            raise Refused(403, f"Host {host!r} is not this board's address")
        origin = headers.get("Origin")
        same = {f"http://{host}", f"https://{host}"}
        if origin is not None and (origin not in same or (self.loopback and origin not in self.origins)):
            raise Refused(403, "a request from another site's page")
        if method == "POST" and origin is None:
            raise Refused(403, "a POST without an Origin header (the board's own forms send one)")
        given = (query.get("token") or [""])[0].encode()
        if not hmac.compare_digest(given, self.token):
            raise Refused(401, "no token or a wrong one: open the URL `hub board` printed")


class Board:
    """What the request handlers share: the task context, the guard, the eval folders, one action at a time."""

    def __init__(self, ctx: Context, guard: Guard, token: str, eval_dirs: list[Path]) -> None:
        self.ctx = ctx
        self.guard = guard
        self.links = Links(token)
        self.eval_dirs = eval_dirs
        self.acting = threading.Lock()
        self.served = 0
        self.refused = 0


class Handler(BaseHTTPRequestHandler):
    server: BoardServer
    timeout = IDLE_SECONDS
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        # The path carries the token: log the route only.
        log.debug("board.request", method=self.command, path=urlsplit(self.path).path, status=args[1:2])

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        board = self.server.board
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        try:
            board.guard.check(method, self.headers, query)
        except Refused as refused:
            board.refused += 1
            log.warning("board.refused", path=url.path, status=refused.status, why=str(refused))
            self.close_connection = True  # a refused POST's body is never read
            self._send(refused.status, f"refused: {refused}\n".encode(), "text/plain; charset=utf-8")
            return
        if method == "POST":
            self.close_connection = True  # a POST that is no action leaves its body unread
        board.served += 1
        nonce = secrets.token_urlsafe(12)
        try:
            status, body, kind, location = route(board, method, url.path, query, self._form, nonce)
        except HubError as exc:
            status, kind, location = 409, HTML, None
            body = page("error", f'<p class="error">{e(describe(exc))}</p>', board.links, nonce)
        except OSError as exc:  # the machine's own limits: a full disk, a read-only folder
            from hub.core.host_limits import explain

            status, kind, location = 500, HTML, None
            body = page("error", f'<p class="error">{e(explain(exc))}</p>', board.links, nonce)
        self._send(status, body.encode("utf-8"), kind, nonce, location)

    def _form(self) -> dict[str, str]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ContractInvalid("form", "Content-Length", "not a number") from None
        if length < 0 or length > MAX_FORM_BYTES:
            raise ContractInvalid(
                "form", "$", f"{length} bytes; the board takes forms up to {MAX_FORM_BYTES}"
            )
        fields = parse_qs(self.rfile.read(length).decode("utf-8", "replace"), keep_blank_values=True)
        return {name: values[0] for name, values in fields.items()}

    def _send(
        self, status: int, body: bytes, kind: str, nonce: str = "", location: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        # The URL holds the token: no other site sees it as a referrer. Not `no-referrer`: with it a
        # browser sends `Origin: null` on the board's own forms, which the guard must refuse.
        self.send_header("Referrer-Policy", "same-origin")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        # A diff or a halt file holds a model's words: no script runs but the page's own.
        self.send_header(
            "Content-Security-Policy",
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
            "base-uri 'none'",
        )
        if location:
            self.send_header("Location", location)
        self.end_headers()
        self.wfile.write(body)


HTML = "text/html; charset=utf-8"
JSON = "application/json"


def route(
    board: Board, method: str, path: str, query: dict[str, list[str]], form: Any, nonce: str
) -> tuple[int, str, str, str | None]:
    """(status, body, content type, redirect) for a request that passed the guard."""
    from hub.faces import board_views as views

    links, ctx = board.links, board.ctx
    said = (query.get("said") or [""])[0]
    flash = f'<p class="flash">{e(said)}</p>' if said else ""
    if method == "GET" and path == "/":
        key, parts = views.index_live(ctx, links)
        body = flash + part("tasks", parts["tasks"])
        return 200, page("tasks", body, links, nonce, (links("/live"), key)), HTML, None
    if method == "GET" and path == "/live":
        key, parts = views.index_live(ctx, links)
        return 200, json.dumps({"key": key, "parts": parts}), JSON, None
    if method == "GET" and path == "/evals":
        return 200, page("evals", views.evals_html(board.eval_dirs), links, nonce), HTML, None
    match = TASK_PATH.match(path)
    if not match:
        return 404, page("not found", f"<p>no page {e(path)}</p>", links, nonce), HTML, None
    task_id, what = match.group(1), match.group(2)
    if method == "GET" and what is None:
        key, parts = views.task_live(ctx, task_id)
        body = flash + part("state", parts["state"]) + views.task_static(ctx, task_id, links)
        body += part("log", parts["log"])
        live = (links(f"/task/{task_id}/live"), key)
        return 200, page(task_id, body, links, nonce, live), HTML, None
    if method == "GET" and what == "/live":
        key, parts = views.task_live(ctx, task_id)
        return 200, json.dumps({"key": key, "parts": parts}), JSON, None
    if method == "POST" and what in ("/resume", "/verdict"):
        fields = form()
        with board.acting:
            message = resume(ctx, task_id, fields) if what == "/resume" else verdict(ctx, task_id, fields)
        back = f"/task/{task_id}?" + _query(links.token, message)
        return 303, "", HTML, back
    return 405, page("not allowed", f"<p>{e(method)} {e(path)}: not an action</p>", links, nonce), HTML, None


def _query(token: str, said: str) -> str:
    from urllib.parse import urlencode

    return urlencode({"token": token, "said": said})


# --- the actions: each the function its CLI command calls ----------------------------------------------


def resume(ctx: Context, task_id: str, fields: dict[str, str]) -> str:
    """`hub resume --task ID --to STATE [--note NOTE]`."""
    from hub.phases.finalize import resume as run

    note = fields.get("note", "").strip() or None
    return str(run(ctx.for_task(task_id), fields.get("to", ""), note).message)


def verdict(ctx: Context, task_id: str, fields: dict[str, str]) -> str:
    """The person's verdict written as the JUDGE_REPORT.json a person writes by hand, then
    `hub report-judge --task ID`, which checks and applies it as it does theirs."""
    from hub.core.atomic import write_atomic
    from hub.phases.judge import report_judge
    from hub.state import store
    from hub.state.judge_report import validate_judge_report
    from hub.state.machine import JUDGE_REVIEW_IN_PROGRESS, PENDING_JUDGE_REVIEW

    bound = ctx.for_task(task_id)
    hand = bound.handoff
    status = store.load(hand.contract)["status"]
    if status not in (PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS):
        raise WrongState(
            f"task {task_id} waits for no verdict: it is {status}", hint="`hub status` says what it waits for"
        )
    lines = [line.strip() for line in fields.get("blocking", "").splitlines() if line.strip()]
    report = {
        "verdict": fields.get("verdict", ""),
        "summary": fields.get("summary", "").strip() or "given on the hub board",
        "blocking_issues": [
            {"id": f"B{n}", "severity": "major", "description": text} for n, text in enumerate(lines, 1)
        ],
    }
    validate_judge_report(report, "the board's verdict form")
    write_atomic(hand.judge_report_json, json.dumps(report, indent=2) + "\n")
    return str(report_judge(bound).message)


# --- serving ---------------------------------------------------------------------------------------------


class BoardServer(ThreadingHTTPServer):
    daemon_threads = True
    board: Board


def make_server(
    ctx: Context, host: str, port: int, token: str | None, eval_dirs: list[Path]
) -> tuple[BoardServer, str]:
    """The server, bound and listening, and the URL to open (with the token)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"a {len(token)}-character board token: anyone who can reach the board could guess it",
            hint=f"give one of {MIN_TOKEN_CHARS} characters or more, or leave --token out for a random one",
        )
    token = token or secrets.token_urlsafe(24)
    try:
        server = BoardServer((bind_address(host), port), Handler, bind_and_activate=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --port (0: any free one)",
        ) from None
    bound = server.server_address[1]
    server.board = Board(ctx, Guard(host, int(bound), token), token, eval_dirs)
    if not is_loopback(host):
        log.warning(
            "board.not_loopback",
            host=host,
            detail="anyone who can reach this address and has the URL can resume tasks and give verdicts",
        )
    return server, f"http://{url_host(host)}:{bound}/?token={token}"


def serve(server: BoardServer) -> None:
    """Serve the board until SIGINT."""
    log.info("board.serve", address=server.server_address[0], port=server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
