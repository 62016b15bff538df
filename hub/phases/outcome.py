"""What a phase gives back (`Outcome`), for the CLI, the MCP server and `hub next`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    """What a phase did, for the CLI, the MCP server and `hub next`."""

    phase: str
    task_id: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    message: str = ""
    exit_code: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "task_id": self.task_id,
            "from": self.from_state,
            "to": self.to_state,
            "message": self.message,
            "exit_code": self.exit_code,
            **({"data": self.data} if self.data else {}),
        }
