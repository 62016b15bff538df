"""Prompt templates: a repository's own prompts/ first, then the packaged ones; rendering the task into them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.phases import prompt_parts
from hub.phases.attempt_prompt import build_prompt, file_section

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver

# Every text the hub sends a model: whole prompts, and the pieces its feedback is made of.
PACKAGED = (
    "implementer",
    "implementer_system",
    "local_reviewer",
    "review_request",
    "reflection",
    "reflection_same",
    "judge_system",
    "second_look",
    "judge_issues",
    "judge_suggestions",
    "previous_stall",
    "notes",
    "output_truncated",
    "answer_cut_off",
    "edits_refused",
    "blocks_failed",
    "block_failed",
    "block_closest",
    "block_nothing_close",
    "search_replace_format",
    "partial_change",
    "partial_change_refused",
    "command_restored",
    "uncommitted_edit",
    "links_refused",
    "tool_result_text",
    "agent",
    "agent_system",
    "agent_remind",
    "agent_repeat",
    "agent_results",
    "agent_dropped",
    "agent_tests_failed",
    "agent_done_early",
    "agent_map",
    "agent_refused_again",
    "agent_advice_paths",
    "agent_advice_search",
    "agent_advice_other",
    "find_files",
    "find_files_again",
    "find_files_tests_failed",
    "find_files_wrong_files",
    "implementer_map",
)
PLACEHOLDER = re.compile(r"\$\{\w+\}")


@pytest.mark.parametrize("name", PACKAGED)
def test_every_packaged_template_is_found_without_a_repository_folder(tmp_path: Path, name: str) -> None:
    assert prompt_parts.template(tmp_path, name).strip()


def test_every_packaged_template_is_listed_here() -> None:
    from hub.core.templates import packaged_dir

    assert sorted(p.stem for p in packaged_dir("prompts").glob("*.md")) == sorted(PACKAGED)


def test_a_repositorys_own_template_overrides_the_packaged_one(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "implementer.md").write_text("ours: ${task_id}\n", encoding="utf-8")

    assert prompt_parts.render(tmp_path, "implementer", task_id="T-1") == "ours: T-1\n"
    # Only the template it holds is overridden; the others still come from the package.
    assert prompt_parts.template(tmp_path, "local_reviewer") == prompt_parts.template(
        tmp_path / "nowhere", "local_reviewer"
    )


def test_a_missing_template_names_both_places_it_looked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no prompt template nope\.md in .*prompts"):
        prompt_parts.template(tmp_path, "nope")


def test_rendering_keeps_braces_and_unknown_placeholders_literal(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "t.md").write_text("${code} {x} ${later}", encoding="utf-8")

    assert prompt_parts.render(tmp_path, "t", code="d = {'a': 1}") == "d = {'a': 1} {x} ${later}"


def test_a_fragment_leaves_out_only_the_line_end_its_file_closes_with(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "piece.md").write_text("say ${what}\n", encoding="utf-8")

    assert prompt_parts.fragment(tmp_path, "piece", what="hi\n") == "say hi\n"
    assert prompt_parts.render(tmp_path, "piece", what="hi") == "say hi\n"


def test_the_feedback_on_an_answer_is_worded_by_the_repositorys_own_templates(tmp_path: Path) -> None:
    from hub.edits.apply import ApplyResult, Refusal
    from hub.edits.edit import ParseResult
    from hub.edits.feedback import answer_feedback

    refused = ApplyResult((), (Refusal("a.py", "the new content is empty", retry=True),), ())
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "search_replace_format.md").write_text("Use our blocks.\n", encoding="utf-8")

    ours = answer_feedback(ParseResult((), ()), refused, tmp_path)
    packaged = answer_feedback(ParseResult((), ()), refused)

    assert ours.endswith("\n\nUse our blocks.\n")
    assert "- a.py: the new content is empty" in ours
    assert "<<<<<<< SEARCH" in packaged and "Use our blocks." not in packaged


def test_bullets_and_issue_lines_read_as_markdown_lists() -> None:
    issues: list[dict[str, Any]] = [
        {
            "severity": "major",
            "file": "a.py",
            "line": 3,
            "description": "off by one",
            "fix_required": "use <=",
        },
        {"severity": "minor", "description": "naming"},
    ]

    assert prompt_parts.bullets(["one", {"k": 1}]) == '- one\n- {"k": 1}'
    assert prompt_parts.bullets([]) == "(none)"
    assert prompt_parts.issue_lines(issues) == "- [major] a.py:3: off by one Fix: use <=\n- [minor] naming"


def test_the_implementer_prompt_holds_the_task_and_every_placeholder_is_filled(task: TaskDriver) -> None:
    task.new(
        requirements=["greet() says 'hello, NAME'"],
        acceptance_criteria=["greet('Ann') == 'hello, Ann'"],
        acceptance_commands=["pytest -q"],
        source_files=["README.md"],
        forbidden_paths=["secrets/"],
    )
    task.setup()

    prompt = build_prompt(task.run())

    assert not PLACEHOLDER.search(prompt)
    assert "greet() says 'hello, NAME'" in prompt
    assert "greet('Ann') == 'hello, Ann'" in prompt
    assert "`pytest -q`" in prompt
    assert "Never touch: secrets/." in prompt
    assert "### src/app.py" in prompt and "### README.md" in prompt
    assert "functions: greet (L1-L2)" in prompt
    assert "src/app.py\n```python\n...the whole file...\n```" in prompt


def test_a_markdown_source_with_its_own_fences_is_shown_whole(tmp_path: Path) -> None:
    text = "# Usage\n\n```python\nimport app\n```\n\nMore text after the example.\n"
    (tmp_path / "GUIDE.md").write_text(text, encoding="utf-8")

    section = file_section(tmp_path, "GUIDE.md")

    assert section.startswith("### GUIDE.md\n")
    assert "````" in section
    body = section.split("````", 1)[1].rsplit("````", 1)[0]
    assert body.endswith("More text after the example.\n")
    assert "```python\nimport app\n```" in body


def test_a_file_that_does_not_exist_yet_is_named_for_creation(tmp_path: Path) -> None:
    assert file_section(tmp_path, "src/new.py") == "### src/new.py\n\n(does not exist yet: create it)"


def test_the_review_request_fills_every_placeholder(task: TaskDriver) -> None:
    task.to_judge_review()

    text = task.hand.review_request.read_text(encoding="utf-8")

    assert not PLACEHOLDER.search(text)
    assert "greet() says 'hello, NAME'" in text
    assert '+    return "hello, " + name' in text
    # The path the hub reads the report from, not one beside the handoff folder it never looks in.
    task_id = task.contract()["task_id"]
    assert f"write `_handoff/tasks/{task_id}/JUDGE_REPORT.json`" in text and "hub report-judge" in text


def test_a_repositorys_template_that_is_not_utf8_is_a_config_error_naming_it(tmp_path: Path) -> None:
    from hub.core.errors import ConfigError

    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "implementer.md").write_bytes(b"caf\xe9 ${task_id}\n")
    with pytest.raises(ConfigError, match=r"implementer\.md: not UTF-8 text \(byte 3\)"):
        prompt_parts.template(tmp_path, "implementer")
