"""`hub mcp serve`: the hub's own MCP server, for a managing agent (Claude Code, Cursor, any MCP client).

Every tool is one call into the functions the CLI uses (`hub.phases.*`, `hub.review.rules`,
`hub.review.scan`, `hub.review.catalog`, `hub.state.backlog`); this module only adapts arguments and
results. A `HubError` becomes an MCP tool error (`is_error`) carrying the hub's own message, which says
what to do next.

Tools (names with underscores, as MCP clients expect):

- pipeline: hub_status, hub_create_task, hub_next, hub_read_review_request, hub_submit_verdict,
  hub_rebut, hub_resume, hub_log
- rules (context-sherpa's names and inputs): initialize_ast_grep, scan_code, scan_path,
  add_or_update_rule, remove_rule, search_community_rules, get_community_rule_details,
  import_community_rule
- backlog and notes (iteratr's verbs): task_add, task_update, task_list, task_next, note_add, note_list,
  iteration_summary, session_complete

Transports: stdio (nothing but protocol on stdout; the SDK points fd 1 at stderr while serving, so a
child process cannot corrupt the stream either), or streamable HTTP at `/mcp`, bound to loopback by
default and, with a token, refusing any request without `Authorization: Bearer <token>` (401).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field

from hub.core.config import load_config
from hub.core.errors import ConfigError, HubError
from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.finalize import resume
from hub.phases.judge import rebut
from hub.phases.judge_runner import read_review_request, submit_verdict
from hub.phases.next import run_next
from hub.phases.promote import next_proposal
from hub.phases.setup import create, missing_task_field, task_fields
from hub.phases.status import log_entries, status
from hub.repo.workspace import require_ready
from hub.review import catalog as rules_catalog
from hub.review import rules, scan
from hub.state import backlog

if TYPE_CHECKING:
    from hub.core.config import Config
    from hub.workers.pool import WorkerPool

log = get_logger(__name__)

SERVER_NAME = "agent-hub"
DEFAULT_HTTP_PORT = 8766
PIPELINE_TOOLS = (
    "hub_status",
    "hub_create_task",
    "hub_next",
    "hub_read_review_request",
    "hub_submit_verdict",
    "hub_rebut",
    "hub_resume",
    "hub_log",
)
RULES_TOOLS = (
    "initialize_ast_grep",
    "scan_code",
    "scan_path",
    "add_or_update_rule",
    "remove_rule",
    "search_community_rules",
    "get_community_rule_details",
    "import_community_rule",
)
BACKLOG_TOOLS = (
    "task_add",
    "task_update",
    "task_list",
    "task_next",
    "note_add",
    "note_list",
    "iteration_summary",
    "session_complete",
)
TOOL_NAMES = PIPELINE_TOOLS + RULES_TOOLS + BACKLOG_TOOLS

INSTRUCTIONS = """agent-hub moves coding tasks through local models, several at once, each in its own git
worktree: a contract (hub_create_task, or task_add + hub_next to promote from the backlog), then hub_next
runs the due phase of every task (implementer, local review, judge, merge); call it again until
hub_status says nothing is due. With several tasks in flight, pass task_id to the tools that act on one.
When the task waits for a judge (pending_judge_review), read the request with hub_read_review_request
and answer with hub_submit_verdict: that applies the verdict, and the next hub_next merges a PASS. After
a FAIL you may disagree with hub_rebut. A halted task (erik_consultation) needs hub_resume with a state
its halt file names. The rules tools manage the ast-grep rules the local review enforces."""

Verdict = Literal["PASS", "CONDITIONAL", "FAIL", "CRITICAL_HALT"]
Complexity = Literal["trivial", "minor", "major", "critical"]
# Every tool that acts on a task takes one; without it the tool acts on the only task that fits, or
# fails listing the candidates.
TaskId = Annotated[
    str | None, Field(description="the task to act on (default: the only one that fits; see hub_status)")
]
NoteType = Literal["learning", "stuck", "tip", "decision"]
SettableStatus = Literal["proposed", "blocked", "dropped"]
EntryStatus = Literal["proposed", "in_progress", "merged", "blocked", "dropped"]


class BlockingIssue(BaseModel):
    """One thing the implementer must fix before the task can pass."""

    description: str = Field(description="what is wrong")
    id: str | None = Field(None, description="a short id to refer to it, e.g. B1")
    severity: Literal["critical", "major", "minor"] | None = Field(
        None, description="critical, major or minor"
    )
    file: str | None = Field(None, description="the file, relative to the repository root")
    line: int | None = Field(None, ge=1, description="the line in that file (1-based)")
    fix_required: str | None = Field(None, description="what the implementer must change")


class NewTask(BaseModel):
    """A proposal for the backlog: a markdown proposal ('# Title', '## Requirements' bullets,
    'Target: path') or plain text (first line = title)."""

    content: str = Field(
        description="the proposal: markdown ('# Title', '## Requirements' bullets, 'Target: path') or plain "
        "text (first line = title) with a 'Target: path' line; one naming no file is blocked, not promoted"
    )
    priority: int = Field(2, ge=0, le=4, description="0 is the most urgent, 4 the least")
    depends_on: list[str] = Field(default_factory=list, description="ids of backlog tasks to merge first")
    id: str | None = Field(None, description="optional id (default B<n>), usable in later depends_on")


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the hub's errors into MCP tool errors that keep the hub's message."""
    try:
        yield
    except HubError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


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

    # --- pipeline ------------------------------------------------------------------------------------

    @server.tool()
    def hub_status(task_id: TaskId = None) -> dict[str, Any]:
        """Every task in flight (`tasks`): state, attempt, worktree, what runs next, what it needs from a
        person, lease, breaker, cost, last transitions."""
        with tool_errors():
            # A plain dict: the return annotation is the tool's output schema, which stays as it was.
            return dict(status(ctx(task_id)))

    @server.tool()
    def hub_create_task(
        title: Annotated[str, Field(description="one line saying what the task is")],
        requirements: Annotated[
            list[str], Field(min_length=1, description="what the change must do, one requirement per item")
        ],
        target_file: Annotated[
            str | None, Field(description="the file the task changes, relative to the repository root")
        ] = None,
        create_target: Annotated[
            bool, Field(description="the target file does not exist yet: the task creates it")
        ] = False,
        source_files: Annotated[
            list[str] | None, Field(description="files the model should read for context")
        ] = None,
        acceptance_commands: Annotated[
            list[str] | None, Field(description="shell commands that must exit 0 after the change")
        ] = None,
        acceptance_criteria: Annotated[
            list[str] | None, Field(description="criteria the judge checks (not run)")
        ] = None,
        allowed_paths: Annotated[
            list[str] | None, Field(description="paths the model may write (default: target + sources)")
        ] = None,
        forbidden_paths: Annotated[
            list[str] | None, Field(description="paths the model must never write")
        ] = None,
        complexity: Annotated[
            Complexity | None, Field(description="trivial, minor (default), major or critical")
        ] = None,
        max_diff_lines: Annotated[
            int | None, Field(ge=1, description="refuse edits that change more lines than this")
        ] = None,
        proposal: Annotated[
            str | None,
            Field(
                description="a markdown proposal ('# Title', '## Requirements' bullets, 'Target: path'); "
                "its fields fill in what the other inputs leave out"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Create a new task, as `hub new` does (other tasks may be active; the result names its task_id);
        then call hub_next to run its phases."""
        with tool_errors():
            fields = task_fields(
                proposal,
                title=title,
                target_file=target_file,
                complexity=complexity,
                requirements=requirements,
                source_files=source_files,
                acceptance_commands=acceptance_commands,
                acceptance_criteria=acceptance_criteria,
                allowed_paths=allowed_paths,
                forbidden_paths=forbidden_paths,
                max_diff_lines=max_diff_lines,
            )
            missing = missing_task_field(fields)
            if missing:
                raise ToolError(missing)
            return create(ctx(), fields, create_target).as_dict()

    @server.tool()
    def hub_next(task_id: TaskId = None) -> dict[str, Any]:
        """Run the due phase of every task (or of task_id), several at once (may take minutes when they
        call a model); `phase`/`data.ran` say which."""
        with tool_errors():
            return run_next(ctx(task_id)).as_dict()

    @server.tool()
    def hub_read_review_request(task_id: TaskId = None) -> dict[str, Any]:
        """The review request the judge must read (REVIEW_REQUEST.md): requirements, diff, local findings.
        Answer it with hub_submit_verdict."""
        with tool_errors():
            request = read_review_request(ctx(task_id))
        return {**request, "answer_with": "hub_submit_verdict"}

    @server.tool()
    def hub_submit_verdict(
        verdict: Annotated[
            Verdict,
            Field(
                description="PASS (merge), CONDITIONAL or FAIL (back to the implementer with the blocking "
                "issues), CRITICAL_HALT (stop the task for a person)"
            ),
        ],
        summary: Annotated[str, Field(description="one paragraph: what you checked and found")] = "",
        blocking_issues: Annotated[
            list[BlockingIssue] | None,
            Field(description="what must change before a PASS (needed for CONDITIONAL and FAIL)"),
        ] = None,
        suggestions: Annotated[list[str] | None, Field(description="optional, non-blocking advice")] = None,
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """The judge's answer to hub_read_review_request: validated, written as JUDGE_REPORT.json and
        applied at once (an invalid or untimely verdict writes nothing). After a PASS, hub_next merges."""
        report: dict[str, Any] = {
            "verdict": verdict,
            "summary": summary,
            "blocking_issues": [i.model_dump(exclude_none=True) for i in blocking_issues or []],
            "suggestions": list(suggestions or []),
        }
        with tool_errors():
            return submit_verdict(ctx(task_id), report).as_dict()

    @server.tool()
    def hub_rebut(
        text: Annotated[
            str,
            Field(
                min_length=1, description="why the FAIL verdict is wrong; the judge reads it as REBUTTAL.md"
            ),
        ],
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """Disagree with a FAIL verdict, as `hub rebut FILE` does: the task goes back to the judge with
        this text (at most limits.max_rebuttals times; then it halts for a person)."""
        with tool_errors():
            return rebut(ctx(task_id), text).as_dict()

    @server.tool()
    def hub_resume(
        to: Annotated[
            str,
            Field(
                description="the state to resume to; the halt file (hub_status: halt_file) lists the ones "
                "that lead somewhere, e.g. pending_implementer"
            ),
        ],
        note: Annotated[
            str | None,
            Field(description="what you changed; the implementer reads it in its next prompt"),
        ] = None,
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """Clear a halt (erik_consultation) and move the task to the state `to`."""
        with tool_errors():
            return resume(ctx(task_id), to, note).as_dict()

    @server.tool()
    def hub_log(
        task_id: Annotated[
            str | None, Field(description="only this task, with its model calls, diffs and commands")
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=5000, description="at most this many entries, the newest")
        ] = 100,
    ) -> dict[str, Any]:
        """The transition log, newest last (with task_id: also that task's model calls and commands)."""
        with tool_errors():
            entries = log_entries(ctx(), task_id)
        return {"entries": entries[-limit:], "total": len(entries)}

    # --- rules -----------------------------------------------------------------------------------------

    @server.tool()
    def initialize_ast_grep() -> dict[str, Any]:
        """Create sgconfig.yml and the rules/ folder in the repository (needed before adding rules)."""
        with tool_errors():
            path = rules.init_project(repo_root)
            return {
                "success": True,
                "sgconfig": str(path),
                "rule_dirs": [str(d) for d in rules.project_rules(repo_root)],
            }

    @server.tool()
    def scan_code(
        code: Annotated[str, Field(description="the source text to scan")],
        language: Annotated[
            str, Field(description="its language, e.g. python, javascript, go (aliases: py, js)")
        ],
    ) -> dict[str, Any]:
        """Scan source code (not a file) with the packaged and the repository's ast-grep rules."""
        with tool_errors():
            findings = scan.scan_code(code, language, repo_root)
        return {"success": True, "issues": [_issue(f, with_file=False) for f in findings]}

    @server.tool()
    def scan_path(
        path: Annotated[str, Field(description="a file or folder, relative to the repository root")],
    ) -> dict[str, Any]:
        """Scan a file or folder of the repository (relative to its root) with the ast-grep rules."""
        with tool_errors():
            target = _inside(repo_root, path)
            findings = scan.scan_paths(repo_root, [str(target)])
        return {"success": True, "issues": [_issue(f, with_file=True) for f in findings]}

    @server.tool()
    def add_or_update_rule(
        rule_id: Annotated[str, Field(description="the rule's id (letters, digits, - and _); its file name")],
        rule_yaml: Annotated[
            str,
            Field(description="an ast-grep rule: id, language, severity, message, rule (pattern, kind, ...)"),
        ],
    ) -> dict[str, Any]:
        """Add or replace a repository rule; the YAML is checked by ast-grep first and refused if invalid."""
        with tool_errors():
            path = rules.add_or_update_rule(repo_root, rule_id, rule_yaml)
        return {"success": True, "rule_id": rule_id, "path": str(path)}

    @server.tool()
    def remove_rule(
        rule_id: Annotated[str, Field(description="the id of a rule in the repository's rules folder")],
    ) -> dict[str, Any]:
        """Delete a repository rule (a packaged rule is silenced instead with `severity: off`)."""
        with tool_errors():
            path = rules.remove_rule(repo_root, rule_id)
        return {"success": True, "rule_id": rule_id, "removed": str(path)}

    @server.tool()
    def search_community_rules(
        query: Annotated[
            str,
            Field(
                description="words to find in a rule's id, message and description (all must match; '' lists all)"
            ),
        ],
        language: Annotated[
            str | None, Field(description="only rules for this language (py, js, go, ...)")
        ] = None,
        tags: Annotated[
            str | list[str] | None,
            Field(description="only rules with every one of these tags: a list or 'a,b'"),
        ] = None,
    ) -> dict[str, Any]:
        """Search the community rule catalog (works offline). `rules` can be imported with
        import_community_rule; `active_rules` ship with agent-hub and run in every scan already."""
        wanted = [t.strip() for t in tags.split(",")] if isinstance(tags, str) else list(tags or [])
        wanted = [t for t in wanted if t]
        with tool_errors():
            found = rules_catalog.search_community_rules(query, language, wanted, catalog=_catalog(ctx()))
            active = rules_catalog.search_packaged_rules(query, language, wanted)
        return {"success": True, "rules": found, "active_rules": active}

    @server.tool()
    def get_community_rule_details(
        rule_id: Annotated[str, Field(description="an id from search_community_rules")],
    ) -> dict[str, Any]:
        """A community rule's description and full YAML."""
        with tool_errors():
            details = rules_catalog.get_community_rule_details(rule_id, catalog=_catalog(ctx()))
        return {"success": True, "rule": details}

    @server.tool()
    def import_community_rule(
        rule_id: Annotated[str, Field(description="an id from search_community_rules (its `rules` list)")],
    ) -> dict[str, Any]:
        """Copy a community rule into the repository's rules; it is active in the next scan."""
        with tool_errors():
            path = rules_catalog.import_community_rule(repo_root, rule_id, catalog=_catalog(ctx()))
        return {"success": True, "rule_id": rule_id, "path": str(path)}

    # --- backlog and notes ---------------------------------------------------------------------------

    @server.tool()
    def task_add(
        tasks: Annotated[list[NewTask], Field(min_length=1, description="the proposals to queue")],
    ) -> dict[str, Any]:
        """Queue proposals in the backlog; `hub_next` promotes the most urgent ready one when no task is active."""
        with tool_errors():
            added = backlog.add_tasks(ctx(), [t.model_dump(exclude_none=True) for t in tasks])
        return {"added": added}

    @server.tool()
    def task_update(
        id: Annotated[str, Field(description="the backlog task's id, e.g. B1 (see task_list)")],
        status: Annotated[SettableStatus | None, Field(description="proposed, blocked or dropped")] = None,
        priority: Annotated[
            int | None, Field(ge=0, le=4, description="0 is the most urgent, 4 the least")
        ] = None,
        content: Annotated[str | None, Field(description="the proposal's new text")] = None,
        depends_on: Annotated[
            list[str] | None, Field(description="ids of backlog tasks to merge first (replaces the list)")
        ] = None,
    ) -> dict[str, Any]:
        """Change a backlog task: status (proposed, blocked, dropped), priority, content, depends_on."""
        changes = {
            k: v
            for k, v in (
                ("status", status),
                ("priority", priority),
                ("content", content),
                ("depends_on", depends_on),
            )
            if v is not None
        }
        with tool_errors():
            return {"task": backlog.update_task(ctx(), id, changes)}

    @server.tool()
    def task_list(
        status: Annotated[
            EntryStatus | None, Field(description="only tasks in this status (proposed, in_progress, ...)")
        ] = None,
    ) -> dict[str, Any]:
        """The backlog, open tasks first, most urgent first."""
        with tool_errors():
            return {"tasks": backlog.list_tasks(ctx(), status)}

    @server.tool()
    def task_next() -> dict[str, Any]:
        """The proposal `hub_next` would promote: the most urgent one whose dependencies are merged
        (`blocked`: why hub_next would block it instead)."""
        with tool_errors():
            return next_proposal(ctx())

    @server.tool()
    def note_add(
        content: Annotated[str, Field(min_length=1, description="the note; the implementer reads it")],
        type: Annotated[NoteType, Field(description="learning, stuck, tip or decision")],
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """A note for a task (task_id, or the only active one; for every task when none is named and
        several or none are active); the implementer reads it."""
        with tool_errors():
            return {"note": backlog.add_note(ctx(task_id), content, type)}

    @server.tool()
    def note_list(
        type: Annotated[NoteType | None, Field(description="only notes of this type")] = None,
        all_tasks: Annotated[
            bool, Field(description="every note ever written, not just the active task's")
        ] = False,
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """Notes of a task (task_id, or the only active one) and those for every task (all_tasks: every
        note ever written)."""
        with tool_errors():
            return {"notes": backlog.list_notes(ctx(task_id), type, all_tasks)}

    @server.tool()
    def iteration_summary(
        summary: Annotated[str, Field(min_length=1, description="what this iteration did")],
    ) -> dict[str, Any]:
        """Record what this iteration did."""
        with tool_errors():
            return {"summary": backlog.iteration_summary(ctx(), summary)}

    @server.tool()
    def session_complete() -> dict[str, Any]:
        """End the session; refused while any backlog task is not merged or dropped."""
        with tool_errors():
            return {"session": backlog.session_complete(ctx())}

    return server


def _version() -> str:
    try:
        return version("agent-hub")
    except PackageNotFoundError:
        return "0"


def _issue(finding: Any, with_file: bool) -> dict[str, Any]:
    issue = {
        "ruleId": finding.rule_id,
        "message": finding.message,
        "line": finding.line,
        "column": finding.column,
        "severity": finding.severity,
    }
    if with_file:
        issue["file"] = finding.file
    return issue


def _inside(repo_root: Path, path: str) -> Path:
    """`path` (relative to the repository, or absolute) if it lies inside the repository."""
    root = repo_root.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path} is outside the repository {root}; give a path inside it")
    if not target.exists():
        raise ToolError(f"{path} does not exist in {root}")
    return target


def _catalog(context: Context) -> Any:
    return rules_catalog.load_catalog(context.config.rules_catalog_url)


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_address(host)).is_loopback
    except ValueError:
        return False


def bind_address(host: str) -> str:
    """`[::1]` as the CLI may give it is `::1` to bind; anything else unchanged."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def url_host(host: str) -> str:
    bare = bind_address(host)
    return f"[{bare}]" if ":" in bare else bare


def transport_security(host: str, port: int) -> Any:
    """DNS-rebinding protection for a loopback bind, whatever the loopback address: only requests whose
    Host (and Origin, when sent) name the address bound, or localhost, are served. The SDK's own guard
    knows only 127.0.0.1, localhost and ::1, so `--host 127.0.0.2` served `Host: evil.example`."""
    names = {url_host(host), "localhost"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted({f"{n}:{port}" for n in names} | names),
        allowed_origins=sorted(f"{scheme}://{n}:{port}" for n in names for scheme in ("http", "https")),
    )


def http_app(server: MCPServer, host: str, token: str | None, port: int = DEFAULT_HTTP_PORT) -> Any:
    """The streamable HTTP app (endpoint /mcp): behind the bearer check when there is a token, and on a
    loopback address behind the Host/Origin check too (a browser page cannot send the token, but it can
    make a request to a rebound name)."""
    loopback = is_loopback(host)
    if not token and not loopback:
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could drive the hub; "
            "pass --token or set HUB_MCP_TOKEN (or bind 127.0.0.1)"
        )
    security = transport_security(host, port) if loopback else None
    app = server.streamable_http_app(host=bind_address(host), transport_security=security)
    return BearerAuth(app, token) if token else app


def serve(
    repo_root: Path,
    handoff_dir: Path | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_HTTP_PORT,
    token: str | None = None,
) -> None:
    """Serve until stdin closes (stdio) or the process is stopped (http). The phases the tools run, for
    as long as this serves, share their MCP worker servers: each is spawned once, not per phase."""
    from hub.workers.pool import WorkerPool

    config = load_config(repo_root, handoff_dir)
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport '{transport}' (stdio or http)")
    workers = WorkerPool()
    try:
        _serve(build_server(repo_root, handoff_dir, workers), config, transport, host, port, token)
    finally:
        workers.close()


def _serve(
    server: MCPServer, config: Config, transport: str, host: str, port: int, token: str | None
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
    # uvicorn's INFO lines go to stderr and say when it listens; access logs would drown them.
    uvicorn.Server(
        uvicorn.Config(
            app, host=bind_address(host), port=port, log_level="info", access_log=False, lifespan="on"
        )
    ).run()
