"""The acceptance commands tried on the base before the model is first called (issue 36).

A command that cannot run at all (`python` on a Debian without it: exit 127; no pytest in the
interpreter it names) was blamed on the model: six calls spent asking it to fix what only a person can,
then a halt advising a stronger model. So before the first model call of a task, while its worktree is
still the base, each command runs once as every acceptance command does (sandboxed, on the attempt's
clock; a `preflight` record). One that cannot run halts the task at once (`command_cannot_run`),
naming the command and what it printed; one that runs and fails is what a task is for. A base whose
commands all ran is remembered in the task's folder (`.preflight.json`): one run per base.

A test runner that found no test on the base (pytest's "no tests ran", exit 5; unittest's "NO TESTS
RAN") fails whatever the model writes unless the task may add a test the command would collect. When no
path it may write could hold one (`--target calc.py` beside no test), the command is the person's to fix
and halts the same way; when one could (a folder, a glob, a test file, found files), the task carries on
with a `preflight-note` record saying the base ran no test.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.atomic import write_atomic
from hub.core.files import read_text_capped
from hub.core.log import get_logger
from hub.phases.acceptance import CommandResult
from hub.phases.attempt_commands import clean_state, run_acceptance_command
from hub.phases.run import Run
from hub.repo import gitops
from hub.state.breakers import Trip
from hub.state.provenance import write_record
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

# A test runner's word for a run that collected nothing: pytest's summary, unittest's (Python 3.12+).
_NO_TESTS = re.compile(r"\bno tests ran\b|^Ran 0 tests\b", re.I | re.M)
# Files that could hold a test pytest or unittest collects by default, or change what they collect.
_TEST_HOLDERS = ("*test*.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")
_COLLECTION_SETTINGS = ("python_files", "doctest")
NO_TESTS_FIX = (
    "add a test the command finds beside the code (e.g. `test_{stem}.py`) and commit it: on the base branch, "
    "then start a new task from it (`hub new ...`; this task's branch starts at the commit before), or on "
    "this task's branch in its worktree ({worktree}), then `hub resume --to pending_implementer`; or give a "
    "new task a path it may write a test in (`hub new --allowed-path tests/ ...`)"
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
            if ran_no_test(command, result):
                trip = no_test_to_run(run, command, result)
                if trip is not None:
                    return trip
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


def ran_no_test(command: str, result: CommandResult) -> bool:
    """Whether a failed `result` is a test runner that collected no test at all."""
    if result.ok or result.timed_out:
        return False
    said = _NO_TESTS.search(f"{result.stdout}\n{result.stderr}")
    return said is not None or (result.exit_code == 5 and "pytest" in command)


def no_test_to_run(run: Run, command: str, result: CommandResult) -> Trip | None:
    """The halt for a command that ran no test on the base when the task cannot add one; else None, with
    a note in the record: the model's test is what the command will run."""
    allowed = run.contract["constraints"]["allowed_paths"]
    if may_add_test(run, command, allowed):
        note = "the base ran no test; the task may add one (its allowed paths can hold a test)"
        log.info("acceptance.no_tests_on_base", task=run.task_id, command=command)
        write_record(
            run.ctx.handoff, run.task_id, "preflight-note", {"command": command, "note": note}, run.now
        )
        return None
    log.warning("acceptance.no_tests", task=run.task_id, command=command)
    output = (result.stdout + "\n" + result.stderr).strip()[-800:]
    shown = ", ".join(allowed) or "none"
    target = run.contract["specification"].get("target_file") or (allowed[0] if allowed else "app.py")
    return Trip(
        Trigger.COMMAND_CANNOT_RUN,
        f"the acceptance command `{command}` runs no test on the task's base (no tests ran), and no path "
        f"the task may write ({shown}) could hold a test it collects, so no answer of the model's can pass "
        f"it; no model was called. It printed:\n\n{output or '(nothing)'}\n",
        {"command": command, "exit_code": result.exit_code},
        hint=NO_TESTS_FIX.format(stem=Path(target).stem or "app", worktree=run.worktree),
    )


def may_add_test(run: Run, command: str, allowed: list[str]) -> bool:
    """Whether a path the task may write could hold a test `command` collects. Decided from the paths
    alone, and leaning to yes: a task that finds its files, a folder, a glob or an extension-less name
    (a folder yet to be), a file named like a test or a runner's settings; doctests and a base that sets
    which files are tests make any file one."""
    if run.contract["specification"].get("find_files") or "doctest" in command:
        return True
    if _sets_collection(run.worktree):
        return True
    for entry in allowed:
        path = entry.strip().rstrip("/")
        name = path.rsplit("/", 1)[-1]
        if not path or path == "." or any(c in path for c in "*?[") or (run.worktree / path).is_dir():
            return True
        if entry.endswith("/") or ("." not in name and not (run.worktree / path).is_file()):
            return True
        if any(fnmatch.fnmatch(name.lower(), pattern) for pattern in _TEST_HOLDERS):
            return True
    return False


def _sets_collection(worktree: Path) -> bool:
    """Whether the base's runner settings choose which files hold tests (`python_files`, doctests)."""
    for name in _TEST_HOLDERS[1:]:
        text = read_text_capped(worktree / name, root=worktree)  # no link followed, bounded
        if text is not None and any(setting in text for setting in _COLLECTION_SETTINGS):
            return True
    return False


def _cached(cache: Path, base: str, commands: list[str]) -> bool:
    try:
        seen = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(seen, dict) and seen.get("base_commit") == base and seen.get("commands") == commands
