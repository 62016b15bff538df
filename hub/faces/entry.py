"""`hub`, the console entry point: a plain `hub status` without click, everything else through it.

A plain `hub status` is `hub status [--json] [--task ID]` with no group option, the variables the group
reads (HUB_LOG_FORMAT, HUB_LOG_LEVEL, HUB_HANDOFF_DIR) unset or valid, and no shell completion asked
for. It runs the click command's own code (`cli_plain`) without importing click, whose import is a third
of status's start-up (issue 25: `hub status` < 5x `python -c pass`). Every other command line, help
and usage errors included, goes to the click CLI (`cli`), the only parser. tests/faces/test_cli.py holds
both ways to the same output.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from hub.core.errors import EXIT_ERROR, HubError
from hub.faces.cli_plain import (
    LOG_FORMATS,
    LOG_LEVELS,
    State,
    aborted,
    echo,
    fail,
    status_text,
    warn_mistyped,
)


def plain_status(args: list[str], env: Mapping[str, str]) -> tuple[Path | None, str | None, bool] | None:
    """(handoff folder, task id, --json) when `args` is a `hub status` click would take as it is and
    the group's variables are valid; None for anything else, which click parses (and refuses)."""
    if not args or args[0] != "status" or "_HUB_COMPLETE" in env:  # click's shell completion
        return None
    if env.get("HUB_LOG_FORMAT", "auto") not in LOG_FORMATS:
        return None
    if env.get("HUB_LOG_LEVEL", "INFO").casefold() not in {level.casefold() for level in LOG_LEVELS}:
        return None
    handoff = env.get("HUB_HANDOFF_DIR")
    if handoff is not None and not os.path.isdir(handoff):  # click checks it is not a file
        return None
    task_id, as_json = None, False
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
        elif arg == "--task" and rest and not rest[0].startswith("-"):
            task_id = rest.pop(0)
        else:
            return None
    return (Path(handoff) if handoff else None), task_id, as_json


def main(argv: list[str] | None = None) -> None:
    """`hub`: a plain `hub status` here, everything else through the click CLI."""
    plain = plain_status(sys.argv[1:] if argv is None else argv, os.environ)
    if plain is None:
        # httpx's package imports its command-line client (click, rich, pygments: ~30 ms of every
        # phase that calls a model) unless that is missing; the hub never runs it. A None in
        # sys.modules makes the import fail (the import system's documented way), and httpx takes its
        # own path for an install without the client.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
        from hub.faces.cli import main as click_main

        click_main(argv)
        return
    handoff, task_id, as_json = plain
    try:
        # The group's callback, then the command's, as click runs them.
        state = State(None, handoff)
        warn_mistyped(os.environ)
        if task_id:
            state.task_id = task_id
        echo(status_text(state, as_json))
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)  # click's newline before it aborts
        aborted()
    except HubError as exc:
        fail(exc)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            # A reader that went away (`hub status | head -1`): as click does, nothing more on either
            # stream (nor a second error as Python flushes them at exit), exit 1.
            _silence_streams()
            sys.exit(EXIT_ERROR)
        fail(exc)
    sys.exit(0)


def _silence_streams() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
