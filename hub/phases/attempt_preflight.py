"""The acceptance commands tried on the base before the model is first called (issue 36).

A command that cannot run at all (`python` on a Debian without it: exit 127; no pytest in the
interpreter it names) was blamed on the model: six calls spent asking it to fix what only a person can,
then a halt advising a stronger model. So before the first model call of a task, while its worktree is
still the base, each command runs once as every acceptance command does (sandboxed, on the attempt's
clock; a `preflight` record). One that cannot run halts the task at once (`command_cannot_run`),
naming the command and what it printed; one that runs and fails is what a task is for. A base whose
commands all ran is remembered in the task's folder (`.preflight.json`): one run per base.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.atomic import write_atomic
from hub.core.log import get_logger
from hub.phases.acceptance import CommandResult
from hub.phases.attempt_commands import clean_state, run_acceptance_command
from hub.phases.run import Run
from hub.repo import gitops
from hub.state.breakers import Trip
from hub.state.triggers import Trigger

if TYPE_CHECKING:
    from hub.safety.sandbox import Jail

log = get_logger(__name__)

CACHE_FILE = ".preflight.json"  # in the task's folder: {"base_commit": sha, "commands": [...]}
# The shell's "not executable" and "not found".
CANNOT_RUN_EXITS = {126: "not executable", 127: "not found"}
# What a command prints when its test runner is missing: bash's "command not found", an interpreter's
# `-m` module that is not installed, or a test file's own `import pytest` failing for want of pytest.
_RUNNER_MISSING = re.compile(
    r"command not found|No module named '?pytest'?\b|^\S*python[\w.]*: No module named \S+\s*$", re.M
)
FIX = (
    "install what it needs where the command runs (no `python` on Debian/Ubuntu: write `python3`, or "
    "`apt install python-is-python3`; no pytest: install it into the interpreter the command names, "
    "`pip install pytest` in your project's venv or `apt install python3-pytest` for the system's python3, "
    "whose pip PEP 668 refuses); in the sandbox a command sees the system folders, PATH's entries and "
    "sandbox.read_paths only; a wrong command needs a new task (`hub new --acceptance-command ...`)"
)


def why_cannot_run(result: CommandResult) -> str | None:
    """Why `result` says its command could not run at all (the person's to fix), or None: it ran."""
    if result.timed_out:
        return None
    if result.exit_code in CANNOT_RUN_EXITS:
        return f"exit {result.exit_code}: {CANNOT_RUN_EXITS[result.exit_code]}"
    found = _RUNNER_MISSING.search(f"{result.stdout}\n{result.stderr}")
    return f"it printed `{found.group(0).strip()}`" if found else None


def preflight(run: Run, commands: list[str], jail: Jail | None) -> Trip | None:
    """Each of `commands` run once on the task's base, unless this base's already ran; the halt for the
    first that cannot run. Only while the task branch is still at its base: later, what runs is the
    model's work, and a failure is the model's to answer."""
    base = run.contract["git"].get("base_commit")
    cache = run.ctx.handoff.task_dir / CACHE_FILE
    if not commands or not base or gitops.head_commit(run.repo) != base or _cached(cache, base, commands):
        return None
    clean_state(run, ())
    try:
        for command in commands:
            result = run_acceptance_command(run, command, jail, kind="preflight")
            why = why_cannot_run(result)
            if why is not None:
                log.warning("acceptance.cannot_run", task=run.task_id, command=command, why=why)
                return cannot_run(command, why, result)
    finally:
        clean_state(run, ())  # what the commands wrote is not the base the model is shown
    write_atomic(cache, json.dumps({"base_commit": base, "commands": commands}))
    return None


def cannot_run(command: str, why: str, result: CommandResult) -> Trip:
    output = (result.stdout + "\n" + result.stderr).strip()[-800:]
    return Trip(
        Trigger.COMMAND_CANNOT_RUN,
        f"the acceptance command `{command}` cannot run on the task's base ({why}); no model was called. "
        f"It printed:\n\n{output or '(nothing)'}\n",
        {"command": command, "exit_code": result.exit_code},
        hint=FIX,
    )


def _cached(cache: Path, base: str, commands: list[str]) -> bool:
    try:
        seen = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(seen, dict) and seen.get("base_commit") == base and seen.get("commands") == commands
