"""`running()`, a phase's hold on its task: it takes the OS lock, loads the contract, recovers a task
whose last phase died, refuses a halted task or one in the wrong state, and logs one canonical line.
With it: `bind` (which task a command acts on), the halt on a git failure, and the pre-phase checks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from hub.core.atomic import sweep_temps, write_atomic
from hub.core.errors import DirtyWorkTree, GitError, LockBusy, TaskChoice, TaskHalted, WrongState
from hub.core.host_limits import explain
from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.run import Run
from hub.phases.written import finish_code_written
from hub.repo import gitops, killed_git, leftovers
from hub.repo.gitops import MergeConflict
from hub.state import breakers, handoff, store
from hub.state.breakers import Trip
from hub.state.contract import Lease, TaskRefs, elapsed, iso, parse_iso, task_refs
from hub.state.machine import (
    ERIK_CONSULTATION,
    IMPLEMENTATION_IN_PROGRESS,
    IN_PROGRESS_STATES,
    JUDGE_REVIEW_IN_PROGRESS,
    MERGED,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    Event,
)
from hub.state.triggers import Trigger

log = get_logger(__name__)


# The pending state a phase finds after recovering a task left in an *_in_progress state.
RECOVERS_TO: dict[str, str] = {
    IMPLEMENTATION_IN_PROGRESS: PENDING_IMPLEMENTER,
    JUDGE_REVIEW_IN_PROGRESS: PENDING_JUDGE_REVIEW,
}


def bind(ctx: Context, command: str, accepts: AbstractSet[str] | None = None) -> Context:
    """The context bound to the task `command` acts on: the one named, else the only task, else the only
    one in a state `command` accepts. Several fit: TaskChoice (exit 2) lists them."""
    if ctx.task_id:
        if not ctx.handoff.contract.exists():
            known = ", ".join(ctx.handoff_root.task_ids()) or "none"
            raise TaskChoice(f"no task {ctx.task_id} (tasks: {known})")
        return ctx
    ids = ctx.handoff_root.task_ids()
    if len(ids) <= 1:
        return ctx.for_task(ids[0] if ids else None)
    fits = ids
    if accepts is not None:
        states = {t: task_status(ctx.handoff_root.for_task(t)) for t in ids}
        fits = [t for t in ids if states[t] in accepts or RECOVERS_TO.get(states[t] or "") in accepts]
        if len(fits) == 1:
            return ctx.for_task(fits[0])
        if not fits:
            shown = ", ".join(f"{t} ({states[t]})" for t in ids)
            raise WrongState(f"{command} needs a task in {' or '.join(sorted(accepts))}; none is: {shown}")
    listed = ", ".join(fits or ids)
    raise TaskChoice(
        f"{command}: several tasks fit ({listed})", hint="name one with --task ID (MCP: task_id)"
    )


def task_status(hand: handoff.Handoff) -> str | None:
    """A task's state straight from its contract file, without validating it (for choosing a task)."""
    try:
        return str(json.loads(hand.contract.read_text(encoding="utf-8"))["status"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextmanager
def running(ctx: Context, phase: str, accepts: AbstractSet[str]) -> Iterator[Run]:
    """Hold the task for one phase. See the module docstring."""
    ctx = bind(ctx, phase, accepts)
    hand = ctx.handoff
    started = time.perf_counter()
    with handoff.phase_lock(hand, phase, ctx.clock()):
        contract = store.load(hand.contract)
        run = Run(ctx, contract, phase)
        recovered = False
        for pidfile in (hand.sandbox_pid, hand.judge_pid):  # what a killed hub left running
            if pidfile.exists():
                leftovers.reap(pidfile)
        # And the temp files of its writes cut short: the task's, the shared ones (STATUS.md, the GPU
        # slots' records, provenance) and the hub's own in the git directory (config cache, HUB_MERGE).
        for folder in (
            hand.task_dir,
            hand.dir,
            hand.dir / "gpu",
            hand.task_dir / "runs",
            killed_git.common_of(ctx.repo_root),
        ):
            sweep_temps(folder)
        with halt_on_git_failure(run):
            if contract["git"].get("task_branch"):
                # A git killed with a phase leaves locks or a half-done merge: every later run failed.
                # The task's git runs in its worktree; the user's checkout is theirs (a merge of their
                # own there must not stop any task: finalize-task waits for it instead).
                with busy_until_limit(run):
                    killed_git.clear_leftovers(run.worktree)
                killed_git.remove_stale_set_asides(run.worktree.parent, run.now.timestamp())
                if (killed_git.common_of(run.worktree) / "logs" / "refs" / "stash").exists():
                    gitops.adopt_stashes(run.user_repo)  # a task's stash a kill left in the user's list
            if contract["status"] in IN_PROGRESS_STATES:
                recover(run)
                recovered = True
        status = contract["status"]
        if status == ERIK_CONSULTATION and ERIK_CONSULTATION not in accepts:
            raise TaskHalted(
                f"task {run.task_id} is halted ({contract.get('status_reason')})",
                hint=f"read {hand.halt_report} and run `hub resume --to STATE`",
            )
        if status not in accepts:
            raise WrongState(
                f"{phase} needs the task in {' or '.join(sorted(accepts))}; task {run.task_id} is in {status}",
                hint="see `hub status`",
                found=status,
                recovered=recovered,
            )
        run.start_state = status
        with halt_on_git_failure(run):
            yield run
        log.info(
            "phase",
            task=run.task_id,
            phase=phase,
            **{"from": run.start_state},
            to=contract["status"],
            attempt=contract["attempt"],
            seconds=round(time.perf_counter() - started, 3),
            tokens=run.tokens,
        )


@contextmanager
def halt_on_git_failure(run: Run) -> Iterator[None]:
    """A git failure or an OS error in a phase halts the task, naming it, instead of failing the same
    way on every later run (an unborn repository, a deleted or mid-merge task branch, a name too long
    for the file system). A dirty tree and a merge conflict keep their own handling."""
    try:
        yield
    except (DirtyWorkTree, MergeConflict):
        raise
    except (GitError, OSError) as exc:
        # Before setup-task made the branch, a git error is setup's own (a wrong --base, no commit yet):
        # exit 1 with the reason, and the person reruns it; nothing of the task is at stake yet.
        if run.contract["status"] in (ERIK_CONSULTATION, MERGED) or not run.contract["git"].get(
            "task_branch"
        ):
            raise
        if isinstance(exc, GitError):
            trigger, hint, said = Trigger.GIT_ERROR, exc.hint, str(exc)
        else:
            trigger, hint, said = Trigger.OS_ERROR, "", explain(exc)
        outcome = run.halt(Trip(trigger, f"{run.phase}: {said}", {"phase": run.phase}, hint))
        raise TaskHalted(outcome.message) from None


# How long a git lock held by a live git is "try later" (exit 75) before the task halts naming it: far
# longer than any git command the hub runs, short enough that a stuck git is seen the same hour.
GIT_BUSY_HALT_MINUTES = 10.0


@contextmanager
def busy_until_limit(run: Run) -> Iterator[None]:
    """A lock a live git holds is "try later" (GitBusy, exit 75), not a person's problem; only when the
    same wait outlasts GIT_BUSY_HALT_MINUTES does it become a GitError (which halts the task). When the
    wait began is kept in the task's folder."""
    mark = run.ctx.handoff.task_dir / ".git-busy-since"
    try:
        yield
    except killed_git.GitBusy as exc:
        since, seen = _read_since(mark)
        waited = elapsed(since, run.now)
        gap = elapsed(seen, run.now) if seen else timedelta(0)
        # Only a wait seen all along counts (issue 35): a mark in the future (the clock stepped back), or
        # not looked at for longer than the limit (the machine slept, the hub was stopped, a kill left the
        # mark of an old wait), starts the wait anew.
        if waited is None or gap is None or gap.total_seconds() / 60 >= GIT_BUSY_HALT_MINUTES:
            since = iso(run.now)
            waited = timedelta(0)
        write_atomic(mark, f"{since}\n{iso(run.now)}\n")
        minutes = waited.total_seconds() / 60
        if minutes < GIT_BUSY_HALT_MINUTES:
            raise
        mark.unlink(missing_ok=True)
        raise GitError(
            f"{exc.lock} has been held by {exc.holder} (pid {', '.join(map(str, exc.pids))}) for "
            f"{minutes:.0f} minutes",
            hint=exc.hint,
        ) from None
    mark.unlink(missing_ok=True)


def _read_since(mark: Path) -> tuple[str | None, str | None]:
    """When the wait began and when a run last found git busy (the second line: a mark without it, as
    older hubs wrote them, counts as just seen)."""
    try:
        lines = mark.read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return None, None
    return (lines[0] if lines else None), (lines[1] if len(lines) > 1 else None)


def recover(run: Run) -> None:
    """The phase that left the task in an *_in_progress state is dead: record it, keep its work, go on."""
    contract = run.contract
    lease: Lease | dict[str, str] = contract.get("lock") or {}
    holder = str(lease.get("held_by") or "")
    same_host = holder.split(":", 1)[0] == handoff.holder_id().split(":", 1)[0]
    expires = lease.get("expires_at")
    if holder and not same_host and expires and parse_iso(expires) > run.now:
        raise LockBusy(f"task {run.task_id} is held by {holder} on another host until {expires}")
    if _committed_before_kill(run):
        finish_code_written(run, gitops.head_commit(run.repo))
        log.warning(
            "phase.recovered", task=run.task_id, reason="the attempt was killed after its commit: finished"
        )
        return
    stash_name = None
    if contract["status"] == IMPLEMENTATION_IN_PROGRESS and contract["git"].get("task_branch"):
        stash_name = gitops.stash(run.repo, f"{run.task_id}/attempt-{contract['attempt']}-interrupted")
    run.bump("interruptions")
    run.drop_lease()
    reason = f"the phase holding {contract['status']} died ({holder or 'unknown holder'})"
    if stash_name:
        reason += f"; its uncommitted changes are in {stash_name} (`git stash apply {stash_name}`)"
    run.record(Event.INTERRUPTED, reason)
    log.warning("phase.recovered", task=run.task_id, reason=reason)


def _committed_before_kill(run: Run) -> bool:
    """An implementer killed between committing its attempt and recording code_written: its work is on
    the branch and nothing of it is left in the work tree."""
    contract = run.contract
    marker = contract["handoff_data"].get("committing")
    branch = contract["git"].get("task_branch")
    if contract["status"] != IMPLEMENTATION_IN_PROGRESS or not marker or not branch:
        return False
    if marker["attempt"] != contract["attempt"]:
        return False
    if marker.get("parent") and gitops.head_commit(run.repo) == marker["parent"]:
        # No commit was made: a clean tree means an earlier recovery stashed the attempt's work and was
        # killed before recording it. Finishing here would send an empty change to review and merge.
        return False
    scope = contract["constraints"]["allowed_paths"] or None
    forbidden = contract["constraints"]["forbidden_paths"]
    dirty = gitops.dirty_files(run.repo)
    return not [p for p in dirty if scope is None or gitops.in_scope(p, scope, forbidden)]


def pre_phase_trip(run: Run) -> Trip | None:
    return breakers.before_phase(run.contract, run.now)


def require_setup(run: Run) -> TaskRefs:
    """The task's git refs; GitError (which halts the task) when its branch was deleted meanwhile."""
    refs = task_refs(run.contract)
    if not gitops.branch_exists(run.user_repo, refs.task_branch):
        base = refs.base_commit or "the base commit"
        raise GitError(
            f"the task branch {refs.task_branch} does not exist any more (deleted?): recreate it with "
            f"`git branch {refs.task_branch} <its last commit>` (or from {base} to start over), then "
            "`hub resume`"
        )
    return refs
