"""The two-strike stall rule, shared by the implementer and the local review, and STALL_REPORT.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hub.core import backends
from hub.core.errors import (
    ContextOverflow,
    ModelNotFound,
    PhaseTimeout,
    ReplyTooLarge,
    RunawayOutput,
    ServerBroken,
    WorkerError,
    WorkerTimeout,
    WorkerUnavailable,
    describe,
)
from hub.phases.live import CALL_FILE, live_call
from hub.phases.model_calls import never_answered, wait_for_server
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.repo import gitops
from hub.state import handoff
from hub.state.breakers import Trip
from hub.state.contract import StallRecord, iso
from hub.state.machine import IMPLEMENTATION_IN_PROGRESS, Event
from hub.state.triggers import Trigger

if TYPE_CHECKING:
    from pathlib import Path

    from hub.workers.base import Generation, Health, Worker

STRIKES_TO_HALT = 2
TAIL_CHARS = 1200

ADVICE = {
    "empty_output": "The model answered with nothing. If it thought instead (a thinking model: see the detail), "
    "raise roles.<role>.num_predict so the answer has room after the thinking, or pick a model without "
    "thinking. Otherwise check that it is loaded (`ollama ps`), try a larger or instruction-tuned model, or "
    "lower temperature.",
    "malformed_output": "No edit could be parsed. Small models follow the whole-file format best: make sure the "
    "prompt's target file is named, or switch roles.implementer.model to a stronger coder model.",
    "timeout": "A clock ran out. first_token: the prompt is large or the model is loading (raise "
    "timeouts.first_token or trim source files); stall: the model stopped mid-stream (check GPU memory, "
    "`ollama ps`); total: raise timeouts.total or split the task.",
    "truncated_context": "The prompt does not fit the model's context window. Raise models.<model>.num_ctx in "
    "hub.yaml (the GPU must hold it), or list fewer source files in the contract.",
    "output_truncated": "The model's answer was cut off at its token limit twice, so none of it was applied. "
    "Raise roles.implementer.num_predict (or the server's output limit) in hub.yaml, split the task, or use a "
    "model that answers with SEARCH/REPLACE blocks instead of whole files.",
    "partial_change": "Part of the change was written but some edits were refused twice (listed above), so "
    "the change is incomplete and was not sent to review (the written part is kept in a stash). Read the "
    "reasons; consider a smaller task or a stronger model.",
    "files_not_found": "The task names no file, and the model's answer to the repository map named none the "
    "hub could take (the reasons are above; the map and the answer are the find-files records in "
    "_handoff/tasks/<task>/runs/). Name the file to change (`hub new --target FILE`), or use a stronger model.",
    "wrong_files": "The task names no file, and the model's answer went for other files than those it chose "
    "from the repository map (named above): the retry asks it again for the files. Name the file to change "
    "(`hub new --target FILE`), or use a stronger model.",
    "tests_failed": "The acceptance commands still fail after the model's reflections. Read the command output "
    "above; the requirement may be ambiguous, or the task too big for this model.",
    "server_error": "The model server answered, but broken, several times in a row: its message is above (an "
    "error mid-generation, a stream that ended without its final message, a failure loading the model). Out of "
    "memory: lower models.<model>.num_ctx in hub.yaml or use a smaller model; otherwise read the server's log.",
    "resource_limit": "An acceptance command was ended at a sandbox limit (processes, memory or bytes "
    "written; named above) and what it wrote was removed. If the tests need more, raise sandbox.limits in "
    "hub.yaml; else the model's code runs away.",
    "agent_tokens": "Agent mode spent agent.max_tokens before the change was done. Raise agent.max_tokens, give "
    "the task's files in the contract so the model searches less, or use edit mode for this model.",
    "agent_repeat": "In agent mode the model made the same tool call over and over (told once). Small models "
    "loop like this: try a stronger model, or roles.implementer.mode: edit.",
    "agent_no_call": "In agent mode the model answered without calling a tool (reminded once). It may not follow "
    "tool calling: check that the server passes tools (llama-server needs --jinja), or use mode: edit.",
    "no_change": "The model ended without writing any file. Check the requirement names what to change; the "
    "turn-by-turn record is in _handoff/tasks/<task>/runs/ (agent-turn records).",
    "error": "The worker failed. Run `hub doctor`; check the worker log under _handoff/logs/.",
}


class Failed(Exception):
    """A step of the attempt cannot go on: `failure` is what that means, a halt (`Trip`) or a stall
    strike (`Stall`). The steps raise it; the attempt catches it once, where it ends (`Attempt.execute`),
    beside the worker errors `worker_failure` reads the same way. Agent mode's
    steps (hub/phases/agent.py) raise it too."""

    def __init__(self, failure: Trip | Stall) -> None:
        super().__init__(failure.reason)
        self.failure = failure


@dataclass
class Stall:
    """One failed attempt: why, and what there is to show for it."""

    reason: str
    detail: str = ""
    raw_tail: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    event: Event = Event.STALL

    @property
    def kind(self) -> str:
        return self.reason.split(":", 1)[0]


def empty_answer(generation: Generation) -> str:
    """Why an answer is empty, as the stall says it: a thinking model's thinking is not "nothing"."""
    if not generation.thinking.strip():
        return "the model's answer was empty (after removing think blocks)"
    cut = " and was cut off at num_predict" if generation.done_reason == "length" else ""
    return (
        f"the model thought ({len(generation.thinking)} characters, {generation.completion_tokens} tokens in "
        f"all){cut} but wrote no answer after its thinking"
    )


