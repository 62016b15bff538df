"""The implementer's attempt workbench: what an attempt is, whichever mode writes the change. Edit mode
(implement.py) and agent mode (agent.py) are strategies over it, chosen in one place (`implement.mode_for`);
each is handed a `Workbench` and the worker, writes the change through it and returns the passing
acceptance results, or raises `Failed`.

The workbench decides, once for both modes: what must hold before the model is called (a jail, the
model), what a model call's prompt count means and what the call leaves for the stall report
(`generate`), what an applied answer leaves (`wrote`), how the acceptance commands run
(`run_acceptance`), how many times the model may answer their failures and what failing after that
means (`acceptance`), and where the attempt ends: the commit, or a halt or a stall strike (`execute`).
Its parts live beside it: the policy (attempt_policy.py), the commands (attempt_commands.py), the
records (attempt_records.py), the commit (attempt_commit.py), the prompts (attempt_prompt.py).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, Protocol

from hub.core.errors import ContextOverflow, WorkerError
from hub.core.log import get_logger
from hub.phases.acceptance import CommandResult, jail_for
from hub.phases.attempt_commands import acceptance_stall, clean_state, run_acceptance_command
from hub.phases.attempt_commit import commit_attempt
from hub.phases.attempt_policy import policy_for
from hub.phases.attempt_preflight import preflight
from hub.phases.attempt_records import record_edits
from hub.phases.model_calls import generate
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.stall import Failed, Stall, implementer_stall, model_unavailable, worker_failure
from hub.safety.sandbox import SandboxUnavailable
from hub.state.breakers import Trip
from hub.state.triggers import Trigger
from hub.workers import budget

if TYPE_CHECKING:
    from collections.abc import Callable

    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult
    from hub.edits.policy import Policy
    from hub.safety.sandbox import Jail
    from hub.workers.base import ChatRequest, Generation, Worker

# How many times the model is told the acceptance commands' failures and answers them, in either mode.
MAX_REFLECTIONS = 2

# What a mode's reflection came to: commands to run again, an answer that changed nothing (the results
# stand), or no reflection possible (the attempt ends on the failures).
Reflected = Literal["rerun", "unchanged", "stop"]

log = get_logger(__name__)


class Mode(Protocol):
    """An implementer mode: writes the change through the workbench; the passing acceptance results, or
    `Failed`."""

    def __call__(self, bench: Workbench, worker: Worker) -> list[CommandResult]: ...


class Workbench:
    """One implementer attempt, from health check to code_written (or a stall, or a halt), whichever mode
    writes its change."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.contract = run.contract
        self.config = run.ctx.config
        self.model = self.config.role("implementer").model
        self.commands: list[str] = list(self.contract["specification"].get("acceptance_commands") or [])
        self.raw = ""  # the model's last raw output, for the stall report
        self.written: set[str] = set()  # every path an answer of this attempt wrote
        self.started = time.perf_counter()
        # For STALL_REPORT.md: where the attempt's time went.
        self.timings: dict[str, float] = {}
        self.jail: Jail | None = None

    @property
    def applied_any(self) -> bool:
        """Some answer of this attempt wrote a file."""
        return bool(self.written)

    def execute(self, mode: Mode) -> Outcome:
        """The attempt in `mode`, then the commit; every failure ends here."""
        worker = self.run.ctx.worker("implementer")
        try:
            self._preflight(worker)
            return commit_attempt(self.run, self.written, mode(self, worker))
        except WorkerError as exc:
            return self._failed(worker_failure(exc, self.model, self.config.role("implementer").backend))
        except Failed as exc:
            return self._failed(exc.failure)
        finally:
            worker.close()

    def _failed(self, failure: Trip | Stall) -> Outcome:
        """A halt, or a stall strike with the model's last raw output (unless the failure brought its own)
        and where the attempt's time went."""
        if isinstance(failure, Trip):
            return self.run.halt(failure)
        timings = {**self.timings, "attempt": round(time.perf_counter() - self.started, 3)}
        return implementer_stall(
            self.run, replace(failure, raw_tail=failure.raw_tail or self.raw, timings=timings)
        )

    def _preflight(self, worker: Worker) -> None:
        """What must hold before the model is called: a jail for the acceptance commands (under `sandbox:
        required` nothing runs unsandboxed), commands that can run on the base (`attempt_preflight`) and
        a server that has the model; else a halt."""
        if self.commands:
            try:
                self.jail = jail_for(self.config, self.run.worktree)
            except SandboxUnavailable as exc:
                raise Failed(Trip(Trigger.SANDBOX_UNAVAILABLE, str(exc), hint=exc.hint)) from exc
            self.run.task.set_sandbox(self.jail.why)
        trip = preflight(self.run, self.commands, self.jail) or model_unavailable(
            self.run, worker, self.model, "implementer"
        )
        if trip:
            raise Failed(trip)

    # -- the model ----------------------------------------------------------------------------------------

    def generate(
        self, worker: Worker, request: ChatRequest, purpose: str, *, first: bool = False, turns: bool = False
    ) -> Generation:
        """One model call of the attempt, on the phase's clocks; `ContextOverflow` when its prompt count
        gives the cut of a too-small window away. Only a count that filled the window is a sure cut: a
        low one is also the server's prompt cache, except on the `first` call, which has nothing cached.
        The `turns` of a conversation (agent mode) share their start, so a low count there is routine;
        elsewhere it is logged."""
        generation = generate(self.run, worker, "implementer", request, purpose)
        if generation.truncated:
            if generation.prompt_tokens >= request.num_ctx or first:
                raise _cut(generation, request, turns)
            if not turns:
                log.warning(
                    "implement.prompt_count_low",
                    task=self.run.task_id,
                    purpose=purpose,
                    prompt_eval_count=generation.prompt_tokens,
                    hint="a cached prefix or a server window smaller than num_ctx; going on",
                )
        self.raw = generation.raw or generation.text
        self.spent("model calls", generation.seconds)
        self.timings["first token"] = round(generation.first_token_seconds, 3)
        return generation

    def spent(self, what: str, seconds: float) -> None:
        """`seconds` more of the attempt's time went to `what` (STALL_REPORT.md shows where it went)."""
        self.timings[what] = round(self.timings.get(what, 0.0) + seconds, 3)

    # -- the writes ---------------------------------------------------------------------------------------

    def policy(self) -> Policy:
        """What the attempt's answers may write."""
        return policy_for(self.run)

    def wrote(self, parsed: ParseResult, result: ApplyResult) -> None:
        """An answer was applied: its edits, applied or refused, on record; what it wrote is the attempt's."""
        record_edits(self.run, parsed, result)
        self.written.update(result.changed_files)

    # -- the acceptance commands --------------------------------------------------------------------------

    def run_acceptance(self) -> list[CommandResult]:
        """Every acceptance command, each in the worktree as the branch and the answers made it."""
        clean_state(self.run, self.written)
        return [run_acceptance_command(self.run, c, self.jail) for c in self.commands]

    def acceptance(self, reflect: Callable[[list[CommandResult], int], Reflected]) -> list[CommandResult]:
        """The acceptance commands and up to MAX_REFLECTIONS of the mode's answers to their failures
        (`reflect(failed, n)`); the passing results, or `Failed` (a `tests_failed` or `resource_limit`
        stall) while they still fail."""
        results = self.run_acceptance()
        for reflection in range(MAX_REFLECTIONS):
            failed = [r for r in results if not r.ok]
            if not failed:
                return results
            reflected = reflect(failed, reflection)
            if reflected == "stop":
                break
            if reflected == "rerun":
                results = self.run_acceptance()
        if all(r.ok for r in results):
            return results
        raise Failed(acceptance_stall(self.run, results))


def _cut(generation: Generation, request: ChatRequest, turns: bool) -> ContextOverflow:
    """The silent cut a call's prompt count gave away, with the server's own window when the count names it."""
    if turns:
        return ContextOverflow(
            generation.prompt_tokens,
            request.num_ctx,
            source="server",
            detail=f"the server read {generation.prompt_tokens} prompt tokens, its whole window: the start "
            "of the agent's conversation was silently dropped",
            configured_num_ctx=request.num_ctx,
        )
    window = budget.cut_window(generation.prompt_tokens)
    return ContextOverflow(
        generation.prompt_tokens,
        request.num_ctx,
        source="server",
        detail=f"the server read only {generation.prompt_tokens} prompt tokens of a larger "
        "prompt (its window is smaller than num_ctx): the start was silently dropped",
        server_window=window if window is not None and window < request.num_ctx else None,
        configured_num_ctx=request.num_ctx,
    )
