"""The end of an implementer attempt whose work is committed: `code_written`, the diff's stats and the
breakers after an implementation. Reached by the attempt itself (implement.py) and by the recovery of
one killed right after its commit (session.py)."""

from __future__ import annotations

from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.repo import gitops
from hub.state import breakers
from hub.state.contract import task_refs
from hub.state.machine import Event


def finish_code_written(run: Run, commit: str | None) -> Outcome:
    """implementation_in_progress -[code_written]-> pending_local_review once the attempt's work is
    committed: by the attempt itself, or by the recovery of one killed right after its commit."""
    contract = run.contract
    data = contract["handoff_data"]
    run.task.finish_commit()
    run.drop_lease()
    run.task.reset_counters("stall_strikes", "interruptions")
    run.record(Event.CODE_WRITTEN, f"attempt {contract['attempt']}")
    refs = task_refs(contract)
    stats = gitops.diff_stats(run.repo, refs.base_commit, refs.task_branch)
    content_hash = gitops.content_hash(run.worktree, list(stats.files))
    # The breakers see the files and figures, but not yet this attempt's own record (hash_loop).
    trip = breakers.after_implementation(contract, len(stats.files), stats.added, stats.removed, content_hash)
    run.task.record_written(
        list(stats.files),
        f"{len(stats.files)} files changed, +{stats.added} -{stats.removed}",
        {
            "attempt": contract["attempt"],
            "content_hash": content_hash,
            "commit": commit,
            "changed_files": list(stats.files),
            "verdict": None,
        },
    )
    if trip:
        return run.halt(trip)
    run.save()
    return Outcome(
        "run-implementer",
        run.task_id,
        run.start_state,
        contract["status"],
        f"attempt {contract['attempt']}: {data['diff_summary']}",
        data={"changed_files": data["changed_files"], "commit": commit},
    )
