"""What an implementer attempt leaves in provenance, in either mode (what `hub log --task` shows): a `diff`
record per applied or refused edit and per failed block, a `command` record per acceptance command run, an
`agent-turn` record per turn of agent mode's loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hub.phases.run import Run
from hub.state.provenance import write_record

if TYPE_CHECKING:
    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult
    from hub.phases.acceptance import CommandResult
    from hub.safety.sandbox import Jail


def record_edits(run: Run, parsed: ParseResult, result: ApplyResult) -> None:
    """One record per applied or refused edit and per failed block, with the reason."""
    records: list[dict[str, Any]] = [
        {
            "path": a.path,
            "diff": a.diff,
            "added": a.added,
            "removed": a.removed,
            "outcome": "applied",
        }
        for a in result.applied
    ]
    records += [{"path": r.path, "outcome": f"refused: {r.reason}"} for r in result.refused]
    records += [
        {"path": f.path, "search": f.search[:2000], "outcome": f"refused: SEARCH block: {f.reason}"}
        for f in result.failed_blocks
    ]
    # Also beside applied edits: a block the parser dropped (markers out of order, a cut-off block)
    # is part of the answer that was not written.
    records += [{"path": "", "outcome": f"refused: {problem}"} for problem in parsed.problems]
    for record in records:
        write_record(run.ctx.handoff, run.task_id, "diff", record, run.now)


def record_command(
    run: Run,
    command: str,
    result: CommandResult,
    jail: Jail | None,
    restored: list[str],
    kind: str = "command",
) -> None:
    """One acceptance command's run: its output's tails, its exit, its sandbox, what was undone after it
    (`kind` "preflight": its run on the base before the model, hub.phases.attempt_preflight)."""
    write_record(
        run.ctx.handoff,
        run.task_id,
        kind,
        {
            "command": command,
            "exit_code": result.exit_code,
            "stdout": result.stdout[-8000:],
            "stderr": result.stderr[-8000:],
            "seconds": round(result.seconds, 3),
            "timed_out": result.timed_out,
            "sandbox": jail.why if jail else None,
            "outcome": "ok" if result.ok else "failed",
            "restored": restored,
        },
        run.now,
    )


def record_turn(run: Run, turn: dict[str, Any]) -> None:
    """One turn of agent mode's loop, under the attempt it belongs to."""
    payload = {"role": "implementer", "attempt": run.contract["attempt"], **turn}
    write_record(run.ctx.handoff, run.task_id, "agent-turn", payload, run.now)
