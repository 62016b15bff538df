"""`hub finalize-task` (merge after PASS) and `hub resume` (a person clears a halt)."""

from __future__ import annotations

import shlex
from contextlib import suppress

from hub.core.atomic import write_atomic
from hub.core.errors import (
    EXIT_HALTED,
    ContractInvalid,
    GitError,
    NoSuchTarget,
    TaskHalted,
    WrongState,
    describe,
)
from hub.core.faults import crash_point
from hub.core.host_limits import explain
from hub.core.log import get_logger
from hub.core.text import listed
from hub.phases.context import Context
from hub.phases.halts import RESUME_TARGETS, check_note, resume_targets
from hub.phases.judge import request_review, write_review_request
from hub.phases.notify import after_archive
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.session import require_setup, running
from hub.phases.status import active_contract
from hub.phases.status_md import write_status
from hub.repo import checkout_merge, gitops, untrusted
from hub.repo.gitops import MergeConflict, MergeRefused
from hub.state import handoff
from hub.state.breakers import Trip
from hub.state.contract import Contract, Verdict, task_refs
from hub.state.machine import (
    ERIK_CONSULTATION,
    MERGED,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    RESUMABLE_STATES,
    REVIEW_COMPLETE,
    Event,
)
from hub.state.triggers import Trigger

log = get_logger(__name__)


def finalize_task(ctx: Context) -> Outcome:
    """Merge the commit the judge passed into the base (--no-ff); remove the task's worktree; archive.

    The user's checkout is touched only when it has the base checked out, and then by one step the hub
    can take back (`checkout_merge`), which refuses rather than overwrite uncommitted changes and tries
    again while the user's own git is in the way (their commit, their index.lock): the task then waits
    and `hub next` retries. A base checked out nowhere is merged in the object store, without any work
    tree."""
    with running(ctx, "finalize-task", {REVIEW_COMPLETE}) as run:
        refs = require_setup(run)
        data = run.contract["handoff_data"]
        verdict = data.get("judge_verdict")
        if verdict != Verdict.PASS:
            raise WrongState(f"task {run.task_id} has verdict {verdict}, not PASS; it cannot be merged")
        base, branch = refs.base_branch, refs.task_branch
        # Hand edits in the task's worktree are the task's, and like any change they are reviewed.
        run.checkpoint("manual_edit")
        head = gitops.commit_of(run.repo, branch)
        reviewed = data.get("reviewed_commit")
        if head != reviewed:
            return back_to_review(run, reviewed, head)
        user = run.user_repo
        message = f"[TASK: {run.task_id}] Merge {branch}"
        crash_point("finalize:before-merge")
        # In-tree merge drivers off: a planted `merge=union` must not resolve a conflict unseen.
        with gitops.merge_lock(user), untrusted.merge_drivers_off(user):
            merged = _merge(run, reviewed, message)
        if isinstance(merged, Outcome):
            return merged
        merge_commit = merged
        crash_point("finalize:after-merge")
        run.task.set_merge(merge_commit)
        run.record(Event.PASS, f"merged {reviewed[:12]} into {base} at {merge_commit[:12]}")
        crash_point("finalize:after-pass")
        said = f"merged {branch} into {base} ({merge_commit[:12]})"
        failed = clean_up_merged(run)
        if failed is not None:
            write_status(run.ctx)
            return Outcome(
                "finalize-task",
                run.task_id,
                run.start_state,
                MERGED,
                f"{said}; {failed}",
                exit_code=EXIT_HALTED,
                data={"merge_commit": merge_commit, "cleanup_failed": failed},
            )
        target = handoff.archive_task(run.ctx.handoff_root, run.task_id)
        write_status(run.ctx.for_task(None))
        after_archive(run.ctx)
        return Outcome(
            "finalize-task",
            run.task_id,
            run.start_state,
            MERGED,
            f"{said}; files in {target}",
            data={"merge_commit": merge_commit},
        )


