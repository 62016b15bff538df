"""`hub next`: what runs next for each task (`next_step`, `due_jobs`: the one decision `hub next` and the
watcher share), and running it for every task, several at once, for cron and the watcher. Nothing due is
exit 0; otherwise the most severe exit code of the phases that ran. `--until-idle` repeats that while it
moves tasks on, so one process takes a task as far as it can go without a person."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from hub.core.atomic import sweep_temps
from hub.core.errors import (
    EXIT_ERROR,
    EXIT_HALTED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WRONG_STATE,
    ContractInvalid,
    HubError,
    LockBusy,
    TaskChoice,
    TaskHalted,
    WrongState,
    describe,
    exit_code_for,
)
from hub.core.host_limits import explain
from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.phases.status import active_contract, damage_line, due, judge_configured, report_waiting
from hub.phases.table import PROMOTE, SETUP, phase_function
from hub.repo.git_bin import require_git
from hub.repo.killed_git import GitBusy
from hub.state import store
from hub.state.contract import Contract
from hub.state.machine import ERIK_CONSULTATION, MERGED
from hub.workers import gpu_gate

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

log = get_logger(__name__)

# A safety valve for --until-idle, not a limit a backlog should reach: each round moves some task on.
MAX_ROUNDS = 200


def run_next(
    ctx: Context,
    skip: set[str] | None = None,
    go_on: Callable[[], bool] | None = None,
    stuck: set[str] | None = None,
) -> Outcome:
    """Promote proposals into free task slots, then run the due phase of every task (but those in
    `skip`), at most `limits.parallel_tasks` at once; return when they have finished. The exit code is
    the most severe of theirs. With a task named (`--task`), only that task's due phase. With `go_on`
    (`--until-idle`), each of several tasks is taken on while it moves (`run_concurrently`); a task a
    phase left where it was goes in `stuck`."""
    require_git()
    if ctx.config.notify.configured and not skip:
        # Here, not at the top: an idle `hub next` without notifications loads nothing of them.
        from hub.phases.notify import sweep

        sweep(ctx)  # an event a killed run recorded but never sent
    if ctx.task_id:
        if skip and ctx.task_id in skip:
            return Outcome("next", ctx.task_id, message="nothing to do: its phase failed in this run")
        return run_task(ctx)
    # A run killed while writing STATUS.md after its last task was archived leaves its temp file, and
    # with no task left no phase would ever sweep it.
    sweep_temps(ctx.handoff_root.dir)
    promoted: list[Outcome] = []
    while True:
        outcome = phase_function(PROMOTE)(ctx)
        if not outcome.task_id:
            not_promoted = outcome  # nothing ready, or a proposal blocked (with why)
            break
        outcome.data.setdefault("ran", PROMOTE)
        promoted.append(outcome)
    # Promotion was a promoted task's step; its setup-task is the next `hub next`'s.
    jobs, halted = due_jobs(ctx, skip={str(o.task_id) for o in promoted} | (skip or set()))
    ids = ctx.handoff_root.task_ids()
    if not jobs and not promoted:
        if skip:
            return Outcome("next", message="nothing more to do in this run: " + idle_reason(ctx, ids))
        if len(ids) == 1:
            return run_task(ctx.for_task(ids[0]))  # one task: exactly as before (a halt raises, exit 4)
        if halted:
            return Outcome("next", message="; ".join(halted), exit_code=EXIT_HALTED, data={"halted": halted})
        if not ids or not not_promoted.message.startswith("nothing to do"):
            return not_promoted  # no task (say why none was promoted), or a proposal blocked (which, why)
        return Outcome("next", message="nothing to do: " + idle_reason(ctx, ids))
    if len(jobs) == 1 and not promoted and not halted:
        # One phase due: run as ever, its errors raised (a halt is exit 4).
        bound, phase, contract = jobs[0]
        outcome = _run_due(bound, contract, phase)
        outcome.data.setdefault("ran", phase)
        return outcome
    outcomes = promoted + run_concurrently(jobs, ctx.config.parallel_tasks, go_on, stuck)
    if len(outcomes) == 1 and not halted:
        return outcomes[0]
    code = max((o.exit_code for o in outcomes), key=severity, default=EXIT_OK)
    if halted:
        code = max(code, EXIT_HALTED, key=severity)
    lines = [f"{o.task_id}: {o.data.get('ran', o.phase)}: {o.message}" for o in outcomes] + halted
    return Outcome(
        "next",
        message="\n".join(lines),
        exit_code=code,
        data={"ran": [o.as_dict() for o in outcomes], "halted": halted},
    )


def run_until_idle(ctx: Context, go_on: Callable[[], bool] = lambda: True) -> Outcome:
    """`hub next` again while it moves tasks on: with a judge command configured, a task goes from
    set-up to merged in one process, which pays its start-up, its imports and its MCP worker servers
    (`ctx.workers`) once instead of once per phase. Stops when a round runs nothing, or when `go_on()`
    says so (the watcher stopping). A task whose phase failed
    (non-zero exit) is not run again here: its retry is the next trigger's, after the caller's back-off,
    so a failing phase cannot spin; nor is one whose phase went well but left it as it was (a merge
    waiting on the user's checkout). The first round is exactly `hub next` (its errors raise); later
    rounds' errors end the run as their outcome. The exit code is the most severe of all phases run."""
    rounds: list[Outcome] = []
    failed: set[str] = set()
    last: Outcome | None = None
    while len(rounds) < MAX_ROUNDS and (not rounds or go_on()):
        marks = progress_marks(ctx)
        stuck: set[str] = set()
        try:
            last = run_next(ctx, skip=failed, go_on=go_on, stuck=stuck)
        except HubError as exc:
            if not rounds:
                raise
            rounds.append(Outcome("next", ctx.task_id, message=describe(exc), exit_code=exit_code_for(exc)))
            break
        ran = phases_run(last)
        if not ran:
            break
        rounds.append(last)
        failed |= {str(p.get("task_id")) for p in ran if p.get("exit_code")}
        # A phase can go well and still leave its task where it was, having rewritten its files: a merge
        # waiting on the user's local changes saves the wait in the contract and STATUS.md. Running it
        # again at once would only do the same again. With every task that ran left out, the next round
        # runs nothing and the run ends.
        after = progress_marks(ctx)
        still = {str(p.get("task_id")) for p in ran if not p.get("exit_code")}
        failed |= {t for t in still if t in marks and after.get(t) == marks[t]} | stuck
    if not rounds:
        assert last is not None
        return last  # nothing was due: the idle outcome, as `hub next` says it
    if len(rounds) == 1:
        return rounds[0]
    ran = [p for outcome in rounds for p in phases_run(outcome) or [outcome.as_dict()]]
    code = max((o.exit_code for o in rounds), key=severity, default=EXIT_OK)
    lines = [
        f"{p.get('task_id')}: {(p.get('data') or {}).get('ran', p.get('phase'))}: {p['message']}" for p in ran
    ]
    return Outcome("next", message="\n".join(lines), exit_code=code, data={"ran": ran, "rounds": len(rounds)})


def progress_marks(ctx: Context) -> dict[str, tuple[object, ...]]:
    """Per task, what a phase that moves it on changes: its state, its attempt, its branch, its verdict,
    its breaker's counters (a strike is a step towards a halt, so a retry after it is bounded); a task
    whose contract cannot be read has none."""
    marks = {task_id: progress_mark(ctx.for_task(task_id)) for task_id in ctx.handoff_root.task_ids()}
    return {task_id: mark for task_id, mark in marks.items() if mark is not None}


def progress_mark(bound: Context) -> tuple[object, ...] | None:
    """`progress_marks` of the task `bound` is bound to; None when its contract cannot be read."""
    try:
        contract = store.load(bound.handoff.contract)
    except (ContractInvalid, OSError):
        return None
    return (
        contract["status"],
        contract["attempt"],
        contract["git"].get("task_branch"),
        contract["handoff_data"].get("judge_verdict"),
        tuple(sorted((contract.get("breaker") or {}).get("counters", {}).items())),
    )


def phases_run(outcome: Outcome) -> list[dict[str, Any]]:
    """The phases a `run_next` outcome ran, one dict each (`Outcome.as_dict`); none when nothing was due."""
    ran = outcome.data.get("ran")
    if isinstance(ran, list):
        return ran
    return [outcome.as_dict()] if ran else []


def next_step(ctx: Context) -> tuple[Contract | None, str | None, str]:
    """What runs next, for `hub next` and `hub watch` alike: the active contract (None: no task), the
    phase `due` names (None: nothing is due) and why. TaskHalted while the task waits for a person."""
    contract = active_contract(ctx)
    if contract is not None and contract["status"] == MERGED:
        # Here, not at the top: an idle `hub next` imports no phase it does not run.
        from hub.phases.finalize import archive_merged

        try:
            contract = archive_merged(ctx)
        except GitBusy as exc:
            # A live git holds a lock its clean-up needs: the next run tries again.
            return contract, None, f"merged: its clean-up waits for a running git ({describe(exc)})"
        except LockBusy:
            # The finalize that merged it still holds the task (removing its worktree, then archiving):
            # nothing to do here, and no reason to stop the other tasks' phases.
            return contract, None, "merged: the run that merged it is archiving it"
    if contract is not None and contract["status"] == ERIK_CONSULTATION:
        raise TaskHalted(
            f"task {contract['task_id']} is halted",
            hint=f"read {ctx.handoff.halt_report}, then `hub resume`",
        )
    phase, why = due(contract, ctx.clock(), judge_configured(ctx), report_waiting(ctx))
    return contract, phase, why


def due_jobs(
    ctx: Context, skip: set[str] | None = None
) -> tuple[list[tuple[Context, str, Contract]], list[str]]:
    """What runs next across tasks, for `hub next` and `hub watch` alike: every task's due phase as
    (context bound to the task, phase, the contract it was decided on), and a line per halted task."""
    jobs: list[tuple[Context, str, Contract]] = []
    halted: list[str] = []
    for task_id in ctx.handoff_root.task_ids():
        if skip and task_id in skip:
            continue
        bound = ctx.for_task(task_id)
        try:
            contract, phase, _ = next_step(bound)
        except TaskHalted as exc:
            halted.append(describe(exc))
            continue
        except ContractInvalid as exc:
            # Set aside with one line until a person mends it; the other tasks' phases still run.
            halted.append(f"{task_id}: {damage_line(bound, exc)}")
            continue
        except (HubError, OSError) as exc:
            # One task's trouble is that task's: the others' phases still run.
            log.warning("next.task_unreadable", task=task_id, error=str(exc))
            halted.append(f"{task_id}: {describe(exc) if isinstance(exc, HubError) else explain(exc)}")
            continue
        if contract is not None and phase is not None and phase != PROMOTE:
            jobs.append((bound, phase, contract))
    halted += [f"{t}: {damage_line(ctx.for_task(t), None)}" for t in ctx.handoff_root.lost_ids()]
    return jobs, halted


def idle_reason(ctx: Context, ids: list[str]) -> str:
    """Why nothing is due, task by task."""
    if not ids:
        return due(None, ctx.clock(), False)[1]
    reasons = []
    for task_id in ids:
        bound = ctx.for_task(task_id)
        contract = active_contract(bound)
        if contract is not None:
            reasons.append(f"{task_id}: {due(contract, ctx.clock(), judge_configured(bound))[1]}")
    return "; ".join(reasons)


def run_task(ctx: Context) -> Outcome:
    """The due phase of one task (ctx bound to it, or the only task there is). A second `hub next`
    that lost the race for the task (it waited, and the first moved the task on or archived it) has
    nothing to do: exit 0, not a state error."""
    contract, phase, why = next_step(ctx)
    if phase is None:
        task_id = contract["task_id"] if contract else None
        # cron sends stdout nowhere: say on stderr (the log) why the task is not moving, e.g. waiting
        # for a judge nobody configured.
        log.info("next.waiting", task=task_id, state=contract["status"] if contract else None, why=why)
        return Outcome("next", task_id, message=f"nothing to do: {why}")
    outcome = _run_due(ctx, contract, phase)
    outcome.data.setdefault("ran", phase)
    return outcome


def _lost_race(contract: Contract | None, phase: str, before: str | None, after: str) -> Outcome:
    log.info("next.lost_race", phase=phase, before=before, after=after)
    return Outcome(
        "next",
        contract["task_id"] if contract else None,
        message=f"nothing to do: another run moved the task ({before} -> {after}) while this one waited",
    )


def _run_due(ctx: Context, contract: Contract | None, phase: str) -> Outcome:
    """Run `phase`, which `due()` named for `contract`; a refusal because the task moved meanwhile
    (another trigger ran it first) is nothing to do."""
    before = contract["status"] if contract else None
    try:
        return phase_function(phase)(ctx)
    except WrongState as exc:
        if phase == SETUP and contract is not None and not contract["git"].get("task_branch"):
            # Set up meanwhile by another run: setup-task changes no state, only the branch.
            now = active_contract(ctx.for_task(str(contract["task_id"])))
            if now is not None and now["git"].get("task_branch"):
                return _lost_race(contract, phase, before, "set up")
        # Only the phase gate's refusal, and only when the task moved on since we looked.
        if exc.found is None or exc.found == before:
            raise
        if exc.recovered:
            # Our own recovery finished a killed phase's work: run what is due now, once.
            return run_task(ctx)
        return _lost_race(contract, phase, before, exc.found)
    except (ContractInvalid, TaskChoice):
        # The task's folder went (archived by the run that won): nothing left to do here.
        if contract is None or ctx.for_task(str(contract["task_id"])).handoff.contract.exists():
            raise
        return _lost_race(contract, phase, before, "archived")


# Most severe last: an error beats a usage error beats a halt beats a wrong state beats a busy lock.
_SEVERITY = {EXIT_OK: 0, EXIT_LOCKED: 1, EXIT_WRONG_STATE: 2, EXIT_HALTED: 3, EXIT_USAGE: 4, EXIT_ERROR: 5}


def severity(code: int) -> int:
    return _SEVERITY.get(code, 5)


def run_concurrently(
    jobs: list[tuple[Context, str, Contract]],
    parallel: int,
    go_on: Callable[[], bool] | None = None,
    stuck: set[str] | None = None,
) -> list[Outcome]:
    """Each (task, phase) in a thread of its own, at most `parallel` at once; a phase's error becomes its
    outcome (with the error's exit code), so one task failing does not stop the others. An unexpected
    exception (a bug, an OSError outside a phase's own handling) is exit 1 for its task only.

    With `go_on` (`--until-idle`), a task is taken on while it moves once every job has a thread: after
    a phase that went well, what `next_step` names now runs at once in the same thread, until nothing is
    due, a phase fails or leaves the task where it was (the task goes in `stuck`), `go_on()` (or a
    Ctrl-C) says stop, or MAX_ROUNDS phases ran. Rounds made every task wait for the slowest of theirs:
    on one model server, the judge and merge of a task whose review had ended waited for every other
    review, and the server then idled through all of them (issue 25). While a job still waits for a
    thread, a thread's task is not taken on, so the waiting task's turn comes as soon as it did.

    A Ctrl-C (KeyboardInterrupt) reaches the main thread alone, and a phase in a thread cannot be
    interrupted: the phases not started are dropped and the running ones finished (`_interrupted`), and
    a second Ctrl-C stops the process at once."""
    stopping = threading.Event()
    asking = threading.Lock()  # go_on may read stdin (`--stop-on-eof`): one thread at a time
    started: list[str] = []  # list.append is atomic: how many jobs have a thread
    threads = max(1, min(parallel, len(jobs)))

    def going_on() -> bool:
        with asking:
            return go_on is not None and not stopping.is_set() and go_on()

    def one(job: tuple[Context, str, Contract]) -> list[Outcome]:
        bound, phase, contract = job
        started.append(phase)
        outcomes: list[Outcome] = []
        try:
            while True:
                before = progress_mark(bound) if go_on else None
                outcomes.append(_run_caught(bound, contract, phase))
                if go_on is None or outcomes[-1].exit_code or len(outcomes) >= MAX_ROUNDS:
                    return outcomes
                if progress_mark(bound) == before:
                    if stuck is not None:
                        stuck.add(str(bound.task_id))
                    return outcomes
                due_now = _due_now(bound)
                # Asked last, just before the phase would start: a Ctrl-C or EOF meanwhile starts none.
                queued = len(jobs) > threads and len(started) < len(jobs)  # a job waits for a thread
                if due_now is None or queued or not going_on():
                    return outcomes
                contract, phase = due_now
        except Exception:
            # A bug (a phase's own errors are its outcome): out of the pool it would lose the other
            # tasks' outcomes, and the main thread takes whatever comes out of a future for a Ctrl-C.
            log.exception("next.chain_crashed", task=bound.task_id)
            return outcomes

    if threads == 1:
        return [outcome for job in jobs for outcome in one(job)]
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hub-next")
    futures = [pool.submit(one, job) for job in jobs]
    try:
        return [outcome for future in futures for outcome in future.result()]
    except BaseException as exc:
        # A Ctrl-C: nothing else comes out of a future (`one` returns whatever happens in it). CPython
        # 3.11 turns one that lands as the wait begins into RuntimeError (see `_interrupted`).
        _interrupted(pool, futures, stopping)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise KeyboardInterrupt from exc
    finally:
        pool.shutdown(wait=True)


def _due_now(bound: Context) -> tuple[Contract, str] | None:
    """The task's contract and the phase due now, for a thread taking it on; None: stop here (nothing
    due, a halt, the task unreadable: the next round's `due_jobs` says which)."""
    try:
        contract, phase, _ = next_step(bound)
    except (HubError, OSError):
        return None
    if contract is None or phase is None or phase == PROMOTE:
        return None
    return contract, phase


def _run_caught(bound: Context, contract: Contract | None, phase: str) -> Outcome:
    """`_run_due`, its error as its outcome (see `run_concurrently`)."""
    try:
        outcome = _run_due(bound, contract, phase)
    except HubError as exc:
        log.warning("next.phase_failed", task=bound.task_id, phase=phase, error=str(exc))
        outcome = Outcome(phase, bound.task_id, message=describe(exc), exit_code=exit_code_for(exc))
    except Exception as exc:
        # Not a hub error, so a bug: raised out of the pool it would lose the other tasks' outcomes
        # (phases that ran and moved their tasks) behind a traceback. The traceback goes to the log.
        log.exception("next.phase_crashed", task=bound.task_id, phase=phase)
        outcome = Outcome(phase, bound.task_id, message=f"{type(exc).__name__}: {exc}", exit_code=EXIT_ERROR)
    outcome.data.setdefault("ran", phase)
    outcome.task_id = outcome.task_id or bound.task_id
    return outcome


def _interrupted(
    pool: ThreadPoolExecutor, futures: list[Future[list[Outcome]]], stopping: threading.Event
) -> None:
    """After a Ctrl-C: start no phase more (`stopping`), wait for the phases running in threads, or on
    a second Ctrl-C stop the process now, as a SIGKILL would. Every phase is built to be killed anywhere
    (a later run recovers its task: the interrupted attempt recorded, its work kept, a judge command or
    sandbox it left ended), and a person pressing Ctrl-C twice should not wait minutes for model calls."""
    try:  # from the first line: a second Ctrl-C may come at any moment from here on
        stopping.set()
        gpu_gate.stop_new_calls()  # a phase running but still queued for a model's slot ends too
        pool.shutdown(wait=False, cancel_futures=True)
        log.warning(
            "next.interrupted",
            running=sum(not future.done() for future in futures),
            note="waiting for the running phases to finish; Ctrl-C again stops now (the next run recovers them)",
        )
        wait(futures)
        gpu_gate.stop_new_calls(False)
    except BaseException:
        # Not only KeyboardInterrupt: CPython 3.11 turns one that lands as a lock's wait begins into
        # "RuntimeError: release unlocked lock" (threading.Condition.wait), and anything escaping here
        # would reach the pool's shutdown(wait=True) and wait minutes for the model calls.
        log.warning("next.stopped_now", running=sum(not future.done() for future in futures))
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
