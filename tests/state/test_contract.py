"""The contract: schema 2.0, error messages that name the file and the JSON path, atomic saves,
judge reports (JSON and markdown), and proposals."""

from __future__ import annotations

import copy
import json
import os
import random
import re
import select
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hub.core.errors import ContractInvalid, exit_code_for
from hub.state.contract import iso, parse_iso
from hub.state.judge_report import judge_report_from_markdown, validate_judge_report
from hub.state.new_task import make_task_id, new_contract, proposal_fields
from hub.state.schema import validate
from hub.state.store import load, save

NOW = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)


def fresh(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "project": "demo",
        "title": "Greet politely",
        "requirements": ["greet() says 'hello, NAME'"],
        "now": NOW,
        "roles": {"implementer": "coder:7b", "local_reviewer": "coder:7b", "judge": "judge:1"},
        "target_file": "src/app.py",
        "source_files": ["src/util.py"],
    }
    fields.update(overrides)
    return new_contract(**fields)


def test_a_new_contract_is_valid_pending_and_allows_its_target_and_sources() -> None:
    contract = fresh()
    assert contract["schema_version"] == "2.0"
    assert contract["status"] == "pending_implementer"
    assert contract["attempt"] == 1
    assert contract["history"] == []
    assert contract["constraints"]["allowed_paths"] == ["src/app.py", "src/util.py"]
    assert contract["roles"] == {"implementer": "coder:7b", "local_reviewer": "coder:7b", "judge": "judge:1"}
    assert contract["timestamps"]["deadline_at"] == "2026-03-14T13:26:53Z"
    assert validate(copy.deepcopy(contract)) == contract


def test_task_ids_have_the_form_project_mmddhhmmss_slug() -> None:
    assert make_task_id("Agent Hub", "Fix the #1 bug, now!", NOW) == "agent-hub-0314092653-fix-the-1-bug-now"
    assert fresh()["task_id"] == "demo-0314092653-greet-politely"
    assert re.fullmatch(r"[a-z0-9-]+-\d{10}-task", make_task_id("x", "!!!", NOW))


