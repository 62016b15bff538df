"""The task's acceptance commands as an implementer attempt runs them, in either mode: in the worktree as
the branch and the model's answers made it, sandboxed, on the attempt's clock, what they changed outside
the allowed paths undone, each recorded; and what it means when they still fail."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hub.core.log import get_logger
from hub.core.text import listed
from hub.phases import prompt_parts
from hub.phases.acceptance import CommandResult, run_command
from hub.phases.attempt_records import record_command
from hub.phases.run import Run
from hub.phases.stall import Stall
from hub.repo import gitops, untrusted
from hub.safety.trust import control_paths

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hub.safety.sandbox import Jail

log = get_logger(__name__)


def clean_state(run: Run, written: Iterable[str]) -> None:
    """The worktree as the branch and the model's answers made it, nothing else: before every run
    of the commands (what an earlier run left, a planted json.pyc, a poisoned .venv, a conftest.py it
    wrote, must not decide this one) and before the commit (what the commands wrote is not the
    task's change). Within a run the commands share what they build (`make`, then `make test`)."""
    repo = run.repo
    kept = sorted(written)
    cleaned = untrusted.remove_ignored(repo, kept) + untrusted.keep_only(repo, kept)
    if cleaned:
        log.debug("acceptance.cleaned", task=run.task_id, paths=cleaned[:50])


def run_acceptance_command(run: Run, command: str, jail: Jail | None, kind: str = "command") -> CommandResult:
    """One command, recorded as `kind`; the model is told what of its changes outside the allowed paths
    was undone."""
    config = run.ctx.config
    # PhaseTimeout (a phase_timeout stall) when the attempt's clock is spent: no command starts.
    left = run.remaining(f"the acceptance command `{command}`")
    result = run_command(
        command,
        run.worktree,
        min(config.acceptance_timeout_seconds, left if left is not None else float("inf")),
        jail,
        run.ctx.handoff.sandbox_pid,
        crash_at=f"acceptance:{'running' if kind == 'command' else kind}",
    )
    restored = restore_outside_allowed(run, command)
    if restored:
        note = prompt_parts.fragment(config.trust_root, "command_restored", paths=listed(restored, 20))
        result = replace(result, stderr=result.stderr + "\n" + note)
    record_command(run, command, result, jail, restored, kind)
    return result


def restore_outside_allowed(run: Run, command: str) -> list[str]:
    """Undo what a command changed in the worktree outside the allowed paths (a rewritten test, a
    new conftest.py): the next run, a reflection's, must check against the task's own tests; the
    model is told. Inside the allowed paths the changes stay until the next round or the commit
    (`clean_state`); the user's checkout is never touched."""
    constraints = run.contract["constraints"]
    restored = gitops.restore_outside(
        run.repo,
        constraints["allowed_paths"],
        constraints["forbidden_paths"],
        control_paths(run.ctx.config),
        run.contract["specification"].get("acceptance_commands") or (),
    )
    if restored:
        log.warning("acceptance.restored", task=run.task_id, command=command, paths=restored[:50])
    return restored


def failures(results: list[CommandResult]) -> str:
    """The failed commands as the model is told them."""
    return "\n\n".join(r.feedback() for r in results if not r.ok)


def acceptance_stall(run: Run, results: list[CommandResult]) -> Stall:
    """What acceptance commands still failing at the end of an attempt mean: a `tests_failed` stall, or
    `resource_limit` when one ended at a sandbox limit (raising the limit may be the fix), the results
    kept on the contract for the next attempt."""
    run.task.record_acceptance([r.summary() for r in results])
    failed = [r for r in results if not r.ok]
    # A command ended at a sandbox limit says so by name: raising the limit may be the fix.
    limited = any((r.failure or "").startswith("resource_limit") for r in failed)
    reason = "resource_limit" if limited else "tests_failed"
    return Stall(reason, failures(results)[-3000:])
