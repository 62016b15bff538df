"""`hub mcp serve`: the official MCP client against a real server process over stdio and streamable HTTP
(every tool listed and called, on a real repo), the bearer token, and the rules tools in detail (those
in-process, through the SDK's in-memory client, since the transport is not what they test)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest

from hub.core.errors import ConfigError
from hub.faces.mcp_server import TOOL_NAMES, build_server, http_app
from hub.state.breakers import Trip

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver

PROPOSAL = """# Greet politely

Target: src/app.py

## Requirements

- greet() says 'hello, NAME'
"""
NO_PRINT = """id: no-print
language: python
severity: warning
message: "print() left in: $A"
rule:
  pattern: print($A)
"""
READY_SECONDS = 30.0

Call = Callable[..., Awaitable[Any]]


def child_env() -> dict[str, str]:
    # The SDK's stdio child gets only a minimal environment plus this.
    env = {"HUB_LOG_FORMAT": "json", "HUB_LOG_LEVEL": "WARNING"}
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


@asynccontextmanager
async def stdio_session(repo: Path) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hub", "--repo", str(repo), "mcp", "serve"],
        env=child_env(),
        cwd=str(repo),
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60.0) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60.0) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60.0) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def memory_session(repo: Path) -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(build_server(repo)) as client:
        yield client


def caller(session: Any, called: set[str] | None = None) -> Call:
    """`await call(name, args, error=False)`: the structured result, or the error text when error=True."""

    async def call(name: str, args: dict[str, Any] | None = None, error: bool = False) -> Any:
        result = await session.call_tool(name, args or {})
        text = result.content[0].text if result.content else ""
        assert result.is_error == error, f"{name}: {text}"
        if called is not None:
            called.add(name)
        return text if error else result.structured_content

    return call


async def exercise_every_tool(session: Any, repo: Path, task: TaskDriver) -> None:
    """Plan two tasks, run the first through the pipeline to a merge with the agent as the judge, halt and
    resume the second, then manage rules: every tool, each called for real."""
    tools = await session.list_tools()
    assert sorted(t.name for t in tools.tools) == sorted(TOOL_NAMES)
    called: set[str] = set()
    call = caller(session, called)

    assert (await call("hub_status"))["tasks"] == []
    added = await call(
        "task_add",
        {
            "tasks": [
                {"id": "greet", "content": PROPOSAL, "priority": 1},
                {
                    "id": "bye",
                    "content": "Say goodbye\nTarget: src/app.py",
                    "priority": 0,
                    "depends_on": ["greet"],
                },
            ]
        },
    )
    assert [t["id"] for t in added["added"]] == ["greet", "bye"]
    assert (await call("task_next"))["task"]["id"] == "greet"
    assert (await call("task_update", {"id": "bye", "priority": 2}))["task"]["priority"] == 2
    assert len((await call("task_list"))["tasks"]) == 2
    assert (await call("note_add", {"content": "keep the signature", "type": "tip"}))["note"][
        "task_id"
    ] is None
    assert [n["content"] for n in (await call("note_list"))["notes"]] == ["keep the signature"]
    assert (await call("iteration_summary", {"summary": "planned two tasks"}))["summary"]["id"] == "S1"
    assert "not merged or dropped" in await call("session_complete", error=True)

    promoted = await call("hub_next")
    assert promoted["data"]["backlog_id"] == "greet"
    assert "no review request yet" in await call("hub_read_review_request", error=True)

    task.to_judge_review()  # setup, the implementer's commit and the local review, played in-process
    request = await call("hub_read_review_request")
    assert request["status"] == "pending_judge_review" and "greet() says" in request["text"]
    assert request["answer_with"] == "hub_submit_verdict" and "call `hub_submit_verdict`" in request["text"]
    failed = await call(
        "hub_submit_verdict",
        {"verdict": "FAIL", "blocking_issues": [{"description": "no comma", "severity": "major"}]},
    )
    assert failed["to"] == "pending_implementer"
    rebutted = await call("hub_rebut", {"text": "The comma is there: 'hello, ' + name."})
    assert rebutted["to"] == "pending_judge_review"
    assert "The comma is there" in (await call("hub_read_review_request"))["text"]
    verdict = await call("hub_submit_verdict", {"verdict": "PASS", "summary": "the comma is there"})
    assert verdict["to"] == "review_complete"
    merged = await call("hub_next")
    assert (merged["data"]["ran"], merged["to"]) == ("finalize-task", "merged")
    states = {t["id"]: t["status"] for t in (await call("task_list"))["tasks"]}
    assert states == {"greet": "merged", "bye": "proposed"}

    assert (await call("hub_next"))["data"]["backlog_id"] == "bye"
    task.run().halt(Trip("test", "a person must look"))
    (halted,) = (await call("hub_status"))["tasks"]
    assert list(halted["resume_targets"]) == ["pending_implementer"]  # nothing written: no review
    resumed = await call("hub_resume", {"to": "pending_implementer", "note": "looked"})
    assert (resumed["from"], resumed["to"]) == ("erik_consultation", "pending_implementer")
    log = await call("hub_log")
    assert log["total"] >= 8 and log["entries"][-1]["event"] == "resume"
    bye = task.contract()["task_id"]
    created = await call(
        "hub_create_task", {"title": "Another", "requirements": ["y"], "target_file": "README.md"}
    )
    assert created["task_id"] != bye
    listed = await call("hub_status")
    assert sorted(t["task_id"] for t in listed["tasks"]) == sorted([bye, created["task_id"]])
    refused = await call("hub_resume", {"to": "pending_implementer"}, error=True)
    assert "resume needs a task in erik_consultation; none is:" in refused and bye in refused
    only = await call("hub_status", {"task_id": created["task_id"]})
    assert [t["task_id"] for t in only["tasks"]] == [created["task_id"]]

    init = await call("initialize_ast_grep")
    assert Path(init["sgconfig"]).is_file()
    scanned = await call("scan_code", {"code": "x = input()\neval(x)\n", "language": "python"})
    assert [(i["ruleId"], i["line"]) for i in scanned["issues"]] == [("py-eval-exec", 2)]
    assert (await call("add_or_update_rule", {"rule_id": "no-print", "rule_yaml": NO_PRINT}))["success"]
    (repo / "check.py").write_text("print('left over')\n", encoding="utf-8")
    found = await call("scan_path", {"path": "check.py"})
    assert [(i["ruleId"], i["file"], i["line"]) for i in found["issues"]] == [("no-print", "check.py", 1)]
    assert (await call("remove_rule", {"rule_id": "no-print"}))["success"]
    hits = await call("search_community_rules", {"query": "timeout", "language": "python"})
    assert "py-http-no-timeout" in [r["id"] for r in hits["rules"]]
    # By whole words in id, message and description: "eval" is not in "evaluated", and the eval rule
    # shipped with agent-hub is found, marked as active already.
    evals = await call("search_community_rules", {"query": "eval", "language": "py"})
    assert evals["rules"] == [] and [r["id"] for r in evals["active_rules"]] == ["py-eval-exec"]
    details = await call("get_community_rule_details", {"rule_id": "py-http-no-timeout"})
    assert "requests" in details["rule"]["rule_yaml"]
    imported = await call("import_community_rule", {"rule_id": "py-http-no-timeout"})
    assert Path(imported["path"]).is_file()

    assert called == set(TOOL_NAMES)


def test_every_tool_over_stdio(git_repo: Path, task: TaskDriver) -> None:
    async def main() -> None:
        async with stdio_session(git_repo) as session:
            await exercise_every_tool(session, git_repo, task)

    anyio.run(main)


class HttpServer:
    """`hub mcp serve --transport http` as a subprocess; ready once uvicorn says it is listening."""

    def __init__(self, repo: Path, port: int, token: str | None, host: str = "127.0.0.1") -> None:
        self.url = f"http://{host}:{port}/mcp"
        self.lines: list[str] = []
        self.ready = threading.Event()
        env = {**os.environ, "HUB_LOG_FORMAT": "json"}
        env.pop("HUB_MCP_TOKEN", None)
        if token:
            env["HUB_MCP_TOKEN"] = token
        env.pop("HUB_HANDOFF_DIR", None)
        argv = [sys.executable, "-m", "hub", "--repo", str(repo), "mcp", "serve", "--transport", "http"]
        self.process = subprocess.Popen(
            [*argv, "--port", str(port), "--host", host],
            env=env,
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if re.search(r"Uvicorn running on", line):
                self.ready.set()
        self.ready.set()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_tool_over_http_and_a_request_without_the_token_gets_401(
    git_repo: Path, task: TaskDriver
) -> None:
    server = HttpServer(git_repo, free_port(), token="s3cret-token")
    try:
        assert server.ready.wait(READY_SECONDS) and server.process.poll() is None, "".join(server.lines)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        with httpx.Client(timeout=10) as http:
            bare = http.post(server.url, json=body, headers=headers)
            wrong = http.post(server.url, json=body, headers={**headers, "Authorization": "Bearer nope"})
        assert (bare.status_code, wrong.status_code) == (401, 401)
        assert bare.headers["www-authenticate"].startswith("Bearer")

        async def main() -> None:
            async with http_session(server.url, "s3cret-token") as session:
                await exercise_every_tool(session, git_repo, task)

        anyio.run(main)
    finally:
        server.close()


def test_serving_beyond_loopback_without_a_token_is_refused(git_repo: Path) -> None:
    server = build_server(git_repo)
    with pytest.raises(ConfigError, match="without a token"):
        http_app(server, "0.0.0.0", None)
    assert http_app(server, "0.0.0.0", "t" * 16) is not None  # a one-character token is refused (issue 28)
    assert http_app(server, "127.0.0.1", None) is not None


# --- the rules tools in detail (in-process) ---------------------------------------------------------------


def run_in_memory(repo: Path, body: Callable[[Call], Awaitable[None]]) -> None:
    async def main() -> None:
        async with memory_session(repo) as session:
            await body(caller(session))

    anyio.run(main)


def test_a_hub_error_reaches_the_client_with_its_hint(git_repo: Path) -> None:
    (git_repo / "hub.yaml").unlink()

    async def body(call: Call) -> None:
        message = await call("hub_status", {}, error=True)
        assert "NotInitialised: no hub.yaml in " in message
        assert message.endswith("`hub init` has not run here; fix: hub init")

    run_in_memory(git_repo, body)


def test_rule_tools_before_initialize_say_what_to_do(git_repo: Path) -> None:
    async def body(call: Call) -> None:
        message = await call("add_or_update_rule", {"rule_id": "no-print", "rule_yaml": NO_PRINT}, error=True)
        assert "no sgconfig.yml: call initialize_ast_grep first" in message
        # Scanning works without it: the packaged rules always apply.
        found = await call("scan_code", {"code": "eval(x)\n", "language": "py"})
        assert found == {"success": True, "issues": [found["issues"][0]]}
        assert found["issues"][0]["ruleId"] == "py-eval-exec"

    run_in_memory(git_repo, body)


def test_a_rule_round_trips_through_sgconfig_and_the_rules_folder(git_repo: Path) -> None:
    code = {"code": "def f(x):\n    print(x)\n", "language": "python"}

    async def body(call: Call) -> None:
        await call("initialize_ast_grep")
        assert (await call("scan_code", code))["issues"] == []
        added = await call("add_or_update_rule", {"rule_id": "no-print", "rule_yaml": NO_PRINT})
        assert Path(added["path"]) == git_repo / "rules" / "no-print.yml"
        issues = (await call("scan_code", code))["issues"]
        assert [(i["ruleId"], i["line"], i["message"]) for i in issues] == [
            ("no-print", 2, "print() left in: x")
        ]
        await call("remove_rule", {"rule_id": "no-print"})
        assert (await call("scan_code", code))["issues"] == []
        assert not (git_repo / "rules" / "no-print.yml").exists()

    run_in_memory(git_repo, body)


def test_an_invalid_rule_is_refused_and_no_file_changes(git_repo: Path, snapshot: Any) -> None:
    async def body(call: Call) -> None:
        await call("initialize_ast_grep")
        await call("add_or_update_rule", {"rule_id": "no-print", "rule_yaml": NO_PRINT})
        before = snapshot(git_repo)
        for bad in (
            NO_PRINT.replace("pattern: print($A)", "patern: print($A)"),
            NO_PRINT.replace("language: python", "language: klingon"),
            "id: no-print\nlanguage: python\nrule: [unclosed\n",
            NO_PRINT.replace("id: no-print", "id: other"),
        ):
            message = await call("add_or_update_rule", {"rule_id": "no-print", "rule_yaml": bad}, error=True)
            assert "RuleError" in message
        assert snapshot(git_repo) == before

    run_in_memory(git_repo, body)


def test_an_imported_community_rule_is_active_in_the_next_scan(git_repo: Path) -> None:
    code = {"code": "import requests\nrequests.get(url)\n", "language": "python"}

    async def body(call: Call) -> None:
        await call("initialize_ast_grep")
        assert (await call("scan_code", code))["issues"] == []
        hits = await call("search_community_rules", {"query": "", "tags": "http,reliability"})
        assert [r["id"] for r in hits["rules"]] == ["py-http-no-timeout"]
        await call("import_community_rule", {"rule_id": "py-http-no-timeout"})
        issues = (await call("scan_code", code))["issues"]
        assert [(i["ruleId"], i["line"]) for i in issues] == [("py-http-no-timeout", 2)]
        missing = await call("get_community_rule_details", {"rule_id": "no-such-rule"}, error=True)
        assert "search_community_rules" in missing

    run_in_memory(git_repo, body)


def test_scan_path_stays_inside_the_repository(git_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.py").write_text("eval(x)\n", encoding="utf-8")

    async def body(call: Call) -> None:
        assert "outside the repository" in await call("scan_path", {"path": "../secret.py"}, error=True)
        assert "outside the repository" in await call(
            "scan_path", {"path": str(tmp_path / "secret.py")}, error=True
        )
        assert "does not exist" in await call("scan_path", {"path": "nope.py"}, error=True)

    run_in_memory(git_repo, body)


def test_hub_create_task_takes_the_fields_of_hub_new(git_repo: Path, task: TaskDriver) -> None:
    async def body(call: Call) -> None:
        refused = await call("hub_create_task", {"proposal": PROPOSAL}, error=True)
        assert "title" in refused and "requirements" in refused and "Field required" in refused
        mistyped = {
            "title": "t",
            "requirements": ["r"],
            "target_file": "src/app.py",
            "source_files": ["src/ap.py"],
        }
        refused = await call("hub_create_task", mistyped, error=True)
        assert "--source src/ap.py: no such file" in refused and "did you mean src/app.py?" in refused
        new_file = {"title": "t", "requirements": ["r"], "target_file": "src/new.py"}
        assert "over MCP create_target" in await call("hub_create_task", new_file, error=True)
        created = await call(
            "hub_create_task",
            {
                "title": "Greet politely",
                "requirements": ["greet() says 'hello, NAME'"],
                "proposal": PROPOSAL,  # fills in what the inputs leave out: the target
                "acceptance_commands": ["python -c pass"],
                "complexity": "trivial",
            },
        )
        assert created["to"] == "pending_implementer"

    run_in_memory(git_repo, body)

    contract = task.contract()
    assert contract["title"] == "Greet politely"
    assert contract["complexity"] == "trivial"
    assert contract["specification"]["target_file"] == "src/app.py"
    assert contract["specification"]["acceptance_commands"] == ["python -c pass"]


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]"])
def test_a_rebinding_request_to_any_loopback_address_is_refused(git_repo: Path, host: str) -> None:
    port = free_port()
    server = HttpServer(git_repo, port, token=None, host=host)
    try:
        assert server.ready.wait(READY_SECONDS) and server.process.poll() is None, "".join(server.lines)
        with httpx.Client(timeout=10) as http:
            evil = http.post(server.url, json=INIT, headers={**ACCEPT, "Host": f"evil.example:{port}"})
            origin = http.post(server.url, json=INIT, headers={**ACCEPT, "Origin": "http://evil.example"})
            own = http.post(server.url, json=INIT, headers=ACCEPT)
        assert (evil.status_code, origin.status_code) == (421, 403)
        assert own.status_code == 200, own.text
    finally:
        server.close()


def test_the_bearer_scheme_is_matched_without_case(git_repo: Path) -> None:
    server = HttpServer(git_repo, free_port(), token="s3cret-token")
    try:
        assert server.ready.wait(READY_SECONDS) and server.process.poll() is None, "".join(server.lines)
        with httpx.Client(timeout=10) as http:
            lower = http.post(
                server.url, json=INIT, headers={**ACCEPT, "Authorization": "bearer s3cret-token"}
            )
            upper = http.post(
                server.url, json=INIT, headers={**ACCEPT, "Authorization": "BEARER s3cret-token"}
            )
            wrong = http.post(server.url, json=INIT, headers={**ACCEPT, "Authorization": "bearer nope"})
        assert (lower.status_code, upper.status_code, wrong.status_code) == (200, 200, 401)
    finally:
        server.close()


async def describe_tools(session: Any) -> dict[str, Any]:
    return {t.name: t.input_schema for t in (await session.list_tools()).tools}


def test_every_tool_input_has_a_description_and_the_required_ones_are_marked(git_repo: Path) -> None:
    async def main() -> dict[str, Any]:
        async with memory_session(git_repo) as client:
            return await describe_tools(client)

    schemas = anyio.run(main)
    undescribed = [
        f"{tool}.{name}"
        for tool, schema in schemas.items()
        for name, prop in schema.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert undescribed == []
    assert set(schemas["hub_create_task"]["required"]) == {"title", "requirements"}
    assert set(schemas["hub_submit_verdict"]["required"]) == {"verdict"}
    assert set(schemas["hub_rebut"]["required"]) == {"text"}
    issue = schemas["hub_submit_verdict"]["$defs"]["BlockingIssue"]
    assert issue["required"] == ["description"]
    assert all(p.get("description") for p in issue["properties"].values())


@pytest.mark.parametrize("backend", ["ollama", "mcp"])
def test_a_whole_task_driven_only_through_mcp_tools_over_stdio(
    git_repo: Path, run_git: Any, tmp_path: Path, backend: str
) -> None:
    """An agent alone: create, next until the judge is due, read the review, submit the verdict, next to
    merged. The model is FakeOllama; no other command runs in between. With the `mcp` backend the
    server's phases share one worker (the hub's own, in its process)."""
    from hub.testing import FakeOllama

    fixed = 'def greet(name):\n    return "hello, " + name\n'
    model = "qwen2.5-coder:7b"  # the default hub.yaml's model for both roles
    review = '```json\n{"passed": true, "critical": false, "issues": []}\n```'
    errlog = tmp_path / "server.log"
    with FakeOllama() as fake, errlog.open("w", encoding="utf-8") as server_log:
        fake.script(model, f"src/app.py\n```python\n{fixed}```\n", review)
        extra = {
            "OLLAMA_HOST": fake.url,
            "HUB_LOG_LEVEL": "DEBUG",
            "HUB_IMPLEMENTER_BACKEND": backend,
            "HUB_LOCAL_REVIEWER_BACKEND": backend,
        }

        async def main() -> list[str]:
            from mcp import ClientSession, StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "hub", "--repo", str(git_repo), "mcp", "serve"],
                env={**child_env(), **extra},
                cwd=str(git_repo),
            )
            async with (
                stdio_client(params, errlog=server_log) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120.0) as session,
            ):
                await session.initialize()
                call = caller(session)
                created = await call(
                    "hub_create_task",
                    {
                        "title": "Greet politely",
                        "requirements": ["greet() says 'hello, NAME'"],
                        "target_file": "src/app.py",
                    },
                )
                ran = []
                for _ in range(3):  # setup-task, run-implementer, run-local-review
                    outcome = await call("hub_next")
                    ran.append(outcome["data"]["ran"])
                (status,) = (await call("hub_status"))["tasks"]
                assert status["status"] == "pending_judge_review", status
                request = await call("hub_read_review_request")
                assert "call `hub_submit_verdict`" in request["text"] and "+    return" in request["text"]
                verdict = await call("hub_submit_verdict", {"verdict": "PASS", "summary": "says hello, NAME"})
                assert verdict["to"] == "review_complete"
                merged = await call("hub_next")
                ran.append(merged["data"]["ran"])
                assert merged["to"] == "merged" and merged["task_id"] == created["task_id"]
                assert (await call("hub_status"))["tasks"] == []
                return ran

        ran = anyio.run(main)
    assert ran == ["setup-task", "run-implementer", "run-local-review", "finalize-task"]
    assert run_git(git_repo, "show", "main:src/app.py") == fixed.rstrip("\n")
    lines = errlog.read_text(encoding="utf-8").splitlines()
    started = [line for line in lines if '"worker.inprocess_started"' in line]
    # Two model phases, each its own tool call: one worker for both (the default, in-process: no process).
    assert len(started) == (1 if backend == "mcp" else 0)
    assert not [line for line in lines if '"mcp.spawned"' in line]
