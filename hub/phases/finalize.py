"""`hub finalize-task` (merge after PASS) and `hub resume` (a person clears a halt)."""

from __future__ import annotations

from hub import gitops, handoff
from hub.breakers import Trip
from hub.contract import Contract, Verdict, iso
from hub.errors import ContractInvalid, WrongState
from hub.faults import crash_point
from hub.gitops import MergeConflict
from hub.machine import (
    ERIK_CONSULTATION,
    MERGED,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    RESUMABLE_STATES,
    REVIEW_COMPLETE,
    Event,
)
from hub.phases.context import (
    RESUME_TARGETS,
    Context,
    Outcome,
    check_note,
    require_setup,
    resume_targets,
    running,
)
from hub.phases.judge import write_review_request


def finalize_task(ctx: Context) -> Outcome:
    """Merge the task branch into its base with --no-ff after a PASS; archive the task's files."""
    with running(ctx, "finalize-task", {REVIEW_COMPLETE}) as run:
        refs = require_setup(run)
        verdict = run.contract["handoff_data"].get("judge_verdict")
        if verdict != Verdict.PASS:
            raise WrongState(f"task {run.task_id} has verdict {verdict}, not PASS; it cannot be merged")
        repo = run.repo
        gitops.checkout(repo, refs.task_branch)
        # Untracked files (build output of acceptance commands) cannot be lost by a merge; changes can.
        gitops.ensure_clean(repo, untracked=False)
        try:
            merge_commit = gitops.merge_no_ff(
                repo,
                refs.task_branch,
                refs.base_branch,
                f"[TASK: {run.task_id}] Merge {refs.task_branch}",
            )
        except MergeConflict as exc:
            return run.halt(Trip("git_conflict", str(exc), {"files": ", ".join(exc.files)}))
        crash_point("finalize:after-merge")
        run.contract["handoff_data"]["merge_commit"] = merge_commit
        run.record(Event.PASS, f"merged into {refs.base_branch} at {merge_commit[:12]}")
        crash_point("finalize:after-pass")
        target = handoff.archive_task(ctx.handoff, run.task_id)
        return Outcome(
            "finalize-task",
            run.task_id,
            run.start_state,
            "merged",
            f"merged {refs.task_branch} into {refs.base_branch} ({merge_commit[:12]}); files in {target}",
            data={"merge_commit": merge_commit},
        )


def resume(ctx: Context, to_state: str, note: str | None = None) -> Outcome:
    """Clear a halt: the task goes to the state a person names, with their note kept for the next prompt.

    Only to a state that leads somewhere (`resume_targets`), and never with the halt file's note
    placeholder left in."""
    if to_state not in RESUMABLE_STATES:
        # Name only states that can lead somewhere (`hub status` lists this task's).
        raise WrongState(f"cannot resume to '{to_state}'; choose one of {', '.join(RESUME_TARGETS)}")
    check_note(note)
    with running(ctx, "resume", {ERIK_CONSULTATION}) as run:
        targets = resume_targets(run.contract)
        if to_state not in targets:
            choices = "; ".join(f"{name}: {why}" for name, why in targets.items())
            raise WrongState(
                f"resuming task {run.task_id} to {to_state} would lead nowhere (no work on the task branch"
                f"{' or no PASS verdict' if to_state == REVIEW_COMPLETE else ''}); choose one of: {choices}"
            )
        hand = ctx.handoff
        for path, label in ((hand.halt_report, "halt"), (hand.stall_report, "stall")):
            handoff.set_aside(hand, path, run.task_id, label)
        breaker = run.contract.setdefault("breaker", {})
        breaker.update({"status": "closed", "trigger": None, "reason": None})
        for name in ("stall_strikes", "review_stalls", "interruptions"):
            breaker.get("counters", {}).pop(name, None)
        if to_state == PENDING_IMPLEMENTER:
            run.move_attempt()
        if note:
            run.contract["handoff_data"].setdefault("resume_notes", []).append(note)
        run.contract["handoff_data"].pop("halt", None)
        run.record(
            Event.RESUME,
            f"resumed by a person: {note}" if note else "resumed by a person",
            resume_to=to_state,
        )
        if to_state == PENDING_JUDGE_REVIEW:
            # A fresh request (the diff as it is now) and a fresh review clock for the judge.
            run.contract["handoff_data"]["review_requested_at"] = iso(run.now)
            write_review_request(run)
            run.save()  # with the request's mtime, which a judge report must not predate
        return Outcome("resume", run.task_id, run.start_state, to_state, f"resumed to {to_state}")


def archive_merged(ctx: Context) -> Contract | None:
    """Finish the archiving of a task a finalize killed between `pass` and its archiving left merged
    (else `hub new` would overwrite it); the active contract after: None once archived."""
    from hub.phases.status import active_contract

    hand = ctx.handoff
    with handoff.phase_lock(hand, "archive", ctx.clock()):
        try:
            current = active_contract(ctx)
        except ContractInvalid:
            return None
        if current is not None and current["status"] == MERGED:
            handoff.archive_task(hand, str(current["task_id"]))
            return None
        return current
