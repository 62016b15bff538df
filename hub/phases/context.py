"""What every phase shares: the context it is given, and `running()`, its hold on the task.

`running()` takes the OS lock, loads the contract, recovers a task whose last phase died, refuses a
halted task or one in the wrong state, runs the pre-phase breakers, and logs one canonical line.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hub.core.config import Config
from hub.core.errors import (
    EXIT_HALTED,
    DirtyWorkTree,
    GitError,
    HubError,
    LockBusy,
    PhaseTimeout,
    TaskChoice,
    TaskHalted,
    WrongState,
)
from hub.core.log import get_logger
from hub.state import handoff, store
from hub.state.breakers import Trip
from hub.state.contract import Contract, Lease, TaskRefs, iso, now_utc, parse_iso, task_refs
from hub.state.machine import (
    ERIK_CONSULTATION,
    HALT_EVENT,
    IMPLEMENTATION_IN_PROGRESS,
    IN_PROGRESS_STATES,
    JUDGE_REVIEW_IN_PROGRESS,
    MERGED,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    PENDING_LOCAL_REVIEW,
    RESUMABLE_STATES,
    REVIEW_COMPLETE,
    Event,
)

if TYPE_CHECKING:
    from git import Repo

    from hub.workers.base import ChatRequest, Generation, Worker
    from hub.workers.pool import WorkerPool

log = get_logger("hub.phase")
T = TypeVar("T")


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


class Run:
    """One phase's hold on the task: the contract, and the ways to move it."""

    def __init__(self, ctx: Context, contract: Contract, phase: str) -> None:
        self.ctx = ctx
        self.contract = contract
        self.phase = phase
        self.start_state: str = contract["status"]
        self.tokens = 0
        self._repo: Repo | None = None
        self._user_repo: Repo | None = None
        # The phase's own clock (limits.timeout_minutes.<phase>) on ctx.monotonic; None: not started.
        self.deadline: float | None = None
        self.clock_minutes = 0.0

    @property
    def task_id(self) -> str:
        return str(self.contract["task_id"])

    @property
    def now(self) -> datetime:
        return self.ctx.clock()

    @property
    def user_repo(self) -> Repo:
        """The user's own checkout: the trust root (hub.yaml, prompts, rules). Never switched, stashed or
        committed to; only a merge lands in it, through git's own merge."""
        if self._user_repo is None:
            from hub.repo import gitops

            self._user_repo = gitops.open_repo(self.ctx.repo_root)
        return self._user_repo

    @property
    def worktree(self) -> Path:
        """The task's own git worktree, where every edit, acceptance command, scan and checkpoint happens."""
        recorded = self.contract["git"].get("worktree")
        return Path(recorded) if recorded else worktree_path(self.ctx, self.user_repo, self.task_id)

    @property
    def repo(self) -> Repo:
        """The task's worktree (recreated from its branch if someone deleted it); before setup-task, the
        user's checkout, read only."""
        if self._repo is None:
            from hub.repo import gitops

            branch = self.contract["git"].get("task_branch")
            if not branch:
                return self.user_repo
            path = self.worktree
            if gitops.ensure_worktree(self.user_repo, path, branch):
                log.warning("worktree.recreated", task=self.task_id, path=str(path), branch=branch)
            self._repo = gitops.open_repo(path)
        return self._repo

    def close_repo(self) -> None:
        """Let go of the worktree's repository (before the worktree is removed)."""
        if self._repo is not None and self._repo is not self._user_repo:
            self._repo.close()
        self._repo = None

    def record(self, event: Event, reason: str | None = None, resume_to: str | None = None) -> str:
        handoff.record(self.ctx.handoff, self.contract, event, self.now, reason, resume_to)
        from hub.phases.status import write_status

        write_status(self.ctx)
        return str(self.contract["status"])

    def save(self) -> None:
        store.save(self.ctx.handoff.contract, self.contract, self.now)

    def counters(self) -> dict[str, int]:
        return self.contract.setdefault("breaker", {}).setdefault("counters", {})

    def move_attempt(self, by: int = 1) -> int:
        """The one place the attempt counter changes: +1 for a new attempt (rework, retry, a resume to
        the implementer), -1 when a rebuttal takes back the rework its FAIL started. Never below 1."""
        self.contract["attempt"] = max(1, self.contract["attempt"] + by)
        return self.contract["attempt"]

    def bump(self, name: str, by: int = 1) -> int:
        counters = self.counters()
        counters[name] = counters.get(name, 0) + by
        return counters[name]

    def start_clock(self, minutes: float) -> None:
        """Start the phase's clock. Each model call and command is bounded by its own clock too, but a
        phase makes several of them: checked before each, the phase as a whole ends within its own."""
        self.clock_minutes = minutes
        self.deadline = self.ctx.monotonic() + minutes * 60

    def remaining(self, what: str) -> float | None:
        """Seconds left on the phase's clock (None: no clock); PhaseTimeout when none are, so that
        `what` (a model call, a command) never starts."""
        if self.deadline is None:
            return None
        left = self.deadline - self.ctx.monotonic()
        if left <= 0:
            raise PhaseTimeout(self.phase, what, self.clock_minutes)
        return left

    def take_lease(self, minutes: float) -> None:
        now = self.now
        self.contract["lock"] = {
            "held_by": handoff.holder_id(),
            "acquired_at": iso(now),
            "expires_at": iso(now + timedelta(minutes=minutes)),
        }

    def drop_lease(self) -> None:
        self.contract["lock"] = None

    def checkpoint(self, event: str) -> str | None:
        """Commit the work on the task branch, scoped to the allowed paths when the contract sets them."""
        branch = self.contract["git"].get("task_branch")
        if not branch:
            return None
        from hub.repo import gitops
        from hub.safety.trust import control_paths

        return gitops.checkpoint(
            self.repo,
            self.commit_message(event),
            self.contract["constraints"]["allowed_paths"] or None,
            exclude=list(control_paths(self.ctx.config)),
        )

    def commit_message(self, event: str) -> Callable[[list[str]], str]:
        """A checkpoint's message: the task id (finalize and `git log --grep` find it by that), the
        task's title, who changed which files, and the transition in the body."""

        def message(files: list[str]) -> str:
            shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
            attempt = self.contract["attempt"]
            what = {
                "code_written": f"implementer attempt {attempt} changes {shown}",
                "manual_edit": f"a person's edits to {shown} (kept before attempt {attempt})",
            }.get(event, f"{event}: {shown}")
            title = str(self.contract.get("title") or "").strip()
            head = f"[TASK: {self.task_id}] {title}: {what}" if title else f"[TASK: {self.task_id}] {what}"
            return f"{head}\n\nState {self.contract['status']} after {event}; {len(files)} files."

        return message

    def add_cost(
        self, role: str, tokens_in: int = 0, tokens_out: int = 0, seconds: float = 0.0, usd: float = 0.0
    ) -> None:
        cost = self.contract.setdefault("cost", {}).setdefault(
            role, {"tokens_in": 0, "tokens_out": 0, "seconds": 0.0, "usd": 0.0, "calls": 0}
        )
        cost["tokens_in"] = cost.get("tokens_in", 0) + int(tokens_in)
        cost["tokens_out"] = cost.get("tokens_out", 0) + int(tokens_out)
        cost["seconds"] = round(cost.get("seconds", 0.0) + seconds, 3)
        cost["usd"] = round(cost.get("usd", 0.0) + usd, 6)
        cost["calls"] = cost.get("calls", 0) + 1
        self.tokens += int(tokens_in) + int(tokens_out)

    def generate(self, worker: Worker, role: str, request: ChatRequest, purpose: str = "") -> Generation:
        """One model call for `role`, an outage waited out (`wait_for_server`). Whatever happens, its
        tokens and seconds go into the contract's cost and the call into runs/<task_id>/ as a
        provenance record; a call the server counted and read whole calibrates the model's estimate."""
        from hub.state.provenance import write_record
        from hub.workers.bridge import observe_call

        left = self.remaining(f"the {role} model call ({purpose or 'call'})")
        if left is not None and left < request.total_timeout:
            request = replace(request, total_timeout=left)
        generation: Generation | None = None
        outcome = "ok"
        partial = ""
        started = time.monotonic()
        try:
            # Each try holds a model-server slot only while it calls: an outage is waited out without one.
            generation = self.wait_for_server(lambda: self._generate_in_slot(worker, role, request))
            generation = observe_call(self.ctx.config, request, generation)
            return generation
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
            partial = str(getattr(exc, "partial_text", "") or "")
            raise
        finally:
            g = generation
            self.add_cost(
                role, g.prompt_tokens if g else 0, g.completion_tokens if g else 0, g.seconds if g else 0.0
            )
            write_record(
                self.ctx.handoff,
                self.task_id,
                "model-call",
                {
                    "role": role,
                    "purpose": purpose,
                    "attempt": self.contract["attempt"],
                    "model": request.model,
                    "num_ctx": request.num_ctx,
                    "num_predict": request.num_predict,
                    "system": request.system or "",
                    "prompt": request.prompt,
                    "response": g.raw if g else partial,
                    "thinking": g.thinking if g else "",
                    "prompt_tokens": g.prompt_tokens if g else 0,
                    "completion_tokens": g.completion_tokens if g else 0,
                    "tokens_estimated": g.tokens_estimated if g else False,
                    "seconds": g.seconds if g else 0.0,
                    "first_token_seconds": g.first_token_seconds if g else 0.0,
                    "load_seconds": g.load_seconds if g else 0.0,
                    "call_seconds": round(time.monotonic() - started, 3),
                    "done_reason": g.done_reason if g else "",
                    "truncated": g.truncated if g else False,
                    "outcome": outcome,
                },
                self.now,
            )

    def wait_for_server(self, call: Callable[[], T]) -> T:
        """`call()`, an unreachable, restarting or failing model server waited out with back-off for up
        to limits.server_wait_minutes; the wait is in the contract (`hub status`) while it lasts."""
        from hub.workers.outage import Wait, wait_out

        def on_wait(wait: Wait | None) -> None:
            data = self.contract["handoff_data"]
            if wait is None:
                data.pop("server_wait", None)
                log.info("server_back", task=self.task_id, phase=self.phase)
            else:
                data["server_wait"] = {
                    "since": iso(self.now - timedelta(seconds=wait.waited)),
                    "waited_seconds": round(wait.waited, 1),
                    "limit_minutes": round(wait.limit / 60, 1),
                    "attempts": wait.attempts,
                    "next_try_seconds": round(wait.next_pause, 1),
                    "error": wait.error[:500],
                }
                log.warning("server_wait", task=self.task_id, phase=self.phase, **data["server_wait"])
            self.save()

        return wait_out(
            call,
            limit_seconds=self.ctx.config.server_wait_minutes * 60,
            on_wait=on_wait,
            sleep=self.ctx.sleep,
            clock=self.ctx.monotonic,
        )

    def _generate_in_slot(self, worker: Worker, role: str, request: ChatRequest) -> Generation:
        """The call itself, holding a slot of a model server (hub/workers/gpu.py): never more calls at once per
        server than its slots; the wait is bounded by the role's total clock."""
        from hub.workers import gpu

        config = self.ctx.config
        servers = config.model_servers()
        gate = gpu.gate_for(config.handoff_dir, [gpu.Host(url, slots) for url, slots in servers])
        deadline = time.monotonic() + min(config.role(role).timeouts.total, request.total_timeout)
        with gate.slot(request.model, request.num_ctx, deadline) as host:
            if len(servers) == 1 or host.url == config.ollama_host:
                return worker.generate(request)
            other = self.ctx.worker(role, host.url)
            try:
                return other.generate(request)
            finally:
                other.close()

    def halt(self, trip: Trip, event: Event = HALT_EVENT) -> Outcome:
        """Move the task to erik_consultation, write ERIK_HALT.md, and say so (exit 4)."""
        self.contract["handoff_data"].pop("server_wait", None)
        before = self.contract["status"]
        self.drop_lease()
        self.contract["breaker"] = {
            **self.contract.get("breaker", {}),
            "status": "tripped",
            "trigger": trip.trigger,
            "reason": trip.reason,
        }
        self.contract["handoff_data"]["halt"] = {
            "trigger": trip.trigger,
            "reason": trip.reason,
            "from_state": before,
        }
        self.record(event, f"{trip.trigger}: {trip.reason}")
        path = self.ctx.handoff.halt_report
        handoff.write_report(path, render_halt(self.ctx, self.contract, trip, before))
        return Outcome(
            self.phase,
            self.task_id,
            self.start_state,
            ERIK_CONSULTATION,
            f"halted ({trip.trigger}): {trip.reason}; see {path}",
            exit_code=EXIT_HALTED,
            data={"trigger": trip.trigger, "halt_file": str(path)},
        )


