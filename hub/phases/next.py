"""`hub next`: run whatever phase is due, for cron and the watcher. Nothing due is exit 0."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from hub.contract import Contract
from hub.errors import ContractInvalid, WrongState
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
    """Run the phase that is due. A second `hub next` that lost the race for the task (it waited, and
    the first moved the task on or archived it) has nothing to do: exit 0, not a state error."""
    contract, phase, why = next_step(ctx)
    if phase is None:
        task_id = contract["task_id"] if contract else None
        # cron sends stdout nowhere: say on stderr (the log) why the task is not moving, e.g. waiting
        # for a judge nobody configured.
        log.info("next.waiting", task=task_id, state=contract["status"] if contract else None, why=why)
        return Outcome("next", task_id, message=f"nothing to do: {why}")
    before = contract["status"] if contract else None
    try:
        outcome = phase_function(phase)(ctx)
    except WrongState as exc:
        # Only the phase gate's refusal, and only when the task moved on since we looked.
        if exc.found is None or exc.found == before:
            raise
        if exc.recovered:
            # Our own recovery finished a killed phase's work: run what is due now, once.
            return run_next(ctx)
        return _lost_race(contract, phase, before, exc.found)
    except ContractInvalid:
        if contract is None or ctx.handoff.contract.exists():
            raise
        return _lost_race(contract, phase, before, "archived")
    outcome.data.setdefault("ran", phase)
    return outcome


def _lost_race(contract: Contract | None, phase: str, before: str | None, after: str) -> Outcome:
    log.info("next.lost_race", phase=phase, before=before, after=after)
    return Outcome(
        "next",
        contract["task_id"] if contract else None,
        message=f"nothing to do: another run moved the task ({before} -> {after}) while this one waited",
    )