# --- what a worker error means: decided here, for every role ------------------------------------------------


def worker_failure(exc: WorkerError, model: str, backend: str) -> Trip | Stall:
    """What a worker error means, for every role (`backend`: the role's, whose fix the halts name):

    - an outage (`WorkerUnavailable`) reaches here only after `calls.generate` waited it out for
      limits.server_wait_minutes: a halt;
    - a model the server does not have: a halt with the backend's way to get it (`ollama pull`);
    - a prompt that does not fit (`ContextOverflow`, refused before sending or reported by the server)
      is deterministic: a strike would send the same prompt again, so it halts with the fix (the
      implementer first retries once with its source files as outlines);
    - a server that answered broken a few times in a row (`ServerBroken`: hub/workers/outage.py), a
      clock that ran out (a call's, or the phase's own: `phase_timeout`), or any other worker error,
      is a stall strike."""
    if isinstance(exc, ModelNotFound):
        return model_missing(model, str(exc), backend)
    if isinstance(exc, WorkerUnavailable):
        return server_unavailable(model, str(exc), backend, exc.hint)
    if isinstance(exc, ContextOverflow):
        return overflow_trip(exc, model)
    if isinstance(exc, PhaseTimeout):
        return Stall("phase_timeout", str(exc), event=Event.TIMEOUT)
    if isinstance(exc, WorkerTimeout):
        return Stall(f"timeout: {exc.clock}", str(exc), exc.partial_text, event=Event.TIMEOUT)
    if isinstance(exc, ReplyTooLarge):
        return Stall("reply_too_large", str(exc), exc.partial_text)
    if isinstance(exc, RunawayOutput):
        return Stall("runaway_output", str(exc), exc.partial_text)
    if isinstance(exc, ServerBroken):
        return Stall("server_error", str(exc), exc.partial_text)
    return Stall(f"error: {type(exc).__name__}", describe(exc), exc.partial_text)


def model_unavailable(run: Run, worker: Worker, model: str, role: str) -> Trip | None:
    """The health check before a role's first call: a server that cannot be reached is waited out
    (`calls.wait_for_server`); then a Trip when it is still not there or lacks the model. With a pool
    (`ollama.hosts`), any server of the pool that answers will do (the GPU gate skips the dead ones)."""
    config = run.ctx.config
    backend = config.role(role).backend

    def probe() -> Health:
        health = worker.check_health([model])
        if not health.reached:
            for url, _ in config.model_servers():
                if url == config.ollama_host:
                    continue
                other = run.ctx.worker(role, url)
                try:
                    health = other.check_health([model])
                finally:
                    other.close()
                if health.reached:
                    break
        if not health.reached:
            raise WorkerUnavailable(health.detail or "the model server cannot be reached")
        return health

    try:
        # Named by its role, as the model calls after it are: the live line and `hub status` show one name.
        with live_call(role, model, run.ctx.handoff.task_dir / CALL_FILE) as call:
            health = wait_for_server(
                run, probe, call, first_contact=never_answered(run), during="health check"
            )
    except WorkerUnavailable as exc:
        return server_unavailable(model, str(exc), backend)
    if health.ok and not health.missing:
        return None
    if health.missing:
        return model_missing(model, health.detail, backend)
    why = (
        health.detail
        or f"model {model} is not available (the worker has: {', '.join(health.models) or 'none'})"
    )
    return server_unavailable(model, why, backend)


def server_unavailable(model: str, reason: str, backend: str, hint: str = "") -> Trip:
    """The halt for a model server that cannot be reached, with how to bring back the backend's (after
    the error's own hint, when it has one)."""
    fix = backends.named(backend).unreachable_fix
    return Trip(Trigger.SERVER_UNAVAILABLE, reason, {"model": model}, hint=f"{hint}; {fix}" if hint else fix)


def model_missing(model: str, detail: str, backend: str) -> Trip:
    """The halt for a model the server does not have, with the backend's way to get it."""
    reason = f"the model server does not have {model}" + (f" ({detail})" if detail else "")
    return Trip(
        Trigger.MODEL_NOT_FOUND, reason, {"model": model}, hint=backends.named(backend).missing_hint(model)
    )


def overflow_trip(exc: ContextOverflow, model: str) -> Trip:
    """The halt for a prompt that does not fit, with the fix its message names."""
    evidence: dict[str, object] = {
        "model": model,
        "num_ctx": exc.num_ctx,
        "prompt_tokens": exc.prompt_tokens,
        "source": exc.source,
    }
    if exc.context_length:
        evidence["context_length"] = exc.context_length
    if exc.server_window is not None:
        evidence["server_window"] = exc.server_window
    return Trip(Trigger.CONTEXT_OVERFLOW, str(exc), evidence, exc.hint)