def worktree_path(ctx: Context, user_repo: Repo, task_id: str) -> Path:
    from hub.repo import gitops

    return (ctx.config.worktrees_dir or gitops.default_worktrees_dir(user_repo)) / task_id


# Triggers whose cause lies in the model's work: resumed to the implementer, the model would repeat it
# unless a person says what changed, and the note is the only way into its next prompt.
NOTE_NEEDED = frozenset(
    {
        "stall",
        "critical_flaw",
        "critical_halt",
        "review_cycles",
        "rebuttal_limit",
        "destructive_diff",
        "hash_loop",
        "too_many_files",
    }
)
# What the halt file puts after --note: the hub refuses a note that still holds it (`check_note`).
NOTE_PLACEHOLDER = "<<REPLACE: what you changed or want done differently, for the implementer>>"


# Every state `resume_targets` may offer (which of them lead somewhere depends on the task).
RESUME_TARGETS = (PENDING_IMPLEMENTER, PENDING_LOCAL_REVIEW, PENDING_JUDGE_REVIEW, REVIEW_COMPLETE)


def resume_targets(contract: Contract) -> dict[str, str]:
    """The states a halted task can be resumed to that lead somewhere, each with what happens next.

    Only these: `timeout_*` would time out again, `pending_rebuttal` waits on a rebuttal that was
    never written, and review or merge need work on the branch (and a PASS, to merge)."""
    data = contract["handoff_data"]
    wrote = any(entry.get("event") == "code_written" for entry in contract.get("history", []))
    has_work = bool(contract["git"].get("task_branch") and (wrote or data.get("changed_files")))
    targets: dict[str, str] = {PENDING_IMPLEMENTER: "the implementer writes the change again (a new attempt)"}
    if has_work:
        targets[PENDING_LOCAL_REVIEW] = "the local review checks the work on the task branch again"
        targets[PENDING_JUDGE_REVIEW] = (
            "the work on the task branch goes to the judge (a fresh review request)"
        )
    if has_work and data.get("judge_verdict") == "PASS":
        targets[REVIEW_COMPLETE] = "the PASS verdict stands: the task branch is merged (finalize-task)"
    return targets