def _merge(run: Run, reviewed: str, message: str) -> str | Outcome:
    """The merge itself, under the merge lock: the merge commit, or the outcome of a conflict or a wait."""
    refs = require_setup(run)
    base, branch = refs.base_branch, refs.task_branch
    user = run.user_repo
    if gitops.is_ancestor(user, reviewed, base):
        # A finalize-task killed after its merge and before recording it: the merge is there (git may
        # have been killed before it cleared its merge state in the checkout: cleared here).
        merge_commit = gitops.commit_of(user, base)
        checkout = gitops.worktrees(user).get(base)
        if checkout is not None:
            checkout_merge.forget_committed_merge(checkout, reviewed)
    elif not gitops.branch_exists(user, base):
        return run.halt(
            Trip(
                Trigger.BASE_MISSING,
                f"the base branch {base} does not exist any more (deleted or renamed?): nothing was merged",
                {"base": base},
                f"recreate it (`git branch {base} <commit>`) and `hub resume --task {run.task_id}`",
            )
        )
    elif linked := untrusted.links_added(
        user, base, reviewed, run.contract["constraints"].get("links_allowed", [])
    ):
        # The commit refuses links already; this is the last check before your checkout (a person's commit).
        return run.halt(
            Trip(
                Trigger.LINK_IN_CHANGE,
                f"the reviewed commit adds symbolic links the task does not name: {listed(linked, 10)}; "
                "nothing was merged",
                {"files": ", ".join(linked)},
                "replace each link by a file on the task branch, or name it exactly in the contract's "
                "constraints.links_allowed, then "
                f"`hub resume --task {run.task_id}`",
            )
        )
    else:
        conflicts = gitops.merge_conflicts(user, base, reviewed)
        if conflicts is not None:
            exc = MergeConflict(branch, base, conflicts)
            return run.halt(
                Trip(
                    Trigger.GIT_CONFLICT, str(exc), {"files": ", ".join(conflicts)}, _resolve_hint(run, base)
                )
            )
        checkout = gitops.worktrees(user).get(base)
        log.debug(
            "finalize.merging", task=run.task_id, into=base, checkout=str(checkout) if checkout else None
        )
        try:
            rebasing = gitops.rebasing(user).get(base)
            if rebasing is not None:
                raise MergeRefused(
                    rebasing,
                    [],
                    "",
                    f"merge waits: {base} is being rebased in {rebasing}",
                    hint="finish the rebase",
                )
            if checkout is None:
                merge_commit = gitops.merge_without_checkout(user, base, reviewed, message)
            else:
                merge_commit = checkout_merge.merge_in_checkout(checkout, reviewed, message)
        except MergeRefused as exc:
            run.task.set_merge_wait(describe(exc))
            run.save()
            write_status(run.ctx)
            return Outcome(
                "finalize-task",
                run.task_id,
                run.start_state,
                run.contract["status"],
                f"{describe(exc)}; nothing of yours was touched. {'Commit or stash them; ' if exc.files else ''}"
                "`hub next` retries",
                data={"merge_wait": describe(exc), "files": exc.files},
            )
    return merge_commit


def _resolve_hint(run: Run, base: str) -> str:
    """How a person resolves a conflict: on the task branch, in its own worktree, where the hub reads it
    from; resuming without that would only conflict again. The merged branch is reviewed before it merges
    (`back_to_review`), as any change after the verdict is."""
    worktree = run.contract["git"].get("worktree") or str(run.repo)
    return (
        f"merge {base} into the task branch in its worktree (`cd {shlex.quote(worktree)} && git merge "
        f"{shlex.quote(base)}`), resolve the conflicts there, `git add` the files and `git commit --no-edit`; then "
        "run the resume line below (the merged branch is reviewed again before it merges)"
    )


def back_to_review(run: Run, reviewed: str | None, head: str) -> Outcome:
    """The branch is not the commit the judge passed: the verdict does not cover it; review it again."""
    run.task.clear_verdict()
    reason = (
        f"the task branch moved after the verdict (reviewed {(reviewed or 'nothing')[:12]}, now {head[:12]}): "
        "the new commits go through review before any merge"
    )
    run.record(Event.BRANCH_MOVED, reason)
    return Outcome("finalize-task", run.task_id, run.start_state, run.contract["status"], reason)


def cleanup(run: Run) -> None:
    """The merged task's worktree goes, and its stashes; its branch too unless `keep_branches: true`."""
    branch = task_refs(run.contract).task_branch
    run.close_repo()
    # The judge's own checkout of the task (repo/untrusted.judged_checkout), left by a kill in the judge.
    gitops.remove_worktree(run.user_repo, run.worktree.with_name(f".judge-{run.task_id}"))
    gitops.remove_worktree(run.user_repo, run.worktree)
    if not run.ctx.config.keep_branches:
        gitops.delete_branch(run.user_repo, branch)
    # Its stashes (a stalled or interrupted attempt's work) are in the merge or superseded by it; the
    # refs would pin those objects for ever.
    stashes = f"{gitops.STASH_REFS}/{run.task_id}/"
    for ref in gitops.run(run.user_repo, "for-each-ref", "--format=%(refname)", stashes).split():
        gitops.run(run.user_repo, "update-ref", "-d", ref)


class CleanupFailed(TaskHalted):
    """A merged task's worktree or branch could not be removed: retried on every `hub next`; the other
    tasks go on (exit 4: a person may have to look)."""


def clean_up_merged(run: Run) -> str | None:
    """`cleanup`, its failure kept as the task's (CLEANUP_FAILED.txt, which `hub status` shows) rather
    than ending the run: None when done, else what failed and what to do. A live git's lock (GitBusy)
    is not a failure: it is raised, "try later"."""
    note = run.ctx.handoff.cleanup_failed
    try:
        cleanup(run)
    except (GitError, OSError) as exc:
        said = describe(exc) if isinstance(exc, GitError) else explain(exc)
        failed = (
            f"merged, but removing its worktree {run.worktree} or its branch failed: {said}; "
            "retried on every `hub next` (or remove them by hand: `git worktree remove --force "
            f"{run.worktree}`, `git branch -D {task_refs(run.contract).task_branch}`)"
        )
        log.warning("finalize.cleanup_failed", task=run.task_id, error=said)
        with suppress(OSError):
            write_atomic(note, failed + "\n")
        return failed
    note.unlink(missing_ok=True)
    return None


