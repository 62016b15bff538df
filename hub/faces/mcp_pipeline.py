"""The pipeline tools of `hub mcp serve`: create a task, run its phases, answer as its judge, rebut,
resume a halt, read its status and log. Each is one call into the phase the CLI command of the same
name runs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from hub.faces.mcp_common import ContextFor, TaskId, tool_errors
from hub.phases.finalize import resume
from hub.phases.judge import rebut
from hub.phases.judge_runner import read_review_request, submit_verdict
from hub.phases.next import run_next
from hub.phases.setup import create, missing_task_field, task_fields
from hub.phases.status import log_entries, status

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

Verdict = Literal["PASS", "CONDITIONAL", "FAIL", "CRITICAL_HALT"]
Complexity = Literal["trivial", "minor", "major", "critical"]


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


def add_pipeline_tools(server: MCPServer, ctx: ContextFor) -> None:
    """Register the pipeline tools (PIPELINE_TOOLS) on `server`."""

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