def suggested_resume_state(
    state_before: str, targets: Mapping[str, str] | None = None, trigger: str = ""
) -> str:
    """Where a person most likely wants the task to go: back to the implementer when its work caused
    the halt (a second review of the same work would halt again), else back to where it halted, if
    that leads on."""
    wanted: str
    if trigger in NOTE_NEEDED or state_before in (IMPLEMENTATION_IN_PROGRESS, "timeout_implementer"):
        wanted = PENDING_IMPLEMENTER
    elif state_before in (JUDGE_REVIEW_IN_PROGRESS, "timeout_judge", "pending_rebuttal"):
        wanted = PENDING_JUDGE_REVIEW
    else:
        wanted = state_before if state_before in RESUMABLE_STATES else PENDING_IMPLEMENTER
    if targets is not None and wanted not in targets:
        return PENDING_IMPLEMENTER
    return wanted


def note_needed(trigger: str, state: str) -> bool:
    return state == PENDING_IMPLEMENTER and trigger in NOTE_NEEDED


def check_note(note: str | None) -> None:
    """Refuse a note that still holds the halt file's placeholder (it would reach the model's prompt)."""
    if note and "<<REPLACE" in note:
        raise HubError(
            "the --note still holds the halt file's placeholder <<REPLACE: ...>>: write what you changed "
            "(the implementer reads it in its next prompt), or leave --note out"
        )


