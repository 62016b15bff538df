"""`hub next`: run whatever phase is due, for cron and the watcher. Nothing due is exit 0."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from hub.log import get_logger
from hub.phases.context import Context, Outcome
from hub.phases.status import next_step

log = get_logger("hub.next")

# phase name -> "module:function"; imported only when the phase runs.
PHASES: dict[str, str] = {
    "setup-task": "hub.phases.setup:setup_task",
    "run-implementer": "hub.phases.implement:run_implementer",
    "run-local-review": "hub.phases.review:run_local_review",
    "run-judge": "hub.phases.judge_runner:run_judge",
    "report-judge": "hub.phases.judge:report_judge",
    "timeout-judge": "hub.phases.judge:timeout_judge",
    "finalize-task": "hub.phases.finalize:finalize_task",
    "promote-backlog": "hub.phases.promote:promote_next",
}


def phase_function(name: str) -> Callable[[Context], Outcome]:
    module, _, func = PHASES[name].partition(":")
    return getattr(importlib.import_module(module), func)


def run_next(ctx: Context) -> Outcome:
    contract, phase, why = next_step(ctx)
    if phase is None:
        task_id = contract["task_id"] if contract else None
        # cron sends stdout nowhere: say on stderr (the log) why the task is not moving, e.g. waiting
        # for a judge nobody configured.
        log.info("next.waiting", task=task_id, state=contract["status"] if contract else None, why=why)
        return Outcome("next", task_id, message=f"nothing to do: {why}")
    outcome = phase_function(phase)(ctx)
    outcome.data.setdefault("ran", phase)
    return outcome
