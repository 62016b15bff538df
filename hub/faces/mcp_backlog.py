"""The backlog and notes tools of `hub mcp serve` (iteratr's verbs): queue proposals, change and list
them, the one `hub_next` would promote, notes for the implementer, iteration summaries, the end of a
session. Each is one call into `hub.state.backlog` (or the promote phase), as `hub backlog` and
`hub note` make."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from hub.faces.mcp_common import ContextFor, TaskId, tool_errors
from hub.phases.promote import next_proposal
from hub.state import backlog

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

NoteType = Literal["learning", "stuck", "tip", "decision"]
SettableStatus = Literal["proposed", "blocked", "dropped"]
EntryStatus = Literal["proposed", "in_progress", "merged", "blocked", "dropped"]


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


def add_backlog_tools(server: MCPServer, ctx: ContextFor) -> None:
    """Register the backlog and notes tools (BACKLOG_TOOLS) on `server`."""

    @server.tool()
    def task_add(
        tasks: Annotated[list[NewTask], Field(min_length=1, description="the proposals to queue")],
    ) -> dict[str, Any]:
        """Queue proposals in the backlog; `hub_next` promotes the most urgent ready one when no task is active."""
        with tool_errors():
            here = ctx()
            added = backlog.add_tasks(
                here.handoff, here.clock, [t.model_dump(exclude_none=True) for t in tasks]
            )
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
            here = ctx()
            return {"task": backlog.update_task(here.handoff, here.clock, id, changes)}

    @server.tool()
    def task_list(
        status: Annotated[
            EntryStatus | None, Field(description="only tasks in this status (proposed, in_progress, ...)")
        ] = None,
    ) -> dict[str, Any]:
        """The backlog, open tasks first, most urgent first."""
        with tool_errors():
            here = ctx()
            return {"tasks": backlog.list_tasks(here.handoff, here.clock, status)}

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
            here = ctx(task_id)
            return {"note": backlog.add_note(here.handoff, here.clock, content, type)}

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
            return {"notes": backlog.list_notes(ctx(task_id).handoff, type, all_tasks)}

    @server.tool()
    def iteration_summary(
        summary: Annotated[str, Field(min_length=1, description="what this iteration did")],
    ) -> dict[str, Any]:
        """Record what this iteration did."""
        with tool_errors():
            here = ctx()
            return {"summary": backlog.iteration_summary(here.handoff, here.clock, summary)}

    @server.tool()
    def session_complete() -> dict[str, Any]:
        """End the session; refused while any backlog task is not merged or dropped."""
        with tool_errors():
            here = ctx()
            return {"session": backlog.session_complete(here.handoff, here.clock)}
