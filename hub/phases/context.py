"""What every phase is given (`Context`: configuration, a clock, workers). What it gives back is an
`Outcome` (outcome.py); its hold on its task is `Run` (run.py), taken by `running()` (session.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.config import Config
from hub.state import handoff
from hub.state.contract import now_utc

if TYPE_CHECKING:
    from hub.workers.base import Worker
    from hub.workers.pool import WorkerPool


class Context:
    """What a phase is given: configuration, a clock, and a way to get a worker for a role.

    A plain class rather than a dataclass, as `hub status` builds one (see `hub.core.config`)."""

    def __init__(
        self,
        config: Config,
        clock: Callable[[], datetime] = now_utc,
        worker_factory: Callable[[str], Worker] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        task_id: str | None = None,
        workers: WorkerPool | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.worker_factory = worker_factory
        # How an outage is waited out (tests pass a sleep that restarts the server).
        self.sleep = sleep
        self.monotonic = monotonic
        # The task this context acts on (`--task`, `task_id`); None: the only task there is (see
        # `handoff`). The CLI and every MCP tool build their Context with the task id they were given:
        # checked here once, before anything joins it to a path. An empty one is no task id (some MCP
        # clients send one).
        self.task_id = task_id or None
        if self.task_id is not None:
            handoff.check_task_id(self.task_id)
        # MCP worker servers shared by the phases this process runs (`hub next --until-idle`); None:
        # each phase starts and stops its own.
        self.workers = workers

    def replace(self, **changes: Any) -> Context:
        """A copy with `changes` (the keyword arguments of Context)."""
        return Context(**{**vars(self), **changes})

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
        return self.replace(task_id=task_id)

    @property
    def repo_root(self) -> Path:
        return self.config.repo_root

    def worker(self, role: str, host: str | None = None) -> Worker:
        """A worker for `role`; `host`: on that model server of the pool instead of `ollama.host`."""
        if self.worker_factory is not None:
            return self.worker_factory(role)
        # Here, not at the top: `hub status` and an idle `hub next` build a Context but never a worker.
        from hub.workers.bridge import make_worker

        config = self.config._replace(ollama_host=host) if host else self.config
        role_config = config.judge_role() if role == "judge" else role
        if self.workers is not None:
            return self.workers.worker(config, role_config)
        return make_worker(config, role_config)
