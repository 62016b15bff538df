"""`Run`: one phase's hold on its task (the contract, and the ways to move it: record a transition, save,
checkpoint the work, count, keep the phase's clock, halt)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.errors import EXIT_HALTED, ContractInvalid, PhaseTimeout, with_hint
from hub.core.log import get_logger
from hub.core.text import listed
from hub.phases.context import Context
from hub.phases.halts import render_halt
from hub.phases.notify import on_transition
from hub.phases.outcome import Outcome
from hub.phases.status_md import write_status
from hub.repo import gitops, untrusted
from hub.safety.trust import control_paths
from hub.state import handoff, store
from hub.state.breakers import Trip
from hub.state.contract import Contract
from hub.state.machine import ERIK_CONSULTATION, HALT_EVENT, Event
from hub.state.task import Task

if TYPE_CHECKING:
    from git import Repo

log = get_logger(__name__)


class Run:
    """One phase's hold on the task: the contract, and the ways to move it."""

    def __init__(self, ctx: Context, contract: Contract, phase: str) -> None:
        self.ctx = ctx
        self.contract = contract
        # The only writer of the contract: every change below goes through it.
        self.task = Task(contract)
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
            self._user_repo = gitops.open_repo(self.ctx.repo_root)
        return self._user_repo

    @property
    def worktree(self) -> Path:
        """The task's own git worktree, where every edit, acceptance command, scan and checkpoint happens."""
        recorded = self.contract["git"].get("worktree")
        if not recorded:
            return worktree_path(self.ctx, self.user_repo, self.task_id)
        # A hand-edited contract must not point the hub at a folder of the user's: a worktree it finds
        # broken there is renamed aside, and its ignored files are removed before each command.
        folder = worktree_path(self.ctx, self.user_repo, self.task_id).parent.resolve()
        path = Path(recorded)
        resolved = path.resolve()
        if not path.is_absolute() or resolved == folder or not resolved.is_relative_to(folder):
            raise ContractInvalid(
                str(self.ctx.handoff.contract),
                "$.git.worktree",
                f"{recorded!r} does not lie under the worktrees folder {folder}; a task's worktree is "
                "always there (setup-task puts it there)",
            )
        return path

    @property
    def repo(self) -> Repo:
        """The task's worktree (recreated from its branch if someone deleted it); before setup-task, the
        user's checkout, read only."""
        if self._repo is None:
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
        write_status(self.ctx)
        # The one place a phase records a transition, so the one place its notification starts (issue 37).
        on_transition(self.ctx, self.contract)
        return str(self.contract["status"])

    def save(self) -> None:
        store.save(self.ctx.handoff.contract, self.contract, self.now)

    def rewind(self, reason: str) -> str:
        """Record `Task.rewind_status`: a status the history does not back goes back to one it does."""
        line = self.task.rewind_status(self.now, reason)
        handoff.save_transition(self.ctx.handoff, self.contract, line, self.now)
        return self.task.status

    def move_attempt(self, by: int = 1) -> int:
        return self.task.move_attempt(by)

    def bump(self, name: str, by: int = 1) -> int:
        return self.task.bump(name, by)

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
        self.task.take_lease(handoff.holder_id(), self.now, minutes)

    def drop_lease(self) -> None:
        self.task.drop_lease()

    def checkpoint(self, event: str) -> str | None:
        """Commit the work on the task branch: what the task may write (the allowed paths when the contract
        sets them, never the forbidden ones or the control files), as the edit layer decides it. A link the
        task does not name is never committed: `untrusted.LinkRefused` after taking it out."""
        branch = self.contract["git"].get("task_branch")
        if not branch:
            return None
        untrusted.refuse_links(self.repo, self.contract["constraints"].get("links_allowed", []))
        return gitops.checkpoint(
            self.repo,
            self.commit_message(event),
            self.contract["constraints"]["allowed_paths"] or None,
            exclude=list(control_paths(self.ctx.config)),
            forbidden=self.contract["constraints"]["forbidden_paths"],
            # A person's own edits are theirs to keep; the model's never touch the acceptance tests unnamed.
            commands=self.contract["specification"].get("acceptance_commands") or ()
            if event != "manual_edit"
            else (),
        )

    def commit_message(self, event: str) -> Callable[[list[str]], str]:
        """A checkpoint's message: the task id (finalize and `git log --grep` find it by that), the
        task's title, who changed which files, and the transition in the body."""

        def message(files: list[str]) -> str:
            shown = listed(files, 4)
            attempt = self.contract["attempt"]
            what = {
                Event.CODE_WRITTEN: f"implementer attempt {attempt} changes {shown}",
                "manual_edit": f"a person's edits to {shown} (kept before attempt {attempt})",
            }.get(event, f"{event}: {shown}")
            title = str(self.contract.get("title") or "").strip()
            head = f"[TASK: {self.task_id}] {title}: {what}" if title else f"[TASK: {self.task_id}] {what}"
            return f"{head}\n\nState {self.contract['status']} after {event}; {len(files)} files."

        return message

    def add_cost(
        self, role: str, tokens_in: int = 0, tokens_out: int = 0, seconds: float = 0.0, usd: float = 0.0
    ) -> None:
        self.task.add_cost(role, tokens_in, tokens_out, seconds, usd)
        self.tokens += int(tokens_in) + int(tokens_out)

    def halt(self, trip: Trip, event: Event = HALT_EVENT) -> Outcome:
        """Move the task to erik_consultation, write ERIK_HALT.md, and say so (exit 4)."""
        before = self.task.status
        reason = with_hint(trip.reason, trip.hint)
        self.task.set_halt(trip.trigger, reason)
        self.record(event, f"{trip.trigger}: {reason}")
        path = self.ctx.handoff.halt_report
        handoff.write_report(path, render_halt(self.ctx, self.contract, trip, before))
        return Outcome(
            self.phase,
            self.task_id,
            self.start_state,
            ERIK_CONSULTATION,
            f"halted ({trip.trigger}): {reason}; see {path}",
            exit_code=EXIT_HALTED,
            data={"trigger": trip.trigger, "halt_file": str(path)},
        )


def worktree_path(ctx: Context, user_repo: Repo, task_id: str) -> Path:
    return (ctx.config.worktrees_dir or gitops.default_worktrees_dir(user_repo)) / task_id