def record_stall(run: Run, role: str, stall: Stall) -> StallRecord:
    entry: StallRecord = {
        "timestamp": iso(run.now),
        "role": role,
        "attempt": run.contract["attempt"],
        "reason": stall.reason,
        "detail": stall.detail[:2000],
        "raw_tail": stall.raw_tail[-TAIL_CHARS:],
        "timings": stall.timings,
    }
    run.task.add_stall(entry)
    return entry


def implementer_stall(run: Run, stall: Stall) -> Outcome:
    """Strike 1: keep the attempt's work in a stash, attempt + 1, back to pending_implementer.
    Strike 2: STALL_REPORT.md and a halt."""
    record_stall(run, "implementer", stall)
    if run.contract["status"] == IMPLEMENTATION_IN_PROGRESS:
        kept = gitops.stash(run.repo, f"{run.task_id}/attempt-{run.contract['attempt']}-stalled")
        if kept:
            run.task.add_stash(kept)
        run.drop_lease()
        run.record(stall.event, f"{stall.reason}: {stall.detail}"[:500])
    return strike(run, stall.reason)


def strike(run: Run, reason: str) -> Outcome:
    """From timeout_implementer: retry (strike 1) or escalate (strike 2). Also settles a task left in
    timeout_implementer by a phase that died between the two transitions."""
    strikes = run.bump("stall_strikes")
    if strikes >= STRIKES_TO_HALT:
        write_stall_report(run, "implementer")
        return run.halt(_trip(run, "implementer", strikes), event=Event.ESCALATE)
    run.move_attempt()
    run.record(Event.RETRY, f"strike {strikes}: {reason}")
    return Outcome(
        run.phase,
        run.task_id,
        run.start_state,
        run.contract["status"],
        f"strike {strikes} ({reason}): attempt {run.contract['attempt']} is due",
        data={"stall": reason},
    )


def review_stall(run: Run, stall: Stall) -> Outcome:
    """The reviewer's answer was unusable: strike 1 stays in pending_local_review, strike 2 halts."""
    record_stall(run, "local_reviewer", stall)
    strikes = run.bump("review_stalls")
    if strikes >= STRIKES_TO_HALT:
        write_stall_report(run, "local_reviewer")
        return run.halt(_trip(run, "local_reviewer", strikes))
    run.record(Event.STALL, f"review strike {strikes}: {stall.reason}: {stall.detail}"[:500])
    return Outcome(
        run.phase,
        run.task_id,
        run.start_state,
        run.contract["status"],
        f"review strike {strikes} ({stall.reason}): the review runs again next",
        data={"stall": stall.reason},
    )


def _trip(run: Run, role: str, strikes: int) -> Trip:
    stalls = [s for s in run.contract["handoff_data"].get("stalls", []) if s["role"] == role][-strikes:]
    reasons = "; ".join(f"attempt {s['attempt']}: {s['reason']}" for s in stalls)
    return Trip(
        Trigger.STALL if role == "implementer" else Trigger.REVIEW_STALL,
        f"the {role} stalled twice ({reasons})",
        {"stall_report": str(run.ctx.handoff.stall_report), "model": run.contract["roles"].get(role, "")},
        hint=f"see {run.ctx.handoff.stall_report.name}",
    )


def _shown(run: Run, path: Path) -> str:
    """`path` as a person at the repository's root types it (absolute when the handoff is elsewhere)."""
    try:
        return str(path.relative_to(run.ctx.repo_root))
    except ValueError:
        return str(path)


def write_stall_report(run: Run, role: str) -> None:
    stalls = [s for s in run.contract["handoff_data"].get("stalls", []) if s["role"] == role][
        -STRIKES_TO_HALT:
    ]
    parts = [
        f"# Stall report: {run.task_id}",
        "",
        f"The {role} (`{run.contract['roles'].get(role, '')}`) failed two attempts in a row, so the task is "
        f"halted for a person. {run.ctx.handoff.halt_name} has the command that resumes it.",
    ]
    for s in stalls:
        timings = ", ".join(f"{k} {v:.2f} s" for k, v in s.get("timings", {}).items()) or "none recorded"
        parts += [
            "",
            f"## Attempt {s['attempt']}: {s['reason']}",
            "",
            f"- When: {s['timestamp']}",
            f"- Timings: {timings}",
            f"- Detail: {s['detail'] or '(none)'}",
            "",
            "Last of the model's raw output:",
            "",
            "```text",
            (s.get("raw_tail") or "(no output)").replace("```", "ʼʼʼ"),
            "```",
        ]
    kinds = dict.fromkeys(s["reason"].split(":", 1)[0] for s in stalls)
    parts += ["", "## What to try", ""]
    parts += [f"- {ADVICE.get(kind, ADVICE['error'])}" for kind in kinds]
    parts += ["", f"Every model call is recorded in `{_shown(run, run.ctx.handoff.runs(run.task_id))}/`.", ""]
    handoff.write_report(run.ctx.handoff.stall_report, "\n".join(parts))
