"""What the `hub` commands share: the group's resolved options, printing, and exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from hub.core.errors import ContractInvalid
from hub.faces.cli_plain import State, to_json

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


pass_state = click.make_pass_decorator(State)


def emit(payload: Any, as_json: bool, text: str | None = None) -> None:
    if as_json:
        click.echo(to_json(payload))
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
