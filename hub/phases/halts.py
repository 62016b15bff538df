"""A halt as a person reads it (ERIK_HALT.md): the cause, the evidence, and the `hub resume` lines that
lead on; and what a resume may ask for (`resume_targets`, `check_note`)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from hub.core.errors import HubError, with_hint
from hub.phases.context import Context
from hub.state.breakers import Trip
from hub.state.contract import Contract, Verdict
from hub.state.machine import (
    IMPLEMENTATION_IN_PROGRESS,
    JUDGE_REVIEW_IN_PROGRESS,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    PENDING_LOCAL_REVIEW,
    PENDING_REBUTTAL,
    RESUMABLE_STATES,
    REVIEW_COMPLETE,
    TIMEOUT_IMPLEMENTER,
    TIMEOUT_JUDGE,
    Event,
)
from hub.state.triggers import Trigger

# Triggers whose cause lies in the model's work: resumed to the implementer, the model would repeat it
# unless a person says what changed, and the note is the only way into its next prompt.
NOTE_NEEDED = frozenset(
    {
        Trigger.STALL,
        Trigger.CRITICAL_FLAW,
        Trigger.CRITICAL_HALT,
        Trigger.REVIEW_CYCLES,
        Trigger.REBUTTAL_LIMIT,
        Trigger.DESTRUCTIVE_DIFF,
        Trigger.HASH_LOOP,
        Trigger.TOO_MANY_FILES,
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
    wrote = any(entry.get("event") == Event.CODE_WRITTEN for entry in contract.get("history", []))
    has_work = bool(contract["git"].get("task_branch") and (wrote or data.get("changed_files")))
    targets: dict[str, str] = {PENDING_IMPLEMENTER: "the implementer writes the change again (a new attempt)"}
    if has_work:
        targets[PENDING_LOCAL_REVIEW] = "the local review checks the work on the task branch again"
        targets[PENDING_JUDGE_REVIEW] = (
            "the work on the task branch goes to the judge (a fresh review request)"
        )
    if has_work and data.get("judge_verdict") == Verdict.PASS:
        targets[REVIEW_COMPLETE] = "the PASS verdict stands: the task branch is merged (finalize-task)"
    return targets


def suggested_resume_state(
    state_before: str, targets: Mapping[str, str] | None = None, trigger: str = ""
) -> str:
    """Where a person most likely wants the task to go: back to the implementer when its work caused
    the halt (a second review of the same work would halt again), else back to where it halted, if
    that leads on."""
    wanted: str
    if trigger in NOTE_NEEDED or state_before in (IMPLEMENTATION_IN_PROGRESS, TIMEOUT_IMPLEMENTER):
        wanted = PENDING_IMPLEMENTER
    elif state_before in (JUDGE_REVIEW_IN_PROGRESS, TIMEOUT_JUDGE, PENDING_REBUTTAL):
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
            "the --note still holds the halt file's placeholder <<REPLACE: ...>>",
            hint="write what you changed (the implementer reads it in its next prompt), or leave --note out",
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


def suggested_resume(ctx: Context, contract: Contract, trigger: str, before: str) -> str:
    """The one resume line ERIK_HALT.md puts first (and a halt's notification sends): the state a person
    most likely wants, with the note placeholder when the implementer is next because of its work."""
    state = suggested_resume_state(before, resume_targets(contract), trigger)
    return resume_command(ctx, state, note_needed(trigger, state), contract["task_id"])


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
- Reason: {with_hint(trip.reason, trip.hint)}
- State before the halt: `{before}`
- Attempt: {contract["attempt"]}
- Halted at: {contract["timestamps"]["updated_at"]}
- Task branch: `{contract["git"].get("task_branch")}` (base `{contract["git"].get("base_branch")}`)

## Evidence

{evidence}

## To resume

{how}

    {suggested_resume(ctx, contract, trip.trigger, before)}

Then: {targets[state]}.
{other_text}
See `hub status` and `hub log` for the history, and `{ctx.handoff.runs(contract["task_id"])}/` for every model call.
"""
