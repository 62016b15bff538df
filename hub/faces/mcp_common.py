"""What the MCP tool groups (`mcp_pipeline`, `mcp_rules`, `mcp_backlog`) share: the hub's errors as
tool errors, the task_id input, and how a tool gets its `Context`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Protocol

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from hub.core.errors import HubError, describe

if TYPE_CHECKING:
    from hub.phases.context import Context

# Every tool that acts on a task takes one; without it the tool acts on the only task that fits, or
# fails listing the candidates.
TaskId = Annotated[
    str | None, Field(description="the task to act on (default: the only one that fits; see hub_status)")
]


class ContextFor(Protocol):
    """A tool's Context for the task it names (None: the only one that fits), config re-read per call."""

    def __call__(self, task_id: str | None = None) -> Context: ...


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the hub's errors into MCP tool errors that keep the hub's message and hint."""
    try:
        yield
    except HubError as exc:
        raise ToolError(f"{type(exc).__name__}: {describe(exc)}") from None
