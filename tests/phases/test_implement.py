"""`hub run-implementer` in-process against a FakeOllama: what the model's answer becomes, and every way
an answer can fail (the two-strike rule itself is in test_stall.py)."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from hub.testing import Reply

from .conftest import APP_PY, GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, git, whole_file


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def greet_check(expected: str) -> str:
    """An acceptance command that prints what greet('x') returned and fails unless it is `expected`."""
    code = (
        "import sys; sys.path.insert(0, 'src'); import app; r = app.greet('x'); "
        f"print('greet returned', repr(r)); sys.exit(r != {expected!r})"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def test_whole_file_answer_is_written_committed_and_moves_to_local_review(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()

    outcome = pipe.implement()

    assert (outcome.from_state, outcome.to_state, outcome.exit_code) == (
        "pending_implementer",
        "pending_local_review",
        0,
    )
    assert pipe.read("src/app.py") == GREET_FIXED
    contract = pipe.contract()
    branch = contract["git"]["task_branch"]
    assert git(pipe.repo, "show", f"{branch}:src/app.py") + "\n" == GREET_FIXED
    assert git(pipe.worktree, "status", "--porcelain") == ""
    # The user's checkout saw nothing of it: still main, unchanged, clean.
    assert (pipe.repo / "src/app.py").read_text(encoding="utf-8") == APP_PY
    assert git(pipe.repo, "status", "--porcelain") == ""
    data = contract["handoff_data"]
    assert data["changed_files"] == ["src/app.py"]
    assert data["diff_summary"] == "1 files changed, +1 -1"
    assert contract["lock"] is None
    assert pipe.events() == ["lock_acquired", "code_written"]
    cost = contract["cost"]["implementer"]
    assert cost["calls"] == 1 and cost["tokens_in"] > 0 and cost["tokens_out"] > 0
    # The model saw the file it must change, with its outline, and the requirement.
    prompt = pipe.prompts()[0]
    assert 'return "hello " + name' in prompt
    assert "greet (L1-L2)" in prompt
    assert "greet() says 'hello, NAME'" in prompt


def test_think_block_and_prose_around_the_edit_are_ignored(pipe: Pipeline) -> None:
    decoy = whole_file("src/app.py", "def greet(name):\n    return 'DECOY'\n")
    answer = (
        "Sure! Here is the updated file, with the comma added as asked.\n\n"
        + whole_file("src/app.py", GREET_FIXED)
        + "\nThis keeps the function's signature unchanged. Let me know if you need anything else!\n"
    )
    pipe.fake.script(IMPL, Reply(text=answer, thinking=f"First I draft it:\n{decoy}\nNo, better:"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    # Provenance keeps the model's raw answer, think block included, and the thinking apart.
    call = pipe.records("model-call")[0]
    assert "DECOY" in call["thinking"] and call["response"].startswith("<think>")


FAREWELL_SOURCE = APP_PY + '\n\ndef farewell(name):\n    return "bye " + name\n'
FAREWELL_FIXED = (
    "src/app.py\n<<<<<<< SEARCH\n"
    'def farewell(name):\n    return "bye " + name\n=======\n'
    'def farewell(name):\n    return "bye, " + name\n>>>>>>> REPLACE\n'
)


def test_search_replace_with_one_failing_block_keeps_the_others_and_feeds_the_failure_back(
    pipe: Pipeline,
) -> None:
    source = FAREWELL_SOURCE
    pipe.commit("a second function", {"src/app.py": source})
    answer = (
        "src/app.py\n"
        "<<<<<<< SEARCH\n"
        '    return "hello " + name\n'
        "=======\n"
        '    return "hello, " + name\n'
        ">>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\n"
        "def farewel(person):\n"
        '    return "goodbye " + person\n'
        "=======\n"
        "def farewell(name):\n"
        '    return "bye, " + name\n'
        ">>>>>>> REPLACE\n"
    )
    pipe.fake.script(IMPL, answer, FAREWELL_FIXED)
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == source.replace('"hello "', '"hello, "').replace('"bye "', '"bye, "')
    prompts = pipe.prompts()
    assert len(prompts) == 2
    feedback = prompts[1]
    assert "did not match" in feedback
    assert "def farewel(person):" in feedback
    assert "5 | def farewell(name):" in feedback
    assert [r["purpose"] for r in pipe.records("model-call")] == ["implement", "block-feedback"]


def test_a_change_still_partly_refused_after_feedback_is_a_partial_change_stall_naming_the_blocks(
    pipe: Pipeline,
) -> None:
    pipe.commit("a second function", {"src/app.py": FAREWELL_SOURCE})
    answer = (
        "src/app.py\n<<<<<<< SEARCH\n"
        '    return "hello " + name\n=======\n    return "hello, " + name\n>>>>>>> REPLACE\n'
        "<<<<<<< SEARCH\n"
        'def farewel(person):\n    return "goodbye " + person\n=======\n'
        'def farewell(name):\n    return "bye, " + name\n>>>>>>> REPLACE\n'
    )
    pipe.fake.script(IMPL, answer, "I cannot find it.")
    pipe.start()

    outcome = pipe.implement()

    # Not sent to review as if whole: a strike, with the unapplied block named for the next attempt.
    assert outcome.to_state == "pending_implementer"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "partial_change"
    assert "src/app.py: a SEARCH block did not match" in stall["detail"]
    assert "malformed_output" in stall["detail"]  # what became of the answer to the feedback
    # What was written is kept in a stash, not thrown away; the next attempt starts clean.
    assert pipe.contract()["handoff_data"]["stashes"]
    assert pipe.read("src/app.py") == FAREWELL_SOURCE


GREET_BLOCK = (
    '<<<<<<< SEARCH\n    return "hello " + name\n=======\n    return "hello, " + name\n>>>>>>> REPLACE\n'
)
FAREWEL_BLOCK = (  # misquotes the function's name: does not match
    "<<<<<<< SEARCH\n"
    'def farewel(person):\n    return "goodbye " + person\n=======\n'
    'def farewell(name):\n    return "bye, " + name\n>>>>>>> REPLACE\n'
)


def test_blocks_already_written_that_the_answer_to_feedback_sends_again_are_not_applied_twice(
    pipe: Pipeline,
) -> None:
    pipe.commit("a second function", {"src/app.py": FAREWELL_SOURCE})
    # The whole answer again, its failed block fixed: the greet block's SEARCH is gone from the file now.
    again = "src/app.py\n" + GREET_BLOCK + FAREWELL_FIXED.split("\n", 1)[1]
    pipe.fake.script(IMPL, "src/app.py\n" + GREET_BLOCK + FAREWEL_BLOCK, again)
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    expected = FAREWELL_SOURCE.replace('"hello "', '"hello, "').replace('"bye "', '"bye, "')
    assert pipe.read("src/app.py") == expected


def test_a_failed_block_the_answer_to_feedback_leaves_out_is_a_partial_change(pipe: Pipeline) -> None:
    source = FAREWELL_SOURCE + '\n\ndef welcome(name):\n    return "welcome " + name\n'
    pipe.commit("two more functions", {"src/app.py": source})
    welcom_block = (  # misquoted too
        "<<<<<<< SEARCH\n"
        'def welcom(name):\n    return "welcome " + name\n=======\n'
        'def welcome(name):\n    return "welcome, " + name\n>>>>>>> REPLACE\n'
    )
    # Two blocks fail; the answer to the feedback fixes one and says nothing of the other.
    pipe.fake.script(IMPL, "src/app.py\n" + GREET_BLOCK + FAREWEL_BLOCK + welcom_block, FAREWELL_FIXED)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "partial_change"
    assert "src/app.py: 1 of the 2 edit(s) refused the first time were not sent again" in stall["detail"]
    assert pipe.read("src/app.py") == source  # the attempt's writes are stashed, not half kept


def test_a_search_block_fixed_after_feedback_is_applied(pipe: Pipeline) -> None:
    wrong = (
        "src/app.py\n<<<<<<< SEARCH\n    return 'hello ' + nam\n=======\n    return 'x'\n>>>>>>> REPLACE\n"
    )
    right = (
        "src/app.py\n<<<<<<< SEARCH\n"
        '    return "hello " + name\n=======\n    return "hello, " + name\n>>>>>>> REPLACE\n'
    )
    pipe.fake.script(IMPL, wrong, right)
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    assert '2 |     return "hello " + name' in pipe.prompts()[1]


def test_rework_prompt_contains_the_judges_blocking_issues(pipe: Pipeline) -> None:
    pipe.fake.script(
        IMPL, whole_file("src/app.py", GREET_FIXED), whole_file("src/app.py", GREET_FIXED + "\n# ok\n")
    )
    pipe.fake.script(REV, PASS_REVIEW)
    pipe.start()
    pipe.implement()
    pipe.review()
    issue = {
        "id": "B1",
        "severity": "major",
        "file": "src/app.py",
        "line": 2,
        "description": "greet() must strip surrounding whitespace from NAME",
        "fix_required": "call name.strip() before joining",
    }

    assert pipe.judge("FAIL", [issue]).to_state == "pending_implementer"
    assert pipe.contract()["attempt"] == 2
    assert pipe.implement().to_state == "pending_local_review"

    rework = pipe.prompts()[1]
    assert "The judge rated the last attempt FAIL" in rework
    assert "[major] src/app.py:2: greet() must strip surrounding whitespace from NAME" in rework
    assert "Fix: call name.strip() before joining" in rework
    assert "judge rated" not in pipe.prompts()[0]


def test_acceptance_failure_is_fed_back_and_the_fixed_answer_moves_on(pipe: Pipeline) -> None:
    pipe.fake.script(
        IMPL,
        whole_file("src/app.py", 'def greet(name):\n    return "hi " + name\n'),
        whole_file("src/app.py", GREET_FIXED),
    )
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    reflection = pipe.prompts()[1]
    assert "acceptance commands failed" in reflection
    assert "greet returned 'hi x'" in reflection
    assert "(exited 1)" in reflection
    # The model sees the code the failure is about, its own answer, not the file as it was before.
    assert 'return "hi " + name' in reflection and 'return "hello " + name' not in reflection
    results = pipe.contract()["handoff_data"]["acceptance_results"]
    assert [r["exit_code"] for r in results] == [0]
    commands = pipe.records("command")
    assert [c["exit_code"] for c in commands] == [1, 0]
    assert "greet returned 'hi x'" in commands[0]["stdout"]


def test_an_answer_that_changes_nothing_is_not_tested_again_and_the_next_is_sampled_warmer(
    pipe: Pipeline,
) -> None:
    wrong = whole_file("src/app.py", 'def greet(name):\n    return "hi " + name\n')
    pipe.fake.script(IMPL, wrong, wrong, whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"

    # The same code twice: the commands ran once for it, then once for the fix.
    assert [c["exit_code"] for c in pipe.records("command")] == [1, 0]
    calls = [r.body for r in pipe.fake.requests if r.body and r.path == "/api/chat"]
    temperatures = [b["options"]["temperature"] for b in calls if b["model"] == IMPL]
    assert temperatures == [0.2, 0.2, 0.7]
    assert "Your last answer was the same code" in pipe.prompts()[2]
    assert "Your last answer was the same code" not in pipe.prompts()[1]


def test_acceptance_still_failing_after_the_reflections_is_a_tests_failed_stall(pipe: Pipeline) -> None:
    wrong = [whole_file("src/app.py", f'def greet(name):\n    return "hi{n} " + name\n') for n in range(3)]
    pipe.fake.script(IMPL, *wrong)
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.data["stall"]) == ("pending_implementer", "tests_failed")
    assert len(pipe.prompts()) == 3
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert "greet returned 'hi2 x'" in stall["detail"]
    # Nothing the model wrote is thrown away: the failed attempt's work waits in a named stash.
    task_id = pipe.contract()["task_id"]
    assert pipe.contract()["handoff_data"]["stashes"] == [f"refs/hub/stashes/{task_id}/attempt-1-stalled"]
    assert git(pipe.repo, "stash", "list") == ""
    assert git(pipe.worktree, "status", "--porcelain") == ""
    assert pipe.read("src/app.py") == APP_PY


def test_hub_log_task_says_what_the_reflection_calls_were_and_keeps_test_output_to_its_line(
    pipe: Pipeline,
) -> None:
    wrong = [whole_file("src/app.py", f'def greet(name):\n    return "hi{n} " + name\n') for n in range(3)]
    pipe.fake.script(IMPL, *wrong)
    noisy = "import sys\nfor n in range(40):\n    print('FAILED test_greet case', n)\nsys.exit(1)"
    task_id = pipe.start(acceptance_commands=[f"{shlex.quote(sys.executable)} -c {shlex.quote(noisy)}"])
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
    lines = done.stdout.splitlines()
    assert all(line[:2] == "20" for line in lines), [line for line in lines if line[:2] != "20"][:3]
    calls = [line.split("  ")[2] for line in lines if "model-call" in line]
    assert calls == [
        f"implementer writes the change: {IMPL}",
        f"implementer fixes what the acceptance commands reported (reflection 1): {IMPL}",
        f"implementer fixes what the acceptance commands reported (reflection 2): {IMPL}",
    ]
    [stall] = [line for line in lines if "-[stall]->" in line]
    assert "FAILED test_greet case 0 | FAILED test_greet case 1" in stall


def test_an_answer_stuck_in_a_loop_is_a_runaway_stall_the_next_attempt_is_told_of(pipe: Pipeline) -> None:
    loop = "src/app.py\n```python\ndef greet(name):\n" + "".join(
        f'    name = name.replace("{c}", "")\n' for c in "-.,!?;:()[]{}|/<>@#$%^&*" * 20
    )
    pipe.fake.script(IMPL, Reply(text=loop, chunk_chars=50), whole_file("src/app.py", GREET_FIXED))
    pipe.start()

    first = pipe.implement()

    assert (first.to_state, first.data["stall"]) == ("pending_implementer", "runaway_output")
    assert "the answer repeats itself" in pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert pipe.implement().to_state == "pending_local_review"
    assert "Your previous attempt failed (runaway_output)" in pipe.prompts()[1]


def test_empty_output_is_strike_one_and_the_next_run_succeeds(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, Reply(text=""), whole_file("src/app.py", GREET_FIXED))
    pipe.start()

    first = pipe.implement()

    assert (first.to_state, first.exit_code, first.data["stall"]) == (
        "pending_implementer",
        0,
        "empty_output",
    )
    contract = pipe.contract()
    assert contract["attempt"] == 2
    assert contract["breaker"]["counters"]["stall_strikes"] == 1
    assert pipe.events() == ["lock_acquired", "stall", "retry"]

    second = pipe.implement()

    assert second.to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED
    assert "Your previous attempt failed (empty_output)" in pipe.prompts()[1]
    assert "stall_strikes" not in pipe.contract()["breaker"]["counters"]


def test_an_answer_without_any_edit_is_malformed_output_saying_why(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, "I would add a comma after hello.")
    pipe.start()

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert "no fenced code block" in stall["detail"]
    assert stall["raw_tail"] == "I would add a comma after hello."


def test_a_path_escaping_with_dotdot_is_refused_and_nothing_is_written_outside(
    pipe: Pipeline, outside: Path
) -> None:
    before = tree(outside.parent / "outside")
    pipe.fake.script(IMPL, whole_file("../outside/evil.py", "print('pwned')\n"))
    # A contract naming ../outside is refused outright (tests/test_bounds.py); the broadest one it allows:
    pipe.start(allowed_paths=["**"])

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    assert tree(outside) == before
    assert not (pipe.repo.parent / "outside" / "evil.py").exists()
    detail = pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert "../outside/evil.py" in detail and "escapes the repository" in detail
    refused = pipe.records("diff")
    assert refused[0]["outcome"].startswith("refused: path escapes the repository")


def test_an_absolute_path_is_refused(pipe: Pipeline, outside: Path) -> None:
    target = outside / "evil.py"
    pipe.fake.script(IMPL, whole_file(str(target), "print('pwned')\n"))
    pipe.start(allowed_paths=["src"])

    assert pipe.implement().data["stall"] == "malformed_output"

    assert not target.exists()
    assert "absolute path" in pipe.contract()["handoff_data"]["stalls"][-1]["detail"]


def test_a_symlinked_folder_pointing_outside_is_refused(pipe: Pipeline, outside: Path) -> None:
    (pipe.repo / "src" / "link").symlink_to(outside, target_is_directory=True)
    pipe.commit("a link out of the repository")
    before = tree(outside)
    pipe.fake.script(IMPL, whole_file("src/link/evil.py", "print('pwned')\n"))
    pipe.start(allowed_paths=["src"])

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    assert tree(outside) == before
    detail = pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert "src/link/evil.py" in detail and "symlink" in detail


def test_a_forbidden_path_is_refused_even_inside_the_allowed_ones(pipe: Pipeline) -> None:
    pipe.commit("settings", {"src/settings.py": "DEBUG = False\n"})
    pipe.fake.script(IMPL, whole_file("src/settings.py", "DEBUG = True\n"))
    pipe.start(allowed_paths=["src"], forbidden_paths=["src/settings.py"])

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    assert pipe.read("src/settings.py") == "DEBUG = False\n"
    assert "forbidden_paths" in pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert "Never touch: src/settings.py." in pipe.prompts()[0]


def test_a_refused_edit_beside_an_allowed_one_keeps_the_allowed_one(pipe: Pipeline) -> None:
    answer = whole_file("src/app.py", GREET_FIXED) + whole_file("hub.yaml", "project: pwned\n", "yaml")
    pipe.fake.script(IMPL, answer)
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    assert "pwned" not in pipe.read("hub.yaml")
    outcomes = {r["path"]: r["outcome"] for r in pipe.records("diff")}
    assert outcomes["src/app.py"] == "applied"
    assert outcomes["hub.yaml"].startswith("refused: path is the hub's control file")


_BODY = "".join(f"    total = total + x * {k} - {k * 3}\n" for k in range(12))
# ~8,000 estimated tokens whole, ~600 as an outline.
BIG_MODULE = "".join(f"def value_{n}(x):\n    total = 0\n{_BODY}    return total\n\n" for n in range(40))


def test_a_prompt_too_big_even_with_outlines_halts_with_the_fix_and_sends_nothing(pipe: Pipeline) -> None:
    pipe.configure(num_ctx=256)
    pipe.commit("a big module", {"src/big.py": BIG_MODULE})
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start(source_files=["src/big.py"])

    outcome = pipe.implement()

    assert (outcome.to_state, outcome.data["trigger"]) == ("erik_consultation", "context_overflow")
    assert pipe.fake.chat_requests(IMPL) == []
    halt = pipe.halt_text()
    assert "does not fit num_ctx=256" in halt
    assert "outlines" in halt and "num_ctx in hub.yaml" in halt
    assert pipe.contract()["breaker"]["counters"].get("stall_strikes", 0) == 0  # no strike was spent
    assert pipe.read("src/app.py") == APP_PY


def test_a_prompt_that_does_not_fit_is_retried_smaller_with_outlines_never_unchanged(pipe: Pipeline) -> None:
    pipe.configure(num_ctx=8192)
    pipe.commit("a big module", {"src/big.py": BIG_MODULE})
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start(source_files=["src/big.py"], target_file="src/app.py")

    assert pipe.implement().to_state == "pending_local_review"

    [sent] = pipe.fake.chat_requests(IMPL)
    prompt = sent["messages"][-1]["content"]
    assert "src/big.py (outline only" in prompt and "total = total + x" not in prompt
    refused, sent_record = pipe.records("model-call")
    assert (refused["purpose"], sent_record["purpose"]) == ("implement", "implement-outlines")
    assert refused["outcome"].startswith("ContextOverflow: prompt of ~")


def test_a_silently_truncated_prompt_is_retried_with_outlines(pipe: Pipeline) -> None:
    pipe.commit("a module", {"src/big.py": BIG_MODULE[: len(BIG_MODULE) // 4]})
    pipe.fake.script(
        IMPL,
        Reply(text=whole_file("src/app.py", GREET_FIXED), prompt_eval_count=40),
        whole_file("src/app.py", GREET_FIXED),
    )
    pipe.start(source_files=["src/big.py"], target_file="src/app.py")

    assert pipe.implement().to_state == "pending_local_review"

    calls = pipe.records("model-call")
    assert [(c["purpose"], c["truncated"]) for c in calls] == [
        ("implement", True),
        ("implement-outlines", False),
    ]
    assert "src/big.py (outline only" in pipe.prompts()[-1]


def test_a_low_prompt_count_again_after_the_outlines_retry_goes_on_and_does_not_halt(pipe: Pipeline) -> None:
    # Ollama counts only what its prompt cache lacked: a small count is no proof of a cut.
    pipe.commit("a module", {"src/big.py": BIG_MODULE[: len(BIG_MODULE) // 4]})
    answer = whole_file("src/app.py", GREET_FIXED)
    pipe.fake.script(IMPL, Reply(text=answer, prompt_eval_count=40), Reply(text=answer, prompt_eval_count=40))
    pipe.start(source_files=["src/big.py"], target_file="src/app.py")

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    calls = pipe.records("model-call")
    assert [(c["purpose"], c["truncated"]) for c in calls] == [
        ("implement", True),
        ("implement-outlines", True),  # on record for review and the judge
    ]


def test_a_count_that_fills_the_window_is_a_cut_and_halts_with_the_fix(pipe: Pipeline) -> None:
    pipe.commit("a module", {"src/big.py": BIG_MODULE[: len(BIG_MODULE) // 4]})
    answer = whole_file("src/app.py", GREET_FIXED)
    pipe.fake.script(
        IMPL, Reply(text=answer, prompt_eval_count=8192), Reply(text=answer, prompt_eval_count=8192)
    )
    pipe.start(source_files=["src/big.py"], target_file="src/app.py")

    assert pipe.implement().to_state == "erik_consultation"
    assert (pipe.repo / "src/app.py").read_text(encoding="utf-8") != GREET_FIXED


def test_an_unreachable_ollama_halts_with_server_unavailable_and_how_to_start_ollama(
    git_repo: Path, fake: object
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    pipe = Pipeline(git_repo, fake, ollama_host=closed)  # type: ignore[arg-type]
    pipe.start()

    with capture_logs() as logs:
        outcome = pipe.implement()

    assert (outcome.to_state, outcome.exit_code) == ("erik_consultation", 4)
    contract = pipe.contract()
    assert contract["breaker"]["trigger"] == "server_unavailable"
    assert "; fix: start Ollama (`ollama serve`) or point OLLAMA_HOST" in contract["breaker"]["reason"]
    assert contract["lock"] is None
    assert "server_wait" not in contract["handoff_data"]
    halt = pipe.halt_text()
    assert "`server_unavailable`" in halt and closed.split("//")[1] in halt
    # Never reached for this task: given up on after 2 minutes, not limits.server_wait_minutes' 30.
    assert "still unavailable after waiting 2.0 min" in halt and "never reached for this task" in halt
    assert "hub resume --to pending_implementer" in halt
    # Back-off: 1, 2, 4, 8, 16, then every 30 s, the last pause cut to end at the limit.
    assert pipe.pauses == [1, 2, 4, 8, 16, 30, 30, 29]
    # Said at once, once: what is missing, how to start it, that Ctrl-C is safe, the key.
    (said,) = [line["fix"] for line in logs if line["event"] == "server.not_reached"]
    assert closed.split("//")[1] in said and "`ollama serve`" in said and "OLLAMA_HOST" in said
    assert "Ctrl-C is safe" in said and "limits.server_wait_minutes" in said and "hub doctor" in said


def test_a_server_that_went_away_mid_task_is_waited_for_the_whole_server_wait(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    assert pipe.implement().to_state == "pending_local_review"
    pipe.fake.stop()

    with capture_logs() as logs:
        outcome = pipe.review()

    assert (outcome.to_state, pipe.contract()["breaker"]["trigger"]) == (
        "erik_consultation",
        "server_unavailable",
    )
    assert "still unavailable after waiting 30.0 min" in pipe.halt_text()  # limits.server_wait_minutes: 30
    assert pipe.pauses[:6] == [1, 2, 4, 8, 16, 30] and sum(pipe.pauses) == 30 * 60
    assert not [line for line in logs if line["event"] == "server.not_reached"]


def test_a_server_killed_and_restarted_mid_task_is_waited_for_and_the_task_goes_on(pipe: Pipeline) -> None:
    from hub.phases.status import status

    pipe.start()
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.stop()
    seen: list[dict[str, object]] = []
    calls: list[dict[str, object]] = []

    def restart_on_third_pause(n: int) -> None:
        seen.append(status(pipe.ctx)["tasks"][0]["server_wait"])
        calls.append(status(pipe.ctx)["tasks"][0]["call"])
        if n == 3:
            pipe.fake.start()  # the same port, as a restarted Ollama

    pipe.on_pause = restart_on_third_pause
    outcome = pipe.implement()

    assert outcome.to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED
    assert pipe.pauses == [1, 2, 4]
    # `hub status` showed the wait while it lasted, and the contract forgets it after.
    assert [w["attempts"] for w in seen] == [1, 2, 3]  # type: ignore[index]
    assert "Connection refused" in str(seen[0]["error"])  # type: ignore[index]
    # The live view (a terminal's line, `hub status`'s "calling") says what the call waits for.
    assert [c["waiting"] for c in calls] == [
        f"the model server (try {n} in {p:g} s)" for n, p in [(2, 1), (3, 2), (4, 4)]
    ]
    assert {c["role"] for c in calls} == {"implementer"}  # as the model call itself is named, not the phase
    assert "server_wait" not in pipe.contract()["handoff_data"]
    assert "circuit_breaker_halt" not in pipe.events() and "stall" not in pipe.events()


def test_a_connection_reset_mid_stream_waits_and_calls_again_without_a_strike(pipe: Pipeline) -> None:
    pipe.start()
    pipe.fake.script(
        IMPL,
        Reply(text=whole_file("src/app.py", GREET_FIXED), drop_after_chars=20),
        whole_file("src/app.py", GREET_FIXED),
    )

    outcome = pipe.implement()

    assert outcome.to_state == "pending_local_review"
    assert pipe.pauses == [1]
    assert len(pipe.fake.chat_requests(IMPL)) == 2
    assert "stall_strikes" not in pipe.contract()["breaker"].get("counters", {})


def test_a_model_the_server_lacks_halts_naming_it(pipe: Pipeline) -> None:
    pipe.configure(extra_yaml="")
    (pipe.repo / "hub.yaml").write_text(
        (pipe.repo / "hub.yaml").read_text(encoding="utf-8").replace(f"model: {IMPL}", "model: nowhere-7b"),
        encoding="utf-8",
    )
    pipe.commit("a model nobody has")
    pipe.start()

    outcome = pipe.implement()

    assert outcome.exit_code == 4
    assert pipe.contract()["breaker"]["trigger"] == "model_not_found"
    assert pipe.contract()["breaker"]["reason"].endswith("; fix: ollama pull nowhere-7b")
    assert "ollama pull nowhere-7b" in pipe.halt_text()
    assert pipe.pauses == []  # a missing model is not an outage: no wait


def test_a_repositorys_own_implementer_prompt_is_what_the_model_sees(pipe: Pipeline) -> None:
    pipe.commit(
        "our own prompt",
        {"prompts/implementer.md": "HOUSE PROMPT for ${task_id}\n${requirements}\n${files}\n"},
    )
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    task_id = pipe.start()

    pipe.implement()

    prompt = pipe.prompts()[0]
    assert prompt.startswith(f"HOUSE PROMPT for {task_id}\n- greet() says 'hello, NAME'")
    assert "How to answer" not in prompt


@pytest.mark.parametrize("state", ["pending_local_review", "erik_consultation"])
def test_run_implementer_refuses_a_task_in_another_state(pipe: Pipeline, state: str) -> None:
    from hub.core.errors import TaskHalted, WrongState

    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED), "")
    pipe.start()
    pipe.implement()
    if state == "erik_consultation":
        from hub.state import handoff

        handoff.record(pipe.ctx.handoff, pipe.contract(), "circuit_breaker_halt", pipe.ctx.clock())
    requests = len(pipe.fake.chat_requests(IMPL))

    with pytest.raises(TaskHalted if state == "erik_consultation" else WrongState):
        pipe.implement()

    assert len(pipe.fake.chat_requests(IMPL)) == requests


def test_search_blocks_that_fail_again_after_feedback_are_a_malformed_output_stall(pipe: Pipeline) -> None:
    wrong = (
        "src/app.py\n<<<<<<< SEARCH\n    return 'hello ' + nam\n=======\n    return 'x'\n>>>>>>> REPLACE\n"
    )
    pipe.fake.script(IMPL, wrong, wrong)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    assert len(pipe.prompts()) == 2
    detail = pipe.contract()["handoff_data"]["stalls"][-1]["detail"]
    assert "src/app.py: a SEARCH block did not match" in detail
    assert pipe.read("src/app.py") == APP_PY


def test_an_edit_over_max_diff_lines_is_refused(pipe: Pipeline) -> None:
    big = "".join(f"LINE_{n} = {n}\n" for n in range(30)) + GREET_FIXED
    pipe.fake.script(IMPL, whole_file("src/app.py", big))
    pipe.start(max_diff_lines=10)

    outcome = pipe.implement()

    assert outcome.data["stall"] == "malformed_output"
    assert pipe.read("src/app.py") == APP_PY
    assert "max_diff_lines" in pipe.contract()["handoff_data"]["stalls"][-1]["detail"]


def test_an_acceptance_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    from hub.phases.acceptance import run_command

    # The background sleep holds the output pipe open: reading the output ends quickly only if the whole
    # process group was killed, not just the shell.
    result = run_command("sleep 30 & sleep 30", tmp_path, timeout=0.3)

    assert result.timed_out and not result.ok
    assert result.seconds < 10
    assert "timed out" in result.feedback()


def test_hub_new_and_setup_task_warn_when_the_tasks_files_cannot_fit_naming_the_fix(pipe: Pipeline) -> None:
    from hub.phases.setup import create, setup_task

    pipe.configure(num_ctx=4096)
    pipe.commit("a big module", {"src/big.py": BIG_MODULE})
    fields = {"title": "Big", "requirements": ["do it"], "target_file": "src/big.py", "complexity": "minor"}

    created = create(pipe.ctx, fields)
    set_up = setup_task(pipe.ctx)

    for outcome in (created, set_up):
        warning = outcome.data["warning"]
        assert (
            "do not fit num_ctx 4096" in warning and "even with the other source files as outlines" in warning
        )
        assert "src/big.py (~" in warning and "whole-file answer would be cut off" in warning
        assert "search/replace" in warning and f"models.{IMPL}.num_ctx" in warning
        assert "warning: " in outcome.message


def test_a_task_that_fits_gets_no_budget_warning(pipe: Pipeline) -> None:
    from hub.phases.setup import create

    outcome = create(pipe.ctx, {"title": "Small", "requirements": ["x"], "target_file": "src/app.py"})

    assert "warning" not in outcome.data


def test_a_call_the_server_counted_calibrates_the_models_estimate_for_the_next_request(
    pipe: Pipeline,
) -> None:
    from hub.workers.bridge import calibration_path, request_for

    pipe.commit("a module", {"src/big.py": BIG_MODULE[: len(BIG_MODULE) // 4]})
    # The server counts twice what the hub estimates: a denser tokenizer than Qwen's.
    pipe.fake.respond_with(
        IMPL,
        lambda body: Reply(
            text=whole_file("src/app.py", GREET_FIXED),
            prompt_eval_count=2 * budget_estimate(body),
        ),
    )
    pipe.start(source_files=["src/big.py"])

    assert pipe.implement().to_state == "pending_local_review"

    config = pipe.ctx.config
    assert calibration_path(config).is_file()
    assert request_for(config, "implementer", "x").token_scale == pytest.approx(2.0, rel=0.01)


def budget_estimate(body: dict[str, Any]) -> int:
    from hub.workers import budget

    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), None)
    return budget.prompt_tokens(messages[-1]["content"], system)


def test_a_wait_for_the_server_is_logged_once_with_its_seconds_and_what_waited(pipe: Pipeline) -> None:
    pipe.start()
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.stop()

    def restart_on_second_pause(n: int) -> None:
        if n == 2:
            pipe.fake.start()

    pipe.on_pause = restart_on_second_pause
    with capture_logs() as logs:
        outcome = pipe.implement()

    assert outcome.to_state == "pending_local_review"
    # The health check waited (1 s, then 2 s on the simulated clock): `hub eval` keeps it out of the hub's time.
    waited = [(e["during"], e["seconds"]) for e in logs if e["event"] == "server.waited"]
    assert waited == [("health check", 3.0)]
