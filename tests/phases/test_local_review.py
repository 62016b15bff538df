"""`hub run-local-review` in-process: the static gate, the syntax check, the reviewer model and its verdicts."""

from __future__ import annotations

import json

import pytest

from hub.phases.local_review import ReviewParseError, parse_review
from hub.testing import Reply

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, git, whole_file

EVAL_APP = "def greet(name):\n    user_input = name\n    return eval(user_input)\n"


def implemented(pipe: Pipeline, content: str = GREET_FIXED, **fields: object) -> None:
    """A task whose implementer wrote `content` to src/app.py; it now waits for the local review."""
    pipe.fake.script(IMPL, whole_file("src/app.py", content))
    pipe.start(**fields)
    assert pipe.implement().to_state == "pending_local_review"


# --- parsing the reviewer's answer -----------------------------------------------------------------------


def test_a_review_in_a_json_fence_after_prose_is_parsed() -> None:
    text = 'Looks mostly fine.\n```json\n{"passed": true, "critical": false, "issues": [{"severity": "minor", "file": "a.py", "line": 3, "description": "typo"}]}\n```\nDone.'

    review = parse_review(text)

    assert review["passed"] is True and review["critical"] is False
    assert review["issues"] == [
        {"severity": "minor", "file": "a.py", "line": 3, "description": "typo", "source": "reviewer"}
    ]


def test_a_bare_review_object_with_braces_in_strings_is_parsed() -> None:
    text = 'Verdict: {"passed": false, "issues": ["uses {} instead of a dict literal", {"severity": "BLOCKER", "description": "x"}]}'

    review = parse_review(text)

    assert review["passed"] is False
    assert [i["description"] for i in review["issues"]] == ["uses {} instead of a dict literal", "x"]
    # An unknown severity is not allowed to escalate (or vanish): it counts as minor.
    assert [i["severity"] for i in review["issues"]] == ["minor", "minor"]


def test_a_critical_severity_makes_the_review_critical_even_without_the_flag() -> None:
    review = parse_review('{"passed": false, "issues": [{"severity": "critical", "description": "rm -rf"}]}')

    assert review["critical"] is True


@pytest.mark.parametrize(
    "text",
    ["The change looks good to me.", '{"ok": true}', '{"passed": "yes"}', "```json\n{passed: true}\n```"],
)
def test_an_answer_without_a_review_object_is_a_parse_error(text: str) -> None:
    with pytest.raises(ReviewParseError):
        parse_review(text)


# --- the phase ----------------------------------------------------------------------------------------------


def test_a_clean_review_sends_the_task_to_the_judge_with_a_review_request(pipe: Pipeline) -> None:
    implemented(pipe, acceptance_commands=["true"])
    pipe.fake.script(REV, PASS_REVIEW)

    outcome = pipe.review()

    assert (outcome.to_state, outcome.exit_code) == ("pending_judge_review", 0)
    contract = pipe.contract()
    assert contract["handoff_data"]["local_review_passed"] is True
    assert contract["history"][-1]["event"] == "local_pass"
    request = pipe.ctx.handoff.review_request.read_text(encoding="utf-8")
    assert "greet() says 'hello, NAME'" in request
    assert '+    return "hello, " + name' in request
    assert "`true` → exit 0" in request
    # The reviewer saw the diff and the requirements, and was told how to answer.
    prompt = pipe.prompts(REV)[0]
    assert '-    return "hello " + name' in prompt and "greet() says 'hello, NAME'" in prompt
    assert "`passed` is true when every requirement" in prompt and "`quote`: the line of the change" in prompt
    # Nothing in it a small model can copy as its answer (a 1.5B sent back "critical|major|minor").
    assert "critical|major|minor" not in prompt and '{"passed"' not in prompt
    assert "- `true`: passed" in prompt
    assert "${" not in prompt
    assert contract["cost"]["local_reviewer"]["calls"] == 1