def test_a_task_id_stays_within_the_schema_for_long_titles() -> None:
    contract = fresh(project="p" * 80, title="word " * 60)
    assert len(contract["task_id"]) <= 121


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(contract: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = contract
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(contract: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = contract
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


def _both_allowed_and_forbidden(contract: dict[str, Any]) -> None:
    contract["constraints"]["allowed_paths"] = ["src/app.py", "secrets.env"]
    contract["constraints"]["forbidden_paths"] = ["vendor/", "secrets.env"]


def _bad_history_entry(contract: dict[str, Any]) -> None:
    contract["history"] = [{"timestamp": "2026-01-01T00:00:00Z", "event": 7, "from": "a", "to": "b"}]


BAD_CONTRACTS = [
    ("missing top-level field", _drop("task_id"), "$.task_id", "required field is missing"),
    ("missing nested field", _drop("limits.max_rebuttals"), "$.limits.max_rebuttals", "required"),
    ("wrong type", _set("limits.max_rebuttals", "two"), "$.limits.max_rebuttals", "integer"),
    ("negative count", _set("limits.max_rebuttals", -1), "$.limits.max_rebuttals", "bigger than or equal"),
    ("unknown status", _set("status", "flying"), "$.status", "must be one of"),
    ("unknown complexity", _set("complexity", "huge"), "$.complexity", "must be one of"),
    ("attempt zero", _set("attempt", 0), "$.attempt", "bigger than or equal to 1"),
    ("wrong schema version", _set("schema_version", "1.0"), "$.schema_version", "2.0"),
    ("bad task id", _set("task_id", "../etc/passwd"), "$.task_id", "match pattern"),
    ("no requirements", _set("specification.requirements", []), "$.specification.requirements", "1 items"),
    (
        "zero judge timeout",
        _set("limits.timeout_minutes.judge", 0),
        "$.limits.timeout_minutes.judge",
        "bigger than 0",
    ),
    ("bad history entry", _bad_history_entry, "$.history[0].event", "string"),
    ("not an ISO time", _set("timestamps.deadline_at", "soon"), "$.timestamps.deadline_at", "ISO 8601"),
    ("allowed and forbidden", _both_allowed_and_forbidden, "$.constraints.forbidden_paths[1]", "secrets.env"),
]


@pytest.mark.parametrize(
    ("mutate", "json_path", "problem"),
    [case[1:] for case in BAD_CONTRACTS],
    ids=[case[0] for case in BAD_CONTRACTS],
)
def test_validation_names_the_file_and_the_json_path_of_the_bad_field(
    mutate: Callable[[dict[str, Any]], None], json_path: str, problem: str
) -> None:
    contract = fresh()
    mutate(contract)
    with pytest.raises(ContractInvalid) as caught:
        validate(contract, "/x/_handoff/TASK_CONTRACT.json")
    error = caught.value
    assert error.file == "/x/_handoff/TASK_CONTRACT.json"
    assert error.json_path == json_path
    assert problem in error.problem
    assert str(error).startswith(f"/x/_handoff/TASK_CONTRACT.json: {json_path}: ")
    assert exit_code_for(error) == 1


def test_a_contract_that_is_not_an_object_is_refused_at_the_root() -> None:
    with pytest.raises(ContractInvalid) as caught:
        validate(["not", "a", "contract"], "c.json")
    assert (caught.value.json_path, caught.value.problem) == ("$", "expected a JSON object")


def test_load_reports_malformed_json_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "TASK_CONTRACT.json"
    path.write_text('{\n  "task_id": "x",\n  oops\n}\n', encoding="utf-8")
    with pytest.raises(ContractInvalid) as caught:
        load(path)
    assert caught.value.file == str(path)
    assert caught.value.json_path == "$"
    assert "not valid JSON" in caught.value.problem and "line 3" in caught.value.problem


def test_load_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ContractInvalid, match="no such file"):
        load(tmp_path / "TASK_CONTRACT.json")


def test_save_stamps_updated_at_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "TASK_CONTRACT.json"
    contract = fresh()
    later = NOW + timedelta(minutes=5)
    save(path, contract, later)
    loaded = load(path)
    assert loaded["timestamps"]["updated_at"] == "2026-03-14T09:31:53Z"
    assert loaded["timestamps"]["created_at"] == "2026-03-14T09:26:53Z"
    assert loaded == contract
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_save_leaves_no_temporary_files_behind(tmp_path: Path) -> None:
    path = tmp_path / "TASK_CONTRACT.json"
    for minute in range(5):
        save(path, fresh(), NOW + timedelta(minutes=minute))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TASK_CONTRACT.json"]


def test_save_refuses_an_invalid_contract_and_leaves_the_file_exactly_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "TASK_CONTRACT.json"
    save(path, fresh(), NOW)
    before = path.read_bytes()
    broken = fresh()
    broken["status"] = "flying"
    with pytest.raises(ContractInvalid, match=r"\$\.status"):
        save(path, broken, NOW + timedelta(hours=1))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TASK_CONTRACT.json"]


def test_save_keeps_non_ascii_text_readable(tmp_path: Path) -> None:
    path = tmp_path / "TASK_CONTRACT.json"
    save(path, fresh(title="Grüße, 世界"), NOW)
    assert "Grüße, 世界" in path.read_text(encoding="utf-8")


# --- judge reports ----------------------------------------------------------------------------------


def test_a_judge_report_with_issues_suggestions_and_usage_validates() -> None:
    report = {
        "verdict": "FAIL",
        "blocking_issues": [
            {
                "id": "B1",
                "severity": "major",
                "file": "src/app.py",
                "line": 2,
                "description": "missing comma",
                "fix_required": "add it",
            }
        ],
        "suggestions": ["rename", {"text": "add a test"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "model": "judge:1"},
    }
    assert validate_judge_report(report) == report


@pytest.mark.parametrize(
    ("report", "json_path"),
    [
        ({"verdict": "MAYBE"}, "$.verdict"),
        ({"blocking_issues": []}, "$.verdict"),
        ({"verdict": "FAIL", "blocking_issues": [{"id": "B1"}]}, "$.blocking_issues[0].description"),
        ({"verdict": "FAIL", "blocking_issues": "lots"}, "$.blocking_issues"),
        ({"verdict": "FAIL", "blocking_issues": []}, "$.blocking_issues"),
        ({"verdict": "FAIL"}, "$.blocking_issues"),
        ({"verdict": "PASS", "usage": {"prompt_tokens": -3}}, "$.usage.prompt_tokens"),
        ([], "$"),
    ],
)
def test_a_bad_judge_report_names_the_file_and_field(report: Any, json_path: str) -> None:
    with pytest.raises(ContractInvalid) as caught:
        validate_judge_report(report, "JUDGE_REPORT.json")
    assert caught.value.file == "JUDGE_REPORT.json"
    assert caught.value.json_path == json_path


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        ("Verdict: PASS", "PASS"),
        ("**Verdict:** fail", "FAIL"),
        ("## Verdict: CONDITIONAL", "CONDITIONAL"),
        ("- verdict: critical_halt", "CRITICAL_HALT"),
    ],
)
def test_a_markdown_report_gives_its_verdict_line(line: str, verdict: str) -> None:
    assert judge_report_from_markdown(f"# Review\n\n{line}\n\nLooks fine.\n")["verdict"] == verdict


def test_markdown_bullets_under_a_blocking_heading_become_blocking_issues() -> None:
    text = (
        "# Review\nVerdict: FAIL\n\n## Blocking issues\n- greet() drops the comma\n* no test\n\n"
        "## Suggestions\n- rename greet\n"
    )
    report = judge_report_from_markdown(text)
    assert [i["description"] for i in report["blocking_issues"]] == ["greet() drops the comma", "no test"]
    assert [i["id"] for i in report["blocking_issues"]] == ["B1", "B2"]


