"""What goes back to the model about its answer says what really happened: what was written, what was
not and why, what to send. Each test applies a real answer in a folder and reads the feedback against
the files afterwards."""

from __future__ import annotations

import json
from pathlib import Path

from hub.edits.answer import apply_answer, not_made_good, unapplied
from hub.edits.feedback import answer_feedback
from hub.edits.policy import Policy

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def block(search: str, replace: str, path: str = "calc.py") -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def setup(tmp_path: Path) -> Policy:
    (tmp_path / "calc.py").write_text(CALC, encoding="utf-8")
    (tmp_path / "util.py").write_text("X = 1\n", encoding="utf-8")
    return Policy(repo_root=tmp_path, allowed_paths=("calc.py", "util.py"))


def test_when_nothing_was_written_the_feedback_says_so_and_never_that_other_edits_were_applied(
    tmp_path: Path,
) -> None:
    policy = setup(tmp_path)
    parsed, result = apply_answer(block("    return a * b\n", "    return a / b\n"), policy)

    feedback = answer_feedback(parsed, result)

    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == CALC
    assert "were NOT applied; no file was written." in feedback
    assert "were applied" not in feedback and "was written (" not in feedback
    assert "## 1. calc.py: SEARCH text not found in the file" in feedback


def test_when_part_was_written_the_feedback_names_the_files_written(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    answer = block("    return a - b\n", "    return b - a\n") + "\n" + block("X = 2\n", "X = 3\n", "util.py")
    parsed, result = apply_answer(answer, policy)

    feedback = answer_feedback(parsed, result)

    assert "return b - a" in (tmp_path / "calc.py").read_text(encoding="utf-8")
    assert (tmp_path / "util.py").read_text(encoding="utf-8") == "X = 1\n"
    assert "the rest of your answer was written (calc.py)" in feedback
    assert "## 1. util.py:" in feedback


def test_a_cut_answer_is_fed_back_as_none_of_it_applied_with_where_it_ended(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    answer = block("    return a - b\n", "    return b - a\n") + "util.py\n```python\nX = "

    parsed, result = apply_answer(answer, policy, done_reason="stop")
    feedback = answer_feedback(parsed, result)

    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == CALC
    assert result.changed_files == ()
    assert feedback.startswith("Your answer was NOT applied, none of it: the answer ends inside the block")
    assert "for util.py (its fence has no closing line)" in feedback


def test_a_block_sent_again_that_fails_again_is_not_said_to_be_missing(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    answer = (
        block("    return a - b\n", "    return b - a\n")
        + "\n"
        + block("    return a * b\n", "    return 0\n")
    )
    first = apply_answer(answer, policy)
    assert len(first[1].failed_blocks) == 1

    # The retry sends the failed block again, still wrong.
    again = apply_answer(block("    return a ** b\n", "    return 0\n"), policy)

    assert not_made_good(first[1], *again, policy) == []
    assert unapplied(*again) == ["calc.py: a SEARCH block did not match (SEARCH text not found in the file)"]


def test_a_block_not_sent_again_is_said_to_be_missing(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    answer = (
        block("    return a - b\n", "    return b - a\n")
        + "\n"
        + block("    return a * b\n", "    return 0\n")
    )
    first = apply_answer(answer, policy)

    again = apply_answer(block("X = 1\n", "X = 2\n", "util.py"), policy)

    assert not_made_good(first[1], *again, policy) == [
        "calc.py: 1 of the 1 edit(s) refused the first time were not sent again"
    ]


def test_a_tool_call_that_does_not_edit_says_the_hub_runs_no_tools(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    call = json.dumps({"name": "read_file", "arguments": {"path": "calc.py"}})

    parsed, result = apply_answer(f"<tool_call>\n{call}\n</tool_call>\n", policy)

    assert parsed.edits == () and result.changed_files == ()
    assert parsed.problems == (
        "the tool call at line 1: the answer calls the tool 'read_file' as text; the hub runs no tools, and "
        "the files are in the prompt: answer with the edits themselves",
    )


def test_a_whole_file_in_a_write_file_call_is_a_whole_file_not_an_excerpt(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    new = CALC + "\n\ndef mul(a, b):\n    return a * b\n"
    call = json.dumps({"name": "write_file", "arguments": {"path": "calc.py", "content": new}})

    parsed, result = apply_answer(call, policy)

    assert result.changed_files == ("calc.py",) and result.refused == ()
    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == new
    assert answer_feedback(parsed, result) == ""


def test_a_refused_whole_file_says_no_file_was_written(tmp_path: Path) -> None:
    policy = setup(tmp_path)
    broken = CALC.replace("return a + b", "return (a + b")
    parsed, result = apply_answer(f"calc.py\n```python\n{broken}```\n", policy)

    feedback = answer_feedback(parsed, result)

    assert feedback.startswith("1 edit(s) were refused and NOT written; no file was written. For each")
    assert "calc.py: the result would not parse" in feedback
