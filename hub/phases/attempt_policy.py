"""What an implementer attempt may write, in either mode: the task's constraints, in its worktree."""

from __future__ import annotations

from hub.edits.policy import Policy
from hub.phases.run import Run
from hub.safety.trust import control_paths


def policy_for(run: Run) -> Policy:
    """The task's allowed and forbidden paths, its limits, and the hub's own control files (never writable)."""
    config, constraints = run.ctx.config, run.contract["constraints"]
    allowed = tuple(constraints["allowed_paths"])
    if not allowed and run.contract["specification"].get("find_files"):
        # A task that names no file, in agent mode (edit mode has chosen its files before any write):
        # the model explores, and may write anywhere but the forbidden, control and behaviour files.
        allowed = (".",)
    return Policy(
        control_paths=control_paths(config),
        max_files=config.max_changed_files,
        repo_root=run.worktree,
        allowed_paths=allowed,
        forbidden_paths=tuple(constraints["forbidden_paths"]),
        max_diff_lines=constraints.get("max_diff_lines"),
        delete_allowed=bool(constraints.get("delete_allowed", False)),
        acceptance_commands=tuple(run.contract["specification"].get("acceptance_commands") or ()),
    )
