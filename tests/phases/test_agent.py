"""`hub run-implementer` in agent mode (issue 19) against a FakeOllama scripted with tool calls written as
fenced JSON in the content (the text fallback: what the real 1.5B does) on a real repository: the loop
reads, writes and tests through its tools, and every way it can end lands where edit mode's would."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from hub.testing import Reply

from .conftest import APP_PY, GREET_FIXED, HUB_YAML, IMPL, REV, Pipeline, git


def agent_mode(
    pipe: Pipeline, extra: str = "", stall: float = 20, num_ctx: int = 8192, impl: str = ""
) -> None:
    """hub.yaml with the implementer in agent mode (and `impl` lines added to its role)."""
    text = HUB_YAML.format(impl=IMPL, rev=REV, stall=stall, num_ctx=num_ctx)
    text = text.replace("    backend: ollama\n", f"    backend: ollama\n    mode: agent\n{impl}", 1)
    pipe.commit("agent mode", {"hub.yaml": text + extra})


def call(name: str, **arguments: Any) -> str:
    """A tool call as a model without native tool calling writes it: fenced JSON in its text."""
    return "```json\n" + json.dumps({"name": name, "arguments": arguments}) + "\n```\n"


def greet_check(expected: str) -> str:
    code = (
        "import sys; sys.path.insert(0, 'src'); import app; r = app.greet('x'); "
        f"print('greet returned', repr(r)); sys.exit(r != {expected!r})"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


HELLO, HI, HELLO_COMMA = (
    '    return "hello " + name\n',
    '    return "hi, " + name\n',
    '    return "hello, " + name\n',
)
FIX = call(
    "edit_file",
    path="src/app.py",
    search='    return "hello " + name\n',
    replace='    return "hello, " + name\n',
)


def sent(pipe: Pipeline, n: int) -> list[dict[str, Any]]:
    """The messages of the n-th request the implementer's model received (0-based)."""
    return list(pipe.fake.chat_requests(IMPL)[n]["messages"])


