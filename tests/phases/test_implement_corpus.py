"""Every case of the edit corpus (tests/edits/corpus/) through `hub run-implementer`, the path a model's
reply takes in the hub: FakeOllama serves the reply (twice: a refused answer is fed back once), the
implementer parses, checks and writes it. A case that must be refused leaves no applied edit and says
why per refused block; a case that must apply leaves exactly the expected files, committed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hub.testing import Reply
from hub.testing.corpus import Case, load_cases

from .conftest import IMPL, Pipeline, git

CORPUS = Path(__file__).resolve().parent.parent / "edits" / "corpus"
CASES = load_cases(CORPUS)


def test_the_corpus_has_cases_of_both_kinds_each_with_a_source() -> None:
    assert len(CASES) >= 40
    assert any(c.expected is None for c in CASES) and any(c.expected for c in CASES)
    assert all(c.source for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case_through_the_implementer(pipe: Pipeline, case: Case) -> None:
    pipe.commit("the case's files", case.originals)
    # A cut-off answer is continued once more per answer (the same answer continues with nothing).
    pipe.fake.script(IMPL, *[Reply(text=case.reply, done_reason=case.done_reason)] * 4)
    target = next(iter(case.originals), case.allowed[0])
    pipe.start(target_file=target, allowed_paths=list(case.allowed))

    outcome = pipe.implement()

    diffs = pipe.records("diff")
    applied = [d for d in diffs if d["outcome"] == "applied"]
    if case.expected is None:
        assert outcome.to_state == "pending_implementer", outcome
        assert applied == [], f"{case.name}: wrote {[d['path'] for d in applied]}"
        stall = pipe.contract()["handoff_data"]["stalls"][-1]
        assert stall["reason"] in ("malformed_output", "output_truncated")
        assert stall["detail"]
        # Each refusal is on record with its reason, for `hub log --task`.
        assert diffs and all(d["outcome"].startswith("refused: ") and len(d["outcome"]) > 20 for d in diffs)
        for path, text in case.originals.items():
            assert pipe.read(path) == text
    else:
        assert outcome.to_state == "pending_local_review", pipe.contract()["handoff_data"].get("stalls")
        branch = pipe.contract()["git"]["task_branch"]
        for path, text in case.expected.items():
            assert pipe.read(path) == text
            assert git(pipe.repo, "show", f"{branch}:{path}") == text.rstrip("\n")
    assert len(pipe.fake.chat_requests(IMPL)) <= (4 if case.done_reason == "length" else 2)


def test_hub_log_task_says_why_each_block_was_refused(pipe: Pipeline) -> None:
    case = next(c for c in CASES if c.name == "anchored_middle_invented")
    pipe.commit("the case's files", case.originals)
    pipe.fake.script(IMPL, case.reply, case.reply)
    task_id = pipe.start(target_file="calc.py", allowed_paths=["calc.py"])
    pipe.implement()

    done = subprocess.run(
        [sys.executable, "-m", "hub", "log", "--task", task_id],
        cwd=pipe.repo,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pipe.repo), "OLLAMA_HOST": pipe.fake.url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    refusals = [line for line in done.stdout.splitlines() if "refused: SEARCH block" in line]
    assert len(refusals) == 2  # the answer, and the same answer after the feedback
    assert all("first and last lines match lines 13 and 15" in line for line in refusals)
    # The feedback told the model which lines it got wrong.
    assert "self.total += x" in pipe.prompts()[1]
    report_detail = pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert "calc.py: a SEARCH block did not match" in report_detail


def test_a_cut_off_answer_is_continued_and_the_whole_change_applies(pipe: Pipeline) -> None:
    case = next(c for c in CASES if c.name == "cut_off_two_file_change")
    pipe.commit("the case's files", case.originals)
    cut = case.reply.rstrip("\n")  # cut in the middle of `return x * 2`
    pipe.fake.script(IMPL, Reply(text=cut, done_reason="length"), cut + " x * 2\n```\n")
    pipe.start(target_file="calc.py", allowed_paths=["calc.py", "util.py"])

    assert pipe.implement().to_state == "pending_local_review"

    assert "return b - a" in pipe.read("calc.py")
    assert pipe.read("util.py") == "def double(x):\n    return x * 2\n"
    continuation = pipe.fake.chat_requests(IMPL)[1]["messages"][-1]
    assert continuation == {"role": "assistant", "content": cut}
    call = pipe.records("model-call")[0]
    assert call["done_reason"] == "stop"


def test_a_cut_off_answer_that_cannot_be_continued_is_refused_whole_and_fed_back(pipe: Pipeline) -> None:
    case = next(c for c in CASES if c.name == "cut_off_two_file_change")
    pipe.commit("the case's files", case.originals)
    complete = case.reply.split("util.py")[0]
    # The continuation adds nothing and is cut again: the answer stays cut, none of it is applied.
    cut = Reply(text=case.reply, done_reason="length")
    pipe.fake.script(IMPL, cut, cut, complete)
    pipe.start(target_file="calc.py", allowed_paths=list(case.allowed))

    assert pipe.implement().to_state == "pending_local_review"

    assert "return b - a" in pipe.read("calc.py")
    assert [d["path"] for d in pipe.records("diff") if d["outcome"] == "applied"] == ["calc.py"]
    feedback = pipe.prompts()[2]
    assert "output_truncated" in feedback and "SEARCH/REPLACE" in feedback
    call = pipe.records("model-call")[0]
    assert call["done_reason"] == "length"


def test_stall_report_says_why_each_block_was_refused(pipe: Pipeline) -> None:
    case = next(c for c in CASES if c.name == "whole_file_rest_of_class_unchanged")
    pipe.commit("the case's files", case.originals)
    pipe.fake.script(IMPL, *[case.reply] * 4)
    pipe.start(target_file="calc.py", allowed_paths=["calc.py"])

    pipe.implement()
    assert pipe.implement().to_state == "erik_consultation"

    report = pipe.stall_text()
    assert report.count("placeholder '# ... rest of the class unchanged ...'") == 2
    assert pipe.read("calc.py") == case.originals["calc.py"]


# Issue 20's shapes, each a class: tolerance never inside a line (nbsp, padding), formats the pre-write
# check knows, cuts without a length signal, blank lines that do not drift, lost work, other tools' shapes.
ISSUE_20 = [
    "nbsp_inside_a_string_in_search",
    "column_padded_string_in_search",
    "yaml_indented_with_a_tab",
    "makefile_whole_file_recipes_in_spaces",
    "json_whole_file_broken",
    "toml_whole_file_broken",
    "html_block_drops_a_closing_tag",
    "readme_with_bare_inner_fences",
    "cut_inside_second_block_with_stop",
    "cut_inside_search_replace_with_stop",
    "blank_lines_one_in_search_two_in_file",
    "blank_lines_two_in_search_one_in_file",
    "readme_sample_output_with_dots",
    "new_version_then_the_original_for_reference",
    "file_without_path_then_a_shell_block",
    "json_tool_call_write_file",
    "tool_call_tags_edit_file_old_new",
    "fenced_json_write_tool_with_file_path",
    "openai_function_call_with_string_arguments",
    "tool_call_read_file_is_not_an_edit",
    "codex_begin_patch_envelope",
    "roo_start_line_header",
    "line_number_prefixes_in_search",
    "cline_dash_and_plus_markers",
    "cline_write_to_file_xml",
    "cline_replace_in_file_xml_with_dash_markers",
    "cline_write_to_file_xml_cut",
]


@pytest.mark.parametrize(
    "name",
    ["plain_search_replace", "whole_file_rest_of_class_unchanged", "cut_off_two_file_change", *ISSUE_20],
)
def test_corpus_cases_through_the_hub_run_implementer_command(pipe: Pipeline, name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    pipe.commit("the case's files", case.originals)
    # A cut-off answer is continued once more per answer (the same answer continues with nothing).
    pipe.fake.script(IMPL, *[Reply(text=case.reply, done_reason=case.done_reason)] * 4)
    pipe.start(target_file=next(iter(case.originals)), allowed_paths=list(case.allowed))

    done = subprocess.run(
        [sys.executable, "-m", "hub", "run-implementer", "--json"],
        cwd=pipe.repo,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pipe.repo), "OLLAMA_HOST": pipe.fake.url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    paths = {*case.originals, *(case.expected or {})}
    after = {p: pipe.read(p) if (pipe.worktree / p).exists() else None for p in paths}
    if case.expected is None:
        assert json.loads(done.stdout)["to"] == "pending_implementer"
        assert after == case.originals
        # The model was told why, for each refusal: the feedback round's prompt or the stall's detail.
        stall = pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
        assert stall and "were applied" not in stall
    else:
        assert json.loads(done.stdout)["to"] == "pending_local_review"
        assert after == {**case.originals, **case.expected}


def test_a_block_the_parser_dropped_beside_applied_ones_is_on_record(pipe: Pipeline) -> None:
    case = next(c for c in CASES if c.name == "plain_search_replace")
    pipe.commit("the case's files", case.originals)
    # A SEARCH whose markers are out of order (its ======= went missing), then a complete block.
    broken = "\n<<<<<<< SEARCH\nnever divided\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n"
    pipe.fake.script(IMPL, case.reply + broken, case.reply + broken)
    pipe.start(target_file=next(iter(case.originals)), allowed_paths=list(case.allowed))

    assert pipe.implement().to_state == "pending_local_review"

    outcomes = [d["outcome"] for d in pipe.records("diff")]
    assert "applied" in outcomes
    assert any(o.startswith("refused: SEARCH/REPLACE") and "out of order" in o for o in outcomes)


def test_an_answer_ending_inside_a_block_with_stop_is_refused_whole_and_the_feedback_says_so(
    pipe: Pipeline,
) -> None:
    case = next(c for c in CASES if c.name == "plain_search_replace")
    pipe.commit("the case's files", case.originals)
    cut = case.reply + "\n<<<<<<< SEARCH\nnever closed\n"
    # The server says "stop" (as npm ollama-mcp, which hides done_reason, would): still a cut.
    pipe.fake.script(IMPL, Reply(text=cut, done_reason="stop"), case.reply)
    pipe.start(target_file=next(iter(case.originals)), allowed_paths=list(case.allowed))

    assert pipe.implement().to_state == "pending_local_review"

    diffs = pipe.records("diff")
    assert diffs[0]["outcome"].startswith("refused: the answer ends inside the SEARCH/REPLACE block at line")
    assert [d["outcome"] for d in diffs[1:]] == ["applied"]  # only the complete answer was written
    feedback = pipe.prompts()[1]
    assert "Your answer was NOT applied, none of it" in feedback
    assert "were applied" not in feedback
