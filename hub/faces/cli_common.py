"""What the `hub` commands share: the group's resolved options, printing, and exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from hub.core.errors import ContractInvalid

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def find_repo_root(start: Path) -> Path:
    """The nearest folder holding `.git`, walking up from `start` (or `start` itself); from inside a
    task's worktree (a path the hub prints), the user's checkout the task belongs to."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_file():
            return task_checkout(folder, dot) or folder
        if dot.exists():
            return folder
    return start


def task_checkout(worktree: Path, dot: Path) -> Path | None:
    """The checkout whose `_handoff/` holds the task a linked worktree is named after, if it is one:
    its `.git` file points at `<checkout>/.git/worktrees/<name>`."""
    try:
        pointer = dot.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not pointer.startswith("gitdir:"):
        return None
    gitdir = (worktree / pointer.removeprefix("gitdir:").strip()).resolve()
    common = gitdir.parent.parent
    if gitdir.parent.name != "worktrees" or common.name != ".git":
        return None
    checkout = common.parent
    handoff = checkout / "_handoff"
    if (handoff / "tasks" / worktree.name).is_dir() or (handoff / "archive" / worktree.name).is_dir():
        return checkout
    return None


class State:
    """What the group's options resolve to; commands build phase contexts from it."""

    def __init__(self, repo: Path | None, handoff: Path | None) -> None:
        self.repo = (repo or find_repo_root(Path.cwd())).resolve()
        self.handoff = handoff.resolve() if handoff else None
        self.task_id: str | None = None

    def context(self, ready: bool = True) -> Any:
        """A phase context: hub.yaml checked and, with `ready`, the repository initialised (or exit 1
        saying what to run, before anything is written)."""
        # Here, not at the top: hub/faces/cli.py imports this module, and `hub --help` needs none of them.
        from hub.core.config import load_config
        from hub.phases.context import Context

        config = load_config(self.repo, self.handoff)
        if ready:
            from hub.repo.workspace import require_ready

            require_ready(config)
        return Context(config, task_id=self.task_id)


pass_state = click.make_pass_decorator(State)


def emit(payload: Any, as_json: bool, text: str | None = None) -> None:
    if as_json:
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(text if text is not None else payload)


def finish(outcome: Any, as_json: bool = False) -> None:
    """Print a phase outcome and exit with its code (0, or 4 when the phase halted the task)."""
    emit(outcome.as_dict(), as_json, outcome.message)
    if outcome.exit_code:
        sys.exit(outcome.exit_code)


def _set_task(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        ctx.find_object(State).task_id = value  # type: ignore[union-attr]
    return value


# `--task ID` on every command that acts on a task; without it the command acts on the only task that
# fits, or exits 2 listing the candidates.
task_option = click.option(
    "--task",
    "task_id",
    expose_value=False,
    callback=_set_task,
    help="The task to act on (default: the only one that fits).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


def read_input(path: Path) -> str:
    """A file named on the command line (a proposal, a rebuttal), as text: one that is not UTF-8 is an
    error naming it, not a traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ContractInvalid(str(path), "$", f"not UTF-8 text (byte {exc.start})") from None