def test_a_markdown_fail_in_prose_gives_the_prose_as_its_blocking_issue_and_one_without_any_is_refused() -> (
    None
):
    report = judge_report_from_markdown("# Review\n\nVerdict: FAIL\n\ngreet() drops the comma.\n")
    assert [i["description"] for i in report["blocking_issues"]] == ["greet() drops the comma."]
    with pytest.raises(ContractInvalid) as caught:
        judge_report_from_markdown("# Review\n\nVerdict: FAIL\n\n## Blocking issues\n\n", "JUDGE_REPORT.md")
    assert caught.value.json_path == "$.blocking_issues"


def test_a_markdown_report_without_or_with_an_unknown_verdict_is_refused() -> None:
    with pytest.raises(ContractInvalid, match="no 'Verdict: "):
        judge_report_from_markdown("# Review\nall good\n", "JUDGE_REPORT.md")
    with pytest.raises(ContractInvalid) as caught:
        judge_report_from_markdown("Verdict: SHIPIT\n", "JUDGE_REPORT.md")
    assert caught.value.file == "JUDGE_REPORT.md"
    assert "unknown verdict 'SHIPIT'" in caught.value.problem


# --- proposals ------------------------------------------------------------------------------------------


def test_a_markdown_proposal_gives_title_requirements_target_sources_and_commands() -> None:
    text = """# Add a polite greeting

Target: `src/app.py`
Source: src/util.py, src/names.py
Complexity: trivial

## Requirements
- greet() says "hello, NAME"
1. greet() strips NAME

## Acceptance criteria
- the comma is there

## Commands
- `pytest -q`
"""
    fields = proposal_fields(text)
    assert fields["title"] == "Add a polite greeting"
    assert fields["target_file"] == "src/app.py"
    assert fields["source_files"] == ["src/util.py", "src/names.py"]
    assert fields["complexity"] == "trivial"
    assert fields["requirements"] == ['greet() says "hello, NAME"', "greet() strips NAME"]
    assert fields["acceptance_criteria"] == ["the comma is there"]
    assert fields["acceptance_commands"] == ["pytest -q"]
    contract = new_contract(project="demo", now=NOW, roles={}, **fields)
    assert contract["constraints"]["allowed_paths"] == ["src/app.py", "src/names.py", "src/util.py"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("# Title\n\n- a bullet outside any Requirements section\n", "requirements"),
        ("just text\n", "title"),
        ("# T\n## Requirements\n- x\nComplexity: enormous\n", "complexity"),
    ],
)
def test_a_proposal_missing_its_parts_is_refused_naming_the_part(text: str, field: str) -> None:
    with pytest.raises(ContractInvalid) as caught:
        proposal_fields(text, "proposal.md")
    assert (caught.value.file, caught.value.json_path) == ("proposal.md", field)


def test_the_schema_accepts_what_json_round_trips() -> None:
    contract = fresh()
    assert validate(json.loads(json.dumps(contract))) == contract
    assert iso(parse_iso("2026-03-14T09:26:53Z")) == "2026-03-14T09:26:53Z"


# --- crash safety -----------------------------------------------------------------------------------


def _saver(path: Path, contract: dict[str, Any], ticks: int) -> None:
    """The child: save with a new attempt number, then say so on `ticks`, forever (until SIGKILL)."""
    try:
        n = 0
        while True:
            n += 1
            contract["attempt"] = n
            save(path, contract, NOW)
            os.write(ticks, b".")
    finally:
        os._exit(1)


def test_a_save_killed_at_random_moments_200_times_always_leaves_a_whole_valid_contract(
    fast_tmp: Path,
) -> None:
    path = fast_tmp / "TASK_CONTRACT.json"
    contract = fresh()
    # ~60 KB, several write() calls: big enough that a torn write would show.
    contract["history"] = [
        {
            "timestamp": "2026-03-14T09:26:53Z",
            "event": "lock_acquired",
            "from": "a",
            "to": "b",
            "reason": "x" * 150,
        }
        for _ in range(300)
    ]
    save(path, contract, NOW)
    rng = random.Random(20260314)
    landed_mid_cycle = 0
    for _ in range(200):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            os.close(read_end)
            _saver(path, contract, write_end)
        os.close(write_end)
        # Wait (bounded) for one whole save, so every kill lands inside the save loop, then let the
        # child run a random fraction of a few save cycles before the kill.
        ready, _, _ = select.select([read_end], [], [], 10.0)
        assert ready, "the saving child never finished a save"
        spin_until = time.perf_counter() + rng.uniform(0, 0.008)
        while time.perf_counter() < spin_until:
            pass
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        with os.fdopen(read_end, "rb") as ticks:
            completed = len(ticks.read())
        saved = load(path)  # parses and validates, or the test fails
        # The file holds the last completed save, or the one whose rename beat the kill.
        assert saved["attempt"] in (completed, completed + 1)
        assert saved["history"] == contract["history"]
        landed_mid_cycle += saved["attempt"] == completed + 1
    leftovers = [p.name for p in fast_tmp.iterdir() if p.name != "TASK_CONTRACT.json"]
    assert all(name.startswith(".TASK_CONTRACT.json.") and name.endswith(".tmp") for name in leftovers)