def test_the_agent_reads_edits_tests_and_says_done_and_the_task_moves_to_local_review(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(
        IMPL,
        call("read_file", path="src/app.py"),
        FIX,
        call("run_tests"),
        call("done", summary="greet adds a comma"),
    )
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    outcome = pipe.implement()

    assert (outcome.from_state, outcome.to_state) == ("pending_implementer", "pending_local_review")
    assert pipe.read("src/app.py") == GREET_FIXED
    branch = pipe.contract()["git"]["task_branch"]
    assert git(pipe.repo, "show", f"{branch}:src/app.py") + "\n" == GREET_FIXED
    assert (pipe.repo / "src/app.py").read_text(encoding="utf-8") == APP_PY
    # The model saw the file with line numbers, then what its edit did, then the tests passing.
    second, third, fourth = (sent(pipe, n)[-1]["content"] for n in (1, 2, 3))
    assert '1| def greet(name):\n2|     return "hello " + name' in second
    assert "src/app.py written (+1 -1 lines)" in third
    assert "all 1 acceptance command(s) passed" in fourth
    turns = pipe.records("agent-turn")
    assert [t["calls"][0]["name"] for t in turns] == ["read_file", "edit_file", "run_tests", "done"]
    assert all(t["prompt_tokens"] > 0 and t["request_tokens"] > 0 and "seconds" in t for t in turns)
    assert turns[-1]["ending"] == "done"
    assert [t["outcome"] for t in turns] == [
        "turn 1: read_file",
        "turn 2: edit_file",
        "turn 3: run_tests",
        "turn 4: done; done",
    ]
    # The edit is recorded like edit mode's, and the acceptance commands ran after done as well.
    assert [d["outcome"] for d in pipe.records("diff")] == ["applied"]
    assert len(pipe.records("command")) == 2
    # The tools are offered on the wire and listed in the system prompt for servers without tool calling.
    first = pipe.fake.chat_requests(IMPL)[0]
    system = first["messages"][0]["content"]
    assert "- read_file(path, start_line?, end_line?)" in system and "- done(summary?)" in system


def test_writes_outside_the_allowed_paths_and_into_control_files_are_refused_and_told(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(
        IMPL,
        call("write_file", path="hub.yaml", content="judge: {command: 'echo PASS'}\n"),
        call("write_file", path="src/other.py", content="x = 1\n"),
        call("write_file", path="../outside.py", content="x = 1\n"),
        FIX,
        call("done", summary="ok"),
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    told = [sent(pipe, n)[-1]["content"] for n in (1, 2, 3)]
    assert "control file 'hub.yaml'" in told[0]
    assert "not inside allowed_paths (src/app.py)" in told[1]
    assert "escapes the repository" in told[2]
    assert "judge" not in pipe.read("hub.yaml")
    assert not (pipe.worktree / "src/other.py").exists()
    assert not (pipe.worktree.parent / "outside.py").exists()
    assert pipe.contract()["handoff_data"]["changed_files"] == ["src/app.py"]


def test_control_files_and_git_internals_are_never_shown_to_the_agent(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(
        IMPL,
        call("list_files"),
        call("read_file", path="hub.yaml"),
        call("read_file", path=".git/HEAD"),
        call("search", text="mode: agent"),
        FIX,
        call("done", summary="ok"),
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    listing, yaml_read, git_read, found = (sent(pipe, n)[-1]["content"] for n in (1, 2, 3, 4))
    assert "src/app.py" in listing and "hub.yaml" not in listing
    assert "error:" in yaml_read and "not shown" in yaml_read and "ollama" not in yaml_read
    assert "error:" in git_read and "ref:" not in git_read
    assert "was found in no file" in found


def test_a_call_to_an_unknown_tool_is_answered_with_an_error_and_the_loop_goes_on(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(IMPL, call("read_files", path="src/app.py"), FIX, call("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    told = sent(pipe, 1)[-1]["content"]
    assert "error:" in told and "read_files" in told and "read_file" in told.replace("read_files", "")
    assert pipe.records("agent-turn")[0]["calls"][0]["problem"]


def test_done_without_any_write_is_a_no_change_stall_strike(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(IMPL, call("done", summary="nothing to do"), call("done", summary="really"))
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "no_change" and "called done" in stall["detail"]
    # The first done was told back (nothing written yet); the second was taken.
    assert "no file has been written yet" in str(sent(pipe, 1)[-1]["content"])
    assert len(pipe.fake.chat_requests(IMPL)) == 2


def test_a_reply_without_a_tool_call_is_reminded_once_then_a_strike(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(IMPL, "I think the greeting needs a comma.", "Yes, a comma.")
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    assert "called no tool" in sent(pipe, 1)[-1]["content"]
    assert pipe.contract()["handoff_data"]["stalls"][-1]["reason"] == "agent_no_call"
    assert len(pipe.fake.chat_requests(IMPL)) == 2


def test_a_reply_with_edit_blocks_and_no_call_is_applied_as_edit_mode_and_told(pipe: Pipeline) -> None:
    agent_mode(pipe)
    whole = f"src/app.py\n```python\n{GREET_FIXED}```\n"
    pipe.fake.script(IMPL, whole, call("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    assert "Written from your answer: src/app.py" in sent(pipe, 1)[-1]["content"]


def test_the_same_call_again_and_again_is_told_then_a_strike(pipe: Pipeline) -> None:
    agent_mode(pipe)
    read = call("read_file", path="src/app.py")
    pipe.fake.script(IMPL, read, read, read, read)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    assert "same read_file call 3 times" in sent(pipe, 3)[-1]["content"]
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "agent_repeat" and "4 times" in stall["detail"]


def test_a_read_after_a_write_is_not_a_repeat(pipe: Pipeline) -> None:
    agent_mode(pipe, extra="agent: {max_repeats: 2}\n")
    read = call("read_file", path="src/app.py")
    pipe.fake.script(IMPL, read, FIX, read, call("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"
    assert "hello, " in sent(pipe, 3)[-1]["content"]


def test_the_turn_bound_with_nothing_written_is_a_no_change_strike(pipe: Pipeline) -> None:
    agent_mode(pipe, extra="agent: {max_turns: 2}\n")
    pipe.fake.script(IMPL, call("list_files"), call("read_file", path="src/app.py"), FIX)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    assert len(pipe.fake.chat_requests(IMPL)) == 2
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "no_change" and "all 2 turns" in stall["detail"]


def test_the_turn_bound_after_a_write_goes_on_to_the_acceptance_commands(pipe: Pipeline) -> None:
    agent_mode(pipe, extra="agent: {max_turns: 1}\n")
    pipe.fake.script(IMPL, FIX)
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"
    assert pipe.records("command")[0]["outcome"] == "ok"


def test_the_token_bound_is_a_strike_of_its_own(pipe: Pipeline) -> None:
    agent_mode(pipe, extra="agent: {max_tokens: 1000}\n")
    pipe.fake.script(IMPL, Reply(text=call("list_files"), prompt_eval_count=1500), FIX)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    assert len(pipe.fake.chat_requests(IMPL)) == 1
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "agent_tokens" and "agent.max_tokens (1000)" in stall["detail"]


def test_a_model_that_stalls_mid_turn_behind_v1_is_the_same_timeout_strike_as_edit_mode(
    pipe: Pipeline,
) -> None:
    agent_mode(pipe, stall=0.5, extra=f'openai: {{base_url: "{pipe.fake.url}/v1"}}\n')
    text = (pipe.repo / "hub.yaml").read_text(encoding="utf-8")
    pipe.commit("behind /v1", {"hub.yaml": text.replace("backend: ollama", "backend: openai", 1)})
    pipe.fake.script(IMPL, call("list_files"), Reply(text=FIX, stall_after_chars=10, stall_seconds=5))
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    assert pipe.contract()["handoff_data"]["stalls"][-1]["reason"] == "timeout: stall"


def test_behind_ollama_a_long_silent_tool_call_after_words_is_not_a_stall(
    pipe: Pipeline,
) -> None:
    # Ollama sends a tool call only once the model has written it whole: after its words, a second of
    # silence, longer than the stall clock (0.5 s), is a model writing, not a stall.
    agent_mode(pipe, stall=0.5)
    write = {"name": "write_file", "arguments": {"path": "src/app.py", "content": GREET_FIXED}}
    pipe.fake.script(
        IMPL,
        Reply(text="I will write the file now.", tool_calls=(write,), chunk_chars=4, chunk_delay=0.05),
        call("done", summary="ok"),
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"
    assert pipe.read("src/app.py") == GREET_FIXED


def test_failing_tests_after_done_are_told_and_the_loop_goes_on_then_passes(pipe: Pipeline) -> None:
    agent_mode(pipe)
    wrong = call("edit_file", path="src/app.py", search=HELLO, replace=HI)
    right = call("edit_file", path="src/app.py", search=HI, replace=HELLO_COMMA)
    pipe.fake.script(IMPL, wrong, call("done", summary="a"), right, call("done", summary="b"))
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"

    told = sent(pipe, 2)[-1]["content"]
    assert "You called done, but the acceptance commands fail" in told and "greet returned 'hi, x'" in told
    assert pipe.read("src/app.py") == GREET_FIXED


def test_tests_still_failing_after_the_reflections_are_the_tests_failed_strike(pipe: Pipeline) -> None:
    agent_mode(pipe)
    wrong = call("edit_file", path="src/app.py", search=HELLO, replace=HI)
    done = [call("done", summary=str(n)) for n in range(3)]
    pipe.fake.script(IMPL, wrong, *done)
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    outcome = pipe.implement()

    assert outcome.to_state == "pending_implementer"
    stall = pipe.contract()["handoff_data"]["stalls"][-1]
    assert stall["reason"] == "tests_failed" and "greet returned 'hi, x'" in stall["detail"]
    assert len(pipe.fake.chat_requests(IMPL)) == 4


def test_run_tests_runs_in_the_real_sandbox_and_the_model_sees_what_it_refused(pipe: Pipeline) -> None:
    agent_mode(pipe)
    pipe.fake.script(IMPL, FIX, call("run_tests"), call("done", summary="ok"))
    pipe.start()
    report = pipe.ctx.handoff.judge_report_json
    forge = f"echo PASS > {shlex.quote(os.path.relpath(report, pipe.worktree))}"
    from hub.state import store

    contract = pipe.contract()
    contract["specification"]["acceptance_commands"] = [forge]
    store.save(pipe.ctx.handoff.contract, contract, pipe.ctx.clock())

    pipe.implement()

    assert not report.exists()
    told = sent(pipe, 2)[-1]["content"]
    # The handoff folder lies outside the task's worktree: in the sandbox it is read-only or not there.
    assert "1 of 1 acceptance command(s) failed" in told
    assert any(why in told for why in ("Read-only file system", "No such file", "Directory nonexistent"))
    assert pipe.records("command")[0]["sandbox"].startswith("sandboxed (bwrap)")


def test_old_tool_results_are_dropped_with_a_note_when_the_context_would_overflow(pipe: Pipeline) -> None:
    body = "".join(
        f"def f{n}(x):\n    return x + {n}  # some padding text to fill the window\n" for n in range(30)
    )
    pipe.commit("big files", {"src/a.py": body, "src/b.py": body, "src/c.py": body})
    agent_mode(pipe, num_ctx=4096, impl="    num_predict: 512\n")
    reads = [call("read_file", path=f"src/{n}.py") for n in "abc"]
    pipe.fake.script(IMPL, *reads, FIX, call("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    dropped = [t["dropped_results"] for t in pipe.records("agent-turn")]
    assert sum(dropped) >= 1
    later = json.dumps(sent(pipe, len(dropped) - 1))
    assert "was removed to keep the conversation inside the model's context" in later
    assert "def f29" in later  # the latest result is kept


def test_a_context_that_cannot_fit_even_without_old_results_halts_with_the_fix(pipe: Pipeline) -> None:
    agent_mode(pipe, num_ctx=1024, impl="    num_predict: 256\n")
    pipe.fake.script(IMPL, FIX)
    pipe.start(requirements=["greet() says 'hello, NAME' " + "and it must be polite " * 400])

    outcome = pipe.implement()

    assert outcome.to_state == "erik_consultation"
    breaker = pipe.contract()["breaker"]
    assert breaker["trigger"] == "context_overflow"
    assert (
        "task prompt does not fit" in breaker["reason"]
        and "raise models.<model>.num_ctx" in breaker["reason"]
    )
    assert not pipe.fake.chat_requests(IMPL)


def test_an_mcp_servers_allowed_tool_is_called_and_a_tool_not_allowed_is_refused(pipe: Pipeline) -> None:
    everything = (
        Path(__file__).resolve().parents[2]
        / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    )
    assert everything.is_file(), "run `npm ci`"
    servers = f"mcp_servers:\n  - name: ev\n    command: node\n    args: [{json.dumps(str(everything))}, stdio]\n    allow: [echo]\n"
    agent_mode(pipe, extra=servers)
    pipe.fake.script(
        IMPL,
        call("mcp_ev_echo", message="from the agent"),
        # A tool the server has but hub.yaml does not allow: unknown to the loop (a native call, since
        # a name no tool has is not read as a call from the text).
        Reply(tool_calls=({"name": "mcp_ev_get-env", "arguments": {}},)),
        FIX,
        call("done", summary="ok"),
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert "Echo: from the agent" in sent(pipe, 1)[-1]["content"]
    refused = sent(pipe, 2)[-1]["content"]
    assert "error:" in refused and "mcp_ev_get-env" in refused and "PATH" not in refused
    offered = [t["function"]["name"] for t in pipe.fake.chat_requests(IMPL)[0]["tools"]]
    assert "mcp_ev_echo" in offered and "mcp_ev_get-env" not in offered
    assert [c["name"] for t in pipe.records("agent-turn") for c in t["calls"]][:2] == [
        "mcp_ev_echo",
        "mcp_ev_get-env",
    ]


def test_an_mcp_server_that_cannot_start_halts_the_task_with_the_fix(pipe: Pipeline) -> None:
    agent_mode(
        pipe,
        extra="mcp_servers:\n  - name: gone\n    command: [node, /nonexistent/server.js]\n    allow: [x]\n",
    )
    pipe.fake.script(IMPL, FIX)
    pipe.start()

    outcome = pipe.implement()

    assert outcome.to_state == "erik_consultation"
    assert pipe.contract()["breaker"]["trigger"] == "mcp_unavailable"
    assert "mcp_servers" in pipe.halt_text()
    assert not pipe.fake.chat_requests(IMPL)


def test_scan_checks_what_the_agent_wrote_with_the_packaged_rules(pipe: Pipeline) -> None:
    agent_mode(pipe)
    risky = "def greet(name):\n    return 'hello, ' + eval(name)\n"
    pipe.fake.script(
        IMPL,
        call("write_file", path="src/app.py", content=risky),
        call("scan"),
        call("done", summary="ok"),
    )
    pipe.start()

    pipe.implement()

    found = sent(pipe, 2)[-1]["content"]
    assert "src/app.py:2:" in found and "py-eval-exec" in found


def test_a_window_smaller_on_the_server_than_in_hub_yaml_drops_old_results_too(pipe: Pipeline) -> None:
    # hub.yaml says 16384, the model was trained on 4096 (Ollama's /api/show): the provider refuses what
    # the loop's own estimate let through, and the loop drops an old result and sends again.
    body = "".join(
        f"def f{n}(x):\n    return x + {n}  # some padding text to fill the window\n" for n in range(30)
    )
    pipe.commit("big files", {"src/a.py": body, "src/b.py": body, "src/c.py": body})
    agent_mode(pipe, num_ctx=16384, impl="    num_predict: 512\n")
    pipe.fake.configure(IMPL, context_length=4096)
    reads = [call("read_file", path=f"src/{n}.py") for n in "abc"]
    pipe.fake.script(IMPL, *reads, FIX, call("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert sum(t["dropped_results"] for t in pipe.records("agent-turn")) >= 1
    assert len(pipe.fake.chat_requests(IMPL)) == 5  # nothing was sent that did not fit


def test_hub_new_gives_no_files_budget_warning_in_agent_mode(pipe: Pipeline) -> None:
    from hub.phases.setup import create

    big = "".join(f"def f{n}(x):\n    return x * {n} + len(str(x))\n\n" for n in range(400))
    pipe.commit("a big module", {"src/big.py": big})
    agent_mode(pipe, num_ctx=4096)

    outcome = create(pipe.ctx, {"title": "Big", "requirements": ["do it"], "target_file": "src/big.py"})

    assert "warning" not in outcome.data
