"""The tool-call corpus's reader and its scoring, which the corpus test and bench/bench_tool_calls.py
trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.testing.call_corpus import TOOLS, CallCase, Expected, Read, read_call_case, score


def _case(*expected: Expected) -> CallCase:
    return CallCase("c", "https://example.org/thread", "reply", TOOLS, expected)


def test_a_case_file_reads_into_its_reply_tools_and_expected_calls(tmp_path: Path) -> None:
    path = tmp_path / "shape.case"
    path.write_text(
        "%%%% case\nsource: https://example.org/1 (what it shows)\n%%%% reply\n"
        '{"name": "done"}\n%%%% expected\n[{"name": "done", "problem": "missing"}]\n',
        encoding="utf-8",
    )
    case = read_call_case(path)
    assert (case.source, case.reply, case.tools) == (
        "https://example.org/1 (what it shows)",
        '{"name": "done"}\n',
        TOOLS,
    )
    assert case.expected == (Expected("done", None, "missing"),)


def test_a_case_without_a_source_is_refused_naming_its_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.case"
    path.write_text("%%%% case\n%%%% reply\nx\n%%%% expected\n[]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^bad\.case: "):
        read_call_case(path)


def test_a_call_run_with_other_arguments_or_where_none_was_meant_is_wrong() -> None:
    read = _case(Expected("read_file", {"path": "a.py"}))
    assert score(read, [Read("read_file", {"path": "a.py"})]) == "read"
    assert score(read, [Read("read_file", {"path": "b.py"})]) == "wrong"
    assert score(read, [Read("read_file", {}, problem="why")]) == "refused"
    assert score(read, []) == "missed"
    refuse = _case(Expected("write_file", problem="cut off"))
    assert score(refuse, [Read("write_file", {"path": "a.py"})]) == "wrong"
    assert score(refuse, [Read("write_file", {}, problem="cut off")]) == "refused"
    assert score(_case(), []) == "read"
    assert score(_case(), [Read("done", {"summary": "x"})]) == "wrong"