def resume_command(ctx: Context, state: str, with_note: bool = False, task_id: str | None = None) -> str:
    """A shell line that resumes the task as written (with the note placeholder, when one is needed)."""
    parts = ["hub"]
    default_handoff = ctx.repo_root / "_handoff"
    if ctx.config.handoff_dir.resolve() != default_handoff.resolve():
        parts += ["--handoff", str(ctx.config.handoff_dir)]
    parts += ["resume", "--to", state]
    if with_note:
        parts += ["--note", NOTE_PLACEHOLDER]
    if task_id:
        parts += ["--task", task_id]  # several tasks may be in flight
    return f"cd {shlex.quote(str(ctx.repo_root))} && " + " ".join(shlex.quote(p) for p in parts)


def render_halt(ctx: Context, contract: Contract, trip: Trip, before: str) -> str:
    targets = resume_targets(contract)
    state = suggested_resume_state(before, targets, trip.trigger)
    evidence = "\n".join(f"- {key}: {value}" for key, value in trip.evidence.items()) or "- (none recorded)"
    with_note = note_needed(trip.trigger, state)
    how = (
        "Deal with the cause, then replace the `<<REPLACE: ...>>` text with what you changed and run "
        "(the implementer reads the note in its next prompt; the hub refuses the placeholder):"
        if with_note
        else "Deal with the cause, then run:"
    )
    others = "\n".join(
        f"- `{name}`: {why}\n\n      {resume_command(ctx, name, note_needed(trip.trigger, name), contract['task_id'])}\n"
        for name, why in targets.items()
        if name != state
    )
    other_text = f"\nOr resume to another state that leads somewhere from here:\n\n{others}" if others else ""
    return f"""# Task halted: a person is needed

- Task: `{contract["task_id"]}` ({contract.get("title", "")})
- Trigger: `{trip.trigger}`
- Reason: {trip.reason}
- State before the halt: `{before}`
- Attempt: {contract["attempt"]}
- Halted at: {contract["timestamps"]["updated_at"]}
- Task branch: `{contract["git"].get("task_branch")}` (base `{contract["git"].get("base_branch")}`)

## Evidence

{evidence}

## To resume

{how}

    {resume_command(ctx, state, with_note, contract["task_id"])}

Then: {targets[state]}.
{other_text}
See `hub status` and `hub log` for the history, and `{ctx.handoff.runs(contract["task_id"])}/` for every model call.
"""


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
    raise TaskChoice(f"{command}: several tasks fit ({listed}); name one with --task ID (MCP: task_id)")


