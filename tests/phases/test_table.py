"""The phase table: each row is a `hub` command with its help line, a function `hub next` runs, and the
states `due` names it from."""

from __future__ import annotations

import itertools
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hub.phases.status import due
from hub.phases.table import BY_NAME, PHASES, phase_function
from hub.state.contract import iso
from hub.state.machine import STATES
from hub.state.new_task import new_contract

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
COMMANDS = [phase for phase in PHASES if phase.command]


def test_every_phase_runs_a_function_of_its_module_taking_the_context() -> None:
    for phase in PHASES:
        function = phase_function(phase.name)
        assert callable(function), phase.name
        assert function.__module__ == phase.target.partition(":")[0], phase.name
        assert function.__code__.co_varnames[0] == "ctx", phase.name


def test_every_phase_runs_from_states_of_the_machine_on_a_clock_of_the_contract() -> None:
    contract = new_contract(project="demo", title="t", requirements=["r"], now=NOW, roles={})
    for phase in PHASES:
        assert phase.runs_from <= {*STATES, None}, phase.name
        assert phase.timeout_key is None or phase.timeout_key in contract["limits"]["timeout_minutes"]


@pytest.mark.parametrize("phase", COMMANDS, ids=[phase.name for phase in COMMANDS])
def test_every_phase_but_promotion_is_a_command_whose_help_is_its_row(phase: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hub", phase.name, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert f"Usage: hub {phase.name} [OPTIONS]" in done.stdout
    assert " ".join(phase.help.split()) in " ".join(done.stdout.split())
    assert "--task TEXT" in done.stdout and "--json" in done.stdout


def test_due_names_only_a_phase_whose_row_runs_from_the_tasks_state() -> None:
    started = iso(NOW - timedelta(days=1))
    for state, branch, verdict, judge, report in itertools.product(
        STATES, (None, "task/x"), (None, "PASS", "FAIL"), (False, True), (False, True)
    ):
        contract = new_contract(project="demo", title="t", requirements=["r"], now=NOW, roles={})
        contract["status"] = state
        contract["git"]["task_branch"] = branch
        contract["handoff_data"].update(judge_verdict=verdict, review_requested_at=started)
        phase, why = due(contract, NOW, judge, report)
        assert why
        if phase is not None:
            assert state in BY_NAME[phase].runs_from, (state, phase)
    assert due(None, NOW, False)[0] == "promote-backlog"