def test_a_review_after_a_think_block_is_parsed(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.script(REV, Reply(text=f"```json\n{PASS_REVIEW}\n```", thinking='maybe {"passed": false}?'))

    assert pipe.review().to_state == "pending_judge_review"

    assert pipe.contract()["handoff_data"]["local_review_passed"] is True


def test_minor_issues_go_to_the_judge_recorded_in_the_review_request(pipe: Pipeline) -> None:
    implemented(pipe)
    minor = {"severity": "minor", "file": "src/app.py", "line": 2, "description": "prefer an f-string"}
    pipe.fake.script(REV, json.dumps({"passed": True, "critical": False, "issues": [minor]}))

    outcome = pipe.review()

    assert outcome.to_state == "pending_judge_review"
    data = pipe.contract()["handoff_data"]
    assert [i["description"] for i in data["local_review_issues"]] == ["prefer an f-string"]
    assert data["local_review_passed"] is False
    assert pipe.contract()["history"][-1]["event"] == "local_warn"
    request = pipe.ctx.handoff.review_request.read_text(encoding="utf-8")
    assert "[minor] src/app.py:2: prefer an f-string" in request
    # The reviewer said passed=true: the record says why it counts as not passed.
    why = "the reviewer answered passed=true but the review holds 1 issue(s) of its own (minor)"
    assert why in outcome.message and why in data["local_review_note"]
    assert outcome.message.startswith("local review found issues (1 issue(s)): ")
    assert why in pipe.contract()["history"][-1]["reason"]
    assert f"## Local review (passed: False; {why}" in request


def test_a_major_issue_goes_to_the_judge_as_not_passed(pipe: Pipeline) -> None:
    implemented(pipe)
    major = {"severity": "major", "file": "src/app.py", "line": 2, "description": "requirement not met"}
    pipe.fake.script(REV, json.dumps({"passed": False, "critical": False, "issues": [major]}))

    assert pipe.review().to_state == "pending_judge_review"

    assert pipe.contract()["handoff_data"]["local_review_passed"] is False


def test_a_security_rule_finding_halts_naming_the_rule_file_and_line(pipe: Pipeline) -> None:
    implemented(pipe, EVAL_APP)
    pipe.fake.script(REV, PASS_REVIEW)

    outcome = pipe.review()

    assert (outcome.to_state, outcome.exit_code) == ("erik_consultation", 4)
    contract = pipe.contract()
    assert contract["breaker"]["trigger"] == "critical_flaw"
    assert contract["history"][-1]["event"] == "critical_flaw"
    assert "rule py-eval-exec at src/app.py:3" in contract["breaker"]["reason"]
    halt = pipe.halt_text()
    assert "py-eval-exec" in halt and "src/app.py:3" in halt
    assert "- rule: py-eval-exec" in halt and "- line: 3" in halt
    assert "hub resume --to pending_local_review" in halt
    # A blocking rule stops the review before any model is asked.
    assert pipe.fake.chat_requests(REV) == []
    issue = contract["handoff_data"]["local_review_issues"][-1]
    assert (issue["severity"], issue["source"], issue["rule_id"]) == ("critical", "rules", "py-eval-exec")


def test_a_review_after_a_persons_commit_during_a_halt_checks_the_files_that_commit_added(
    pipe: Pipeline,
) -> None:
    implemented(pipe, EVAL_APP)
    assert pipe.review().to_state == "erik_consultation"
    # The person fixes the flagged file and, in the same commit, adds another the attempt never wrote.
    (pipe.worktree / "src" / "app.py").write_text(GREET_FIXED, encoding="utf-8")
    (pipe.worktree / "src" / "extra.py").write_text(
        "def run(code):\n    return eval(code)\n", encoding="utf-8"
    )
    git(pipe.worktree, "add", "-A")
    git(pipe.worktree, "commit", "-q", "-m", "a person's fix")
    assert pipe.resume("pending_local_review").to_state == "pending_local_review"
    pipe.fake.script(REV, PASS_REVIEW)

    outcome = pipe.review()

    assert outcome.to_state == "erik_consultation"
    assert "rule py-eval-exec at src/extra.py:2" in pipe.contract()["breaker"]["reason"]


def test_a_warning_rule_finding_is_shown_to_the_reviewer_and_the_judge(pipe: Pipeline) -> None:
    content = "def greet(name):\n    try:\n        return 'hello, ' + name\n    except:\n        return ''\n"
    implemented(pipe, content)
    pipe.fake.script(REV, PASS_REVIEW)

    assert pipe.review().to_state == "pending_judge_review"

    assert "py-bare-except" in pipe.prompts(REV)[0]
    issues = pipe.contract()["handoff_data"]["local_review_issues"]
    assert [(i["source"], i["line"]) for i in issues] == [("rules", 4)]
    assert pipe.contract()["history"][-1]["event"] == "local_warn"


def test_a_syntax_error_is_a_major_issue_for_the_judge(pipe: Pipeline) -> None:
    # The implementer never breaks a file that parsed (issue 12): this one was broken before the task.
    pipe.commit("a broken start", {"src/app.py": "def greet(name:\n    return 'hello ' + name\n"})
    implemented(pipe, "def greet(name:\n    return 'hello, ' + name\n")
    pipe.fake.script(REV, PASS_REVIEW)

    assert pipe.review().to_state == "pending_judge_review"

    data = pipe.contract()["handoff_data"]
    assert data["local_review_passed"] is False
    syntax = [i for i in data["local_review_issues"] if i["source"] == "syntax"]
    assert syntax and syntax[0]["file"] == "src/app.py" and syntax[0]["severity"] == "major"


SECURITY_FINDING = {
    "kind": "security",
    "severity": "critical",
    "file": "src/app.py",
    "line": 2,
    "quote": 'return "hello, " + name',
    "description": "drops the users table",
}


def test_a_security_finding_quoting_the_change_and_confirmed_by_a_second_look_halts(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.script(REV, json.dumps({"passed": False, "issues": [SECURITY_FINDING]}), "YES: it does.")

    outcome = pipe.review()

    assert outcome.exit_code == 4
    contract = pipe.contract()
    assert contract["breaker"]["trigger"] == "critical_flaw"
    assert "src/app.py:2: drops the users table (confirmed by a second look)" in contract["breaker"]["reason"]
    assert 'the line: return "hello, " + name' in contract["breaker"]["reason"]
    assert "drops the users table" in pipe.halt_text()
    assert not pipe.ctx.handoff.review_request.exists()
    # The second look was asked about the quoted line and the claim alone.
    second = pipe.prompts(REV)[1]
    assert '    return "hello, " + name' in second and "drops the users table" in second


def test_a_critical_finding_a_second_look_rejects_goes_to_the_judge_not_a_person(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.script(
        REV, json.dumps({"passed": False, "issues": [SECURITY_FINDING]}), "NO. It is a greeting."
    )

    outcome = pipe.review()

    assert (outcome.exit_code, outcome.to_state) == (0, "pending_judge_review")
    [issue] = pipe.contract()["handoff_data"]["local_review_issues"]
    assert issue["severity"] == "major"
    assert "not a halt: a second look at the quoted line did not agree" in issue["description"]
    assert "not a halt: a second look" in pipe.ctx.handoff.review_request.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "finding",
    [
        # The 1.5B's false alarms on correct code: no quote, or not about security at all.
        {"severity": "critical", "file": "src/app.py", "description": "does not check if name is a string"},
        {**SECURITY_FINDING, "quote": "DROP TABLE users"},
        {**SECURITY_FINDING, "kind": "bug"},
    ],
)
def test_a_critical_opinion_without_evidence_never_halts_and_costs_no_second_look(
    pipe: Pipeline, finding: dict[str, object]
) -> None:
    implemented(pipe)
    pipe.fake.script(REV, json.dumps({"passed": False, "critical": True, "issues": [finding]}))

    outcome = pipe.review()

    assert (outcome.exit_code, outcome.to_state) == (0, "pending_judge_review")
    [issue] = pipe.contract()["handoff_data"]["local_review_issues"]
    assert (
        issue["severity"] == "major"
        and "rated critical by the local reviewer; not a halt" in issue["description"]
    )
    assert len(pipe.prompts(REV)) == 1


def test_an_unparseable_review_is_strike_one_and_stays_in_local_review(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.script(REV, "Looks good to me!", PASS_REVIEW)

    first = pipe.review()

    assert (first.to_state, first.exit_code, first.data["stall"]) == (
        "pending_local_review",
        0,
        "malformed_output",
    )
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert (stall["role"], stall["raw_tail"]) == ("local_reviewer", "Looks good to me!")
    assert pipe.contract()["breaker"]["counters"]["review_stalls"] == 1

    second = pipe.review()

    assert second.to_state == "pending_judge_review"
    assert "review_stalls" not in pipe.contract()["breaker"]["counters"]


def test_a_second_unparseable_review_halts_with_a_stall_report(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.script(REV, "Looks good to me!", "LGTM, ship it")

    pipe.review()
    outcome = pipe.review()

    assert (outcome.to_state, outcome.exit_code) == ("erik_consultation", 4)
    assert pipe.contract()["breaker"]["trigger"] == "review_stall"
    report = pipe.stall_text()
    assert "local_reviewer" in report and "LGTM, ship it" in report
    assert "hub resume --to pending_local_review" in pipe.halt_text()


def test_an_unreachable_reviewer_halts_with_server_unavailable(pipe: Pipeline) -> None:
    implemented(pipe)
    pipe.fake.stop()

    outcome = pipe.review()

    assert outcome.exit_code == 4
    assert pipe.contract()["breaker"]["trigger"] == "server_unavailable"


def test_a_diff_too_big_for_the_reviewers_context_is_cut_to_fit_not_a_stall(pipe: Pipeline) -> None:
    # ~9,000 tokens of diff against the reviewer's num_ctx of 8192.
    big = GREET_FIXED + "".join(
        f"CONSTANT_NUMBER_{n:05d} = {n}  # a generated table entry\n" for n in range(700)
    )
    implemented(pipe, big)
    pipe.fake.script(REV, PASS_REVIEW)

    outcome = pipe.review()

    assert outcome.to_state == "pending_judge_review"
    prompt = pipe.prompts(REV)[0]
    assert "(diff cut" in prompt
    assert len(prompt) / 3.5 < 8192
    # The judge still gets the whole diff.
    assert "CONSTANT_NUMBER_00699" in pipe.ctx.handoff.review_request.read_text(encoding="utf-8")
