"""What every phase is given (`Context`: configuration, a clock, workers) and what it gives back
(`Outcome`). A phase's hold on its task is `Run` (run.py), taken by `running()` (session.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.config import Config
from hub.state import handoff
from hub.state.contract import now_utc

if TYPE_CHECKING:
    from hub.workers.base import Worker
    from hub.workers.pool import WorkerPool


@dataclass
class Context:
    """What a phase is given: configuration, a clock, and a way to get a worker for a role."""

    config: Config
    clock: Callable[[], datetime] = now_utc
    worker_factory: Callable[[str], Worker] | None = None
    # How an outage is waited out (tests pass a sleep that restarts the server).
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    # The task this context acts on (`--task`, `task_id`); None: the only task there is (see `bind`).
    task_id: str | None = None
    # MCP worker servers shared by the phases this process runs (`hub next --until-idle`); None: each
    # phase starts and stops its own.
    workers: WorkerPool | None = None

    def __post_init__(self) -> None:
        # The CLI and every MCP tool build their Context with the task id they were given: checked here
        # once, before anything joins it to a path.
        if self.task_id == "":
            self.task_id = None  # an empty task_id is no task id (some MCP clients send one)
        if self.task_id is not None:
            handoff.check_task_id(self.task_id)

    @property
    def handoff_root(self) -> handoff.Handoff:
        """The handoff folder, bound to no task: what all tasks share."""
        return handoff.Handoff(self.config.handoff_dir, self.config.halt_file)

    @property
    def handoff(self) -> handoff.Handoff:
        """The handoff folder bound to this context's task, or to the only task there is."""
        root = self.handoff_root
        if self.task_id:
            return root.for_task(self.task_id)
        ids = root.task_ids()
        return root.for_task(ids[0]) if len(ids) == 1 else root

    def for_task(self, task_id: str | None) -> Context:
        return replace(self, task_id=task_id)

    @property
    def repo_root(self) -> Path:
        return self.config.repo_root

    def worker(self, role: str, host: str | None = None) -> Worker:
        """A worker for `role`; `host`: on that model server of the pool instead of `ollama.host`."""
        if self.worker_factory is not None:
            return self.worker_factory(role)
        # Here, not at the top: `hub status` and an idle `hub next` build a Context but never a worker.
        from hub.workers.bridge import make_worker

        config = replace(self.config, ollama_host=host) if host else self.config
        role_config = config.judge_role() if role == "judge" else role
        if self.workers is not None:
            return self.workers.worker(config, role_config)
        return make_worker(config, role_config)


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