def resume(ctx: Context, to_state: str, note: str | None = None) -> Outcome:
    """Clear a halt: the task goes to the state a person names, with their note kept for the next prompt.

    Only to a state that leads somewhere (`resume_targets`), and never with the halt file's note
    placeholder left in."""
    if to_state not in RESUMABLE_STATES:
        # Name only states that can lead somewhere (`hub status` lists this task's).
        raise NoSuchTarget(
            f"cannot resume to '{to_state}'", hint=f"choose one of {', '.join(RESUME_TARGETS)}"
        )
    check_note(note)
    with running(ctx, "resume", {ERIK_CONSULTATION}) as run:
        targets = resume_targets(run.contract)
        if to_state not in targets:
            choices = "; ".join(f"{name}: {why}" for name, why in targets.items())
            raise WrongState(
                f"resuming task {run.task_id} to {to_state} would lead nowhere (no work on the task branch"
                f"{' or no PASS verdict' if to_state == REVIEW_COMPLETE else ''})",
                hint=f"choose one of: {choices}",
            )
        hand = run.ctx.handoff
        for path, label in ((hand.halt_report, "halt"), (hand.stall_report, "stall")):
            handoff.set_aside(hand, path, run.task_id, label)
        run.task.reset_breakers()
        if to_state == PENDING_IMPLEMENTER:
            run.move_attempt()
        if note:
            run.task.add_resume_note(note)
        run.task.clear_halt()
        run.record(
            Event.RESUME,
            f"resumed by a person: {note}" if note else "resumed by a person",
            resume_to=to_state,
        )
        if to_state == PENDING_JUDGE_REVIEW:
            # A fresh request (the diff as it is now: a person's edits during the halt are the task's) and
            # a fresh review clock; the verdict will cover the branch's commit now, and only that.
            run.checkpoint("manual_edit")
            request_review(run)
            write_review_request(run)
            run.save()  # with the request's mtime, which a judge report must not predate
        return Outcome("resume", run.task_id, run.start_state, to_state, f"resumed to {to_state}")


def _not_in_base(run: Run) -> Trip | None:
    """Why a contract that says `merged` must not be archived (its branch and worktree deleted): the
    reviewed commit or the branch's head is not in the base, so the status was set by hand or the base
    was rewound since. Pure: the caller rewinds the status and halts."""
    contract = run.contract
    base = contract["git"].get("base_branch")
    branch = contract["git"].get("task_branch")
    if not base or not branch:
        return None
    user = run.user_repo
    heads = [contract["handoff_data"].get("reviewed_commit")]
    if gitops.branch_exists(user, branch):
        heads.append(gitops.commit_of(user, branch))
    base_there = gitops.branch_exists(user, base)
    outside = [
        c for c in dict.fromkeys(heads) if c and not (base_there and gitops.is_ancestor(user, c, base))
    ]
    if not outside:
        return None
    log.warning("archive.not_in_base", task=run.task_id, commits=[c[:12] for c in outside], base=base)
    return Trip(
        Trigger.NOT_IN_BASE,
        f"the contract says merged, but {', '.join(c[:12] for c in outside)} is not in {base}"
        + ("" if base_there else f" (the branch {base} does not exist)")
        + f": nothing was archived or deleted, and {branch} and its worktree are kept",
        {"base": base, "commits": ", ".join(outside)},
        f"`hub resume --task {run.task_id}` to a state that leads to a merge, or merge {branch} by hand",
    )


def archive_merged(ctx: Context) -> Contract | None:
    """Finish the archiving of a task a finalize killed between `pass` and its archiving left merged
    (else `hub new` would overwrite it); the active contract after: None once archived."""
    hand = ctx.handoff
    try:
        with handoff.phase_lock(hand, "archive", ctx.clock()):
            current = active_contract(ctx)
            if current is not None and current["status"] == MERGED:
                run = Run(ctx, current, "archive")
                missing = _not_in_base(run)
                if missing is not None:
                    # Back to the last state the hub recorded, to halt from there.
                    run.rewind(f"{missing.trigger}: the work the contract calls merged is not in the base")
                    run.halt(missing)
                    return current
                if current["git"].get("task_branch"):
                    failed = clean_up_merged(run)
                    if failed is not None:
                        raise CleanupFailed(f"task {current['task_id']} is {failed}")
                handoff.archive_task(ctx.handoff_root, str(current["task_id"]))
                after_archive(ctx)
                return None
            return current
    except ContractInvalid:
        return None  # archived meanwhile by the run that held the lock (or unreadable: hub status says)