def task_status(hand: handoff.Handoff) -> str | None:
    """A task's state straight from its contract file, without validating it (for choosing a task)."""
    import json

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
                from hub.repo import leftovers

                leftovers.reap(pidfile)
        with halt_on_git_failure(run):
            if contract["git"].get("task_branch"):
                from hub.repo import killed_git

                # A git killed with a phase leaves locks or a half-done merge: every later run failed.
                # The task's git runs in its worktree; the user's checkout is theirs (a merge of their
                # own there must not stop any task: finalize-task waits for it instead).
                killed_git.clear_leftovers(run.worktree)
            if contract["status"] in IN_PROGRESS_STATES:
                recover(run)
                recovered = True
        status = contract["status"]
        if status == ERIK_CONSULTATION and ERIK_CONSULTATION not in accepts:
            raise TaskHalted(
                f"task {run.task_id} is halted ({contract.get('status_reason')}); read {hand.halt_report} "
                "and run `hub resume --to STATE`"
            )
        if status not in accepts:
            raise WrongState(
                f"{phase} needs the task in {' or '.join(sorted(accepts))}; task {run.task_id} is in {status}"
                " (see `hub status`)",
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
    from hub.repo.gitops import MergeConflict

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
        trigger = "git_error" if isinstance(exc, GitError) else "os_error"
        outcome = run.halt(Trip(trigger, f"{run.phase}: {exc}", {"phase": run.phase}))
        raise TaskHalted(outcome.message) from None


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
        from hub.phases.implement import finish_code_written
        from hub.repo import gitops

        finish_code_written(run, gitops.head_commit(run.repo))
        log.warning("recovered", task=run.task_id, reason="the attempt was killed after its commit: finished")
        return
    stash_name = None
    if contract["status"] == IMPLEMENTATION_IN_PROGRESS and contract["git"].get("task_branch"):
        from hub.repo import gitops

        stash_name = gitops.stash(run.repo, f"{run.task_id}/attempt-{contract['attempt']}-interrupted")
    run.bump("interruptions")
    run.drop_lease()
    reason = f"the phase holding {contract['status']} died ({holder or 'unknown holder'})"
    if stash_name:
        reason += f"; its uncommitted changes are in {stash_name} (`git stash apply {stash_name}`)"
    run.record(Event.INTERRUPTED, reason)
    log.warning("recovered", task=run.task_id, reason=reason)


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
    from hub.repo import gitops

    scope = contract["constraints"]["allowed_paths"] or None
    dirty = gitops.dirty_files(run.repo)
    return not [p for p in dirty if scope is None or gitops.in_scope(p, scope)]


def pre_phase_trip(run: Run) -> Trip | None:
    from hub.state import breakers

    return breakers.before_phase(run.contract, run.now)


def require_setup(run: Run) -> TaskRefs:
    """The task's git refs; GitError (which halts the task) when its branch was deleted meanwhile."""
    refs = task_refs(run.contract)
    from hub.repo import gitops

    if not gitops.branch_exists(run.user_repo, refs.task_branch):
        base = refs.base_commit or "the base commit"
        raise GitError(
            f"the task branch {refs.task_branch} does not exist any more (deleted?): recreate it with "
            f"`git branch {refs.task_branch} <its last commit>` (or from {base} to start over), then "
            "`hub resume`"
        )
    return refs
