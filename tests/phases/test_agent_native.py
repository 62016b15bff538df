"""Agent mode with the server's own tool calls (Ollama's `message.tool_calls`, the OpenAI API's
`tool_calls`): the loop's turns go back on each API's wire in the shape a real server takes (FakeOllama
refuses others with a 400), and a broken call is told to the model, never run."""

from __future__ import annotations

from typing import Any

import pytest

from hub.testing import Reply

from .conftest import GREET_FIXED, IMPL, Pipeline
from .test_agent import FIX, agent_mode, greet_check

# mcp: the hub's own worker (in-process, the default backend), which carries tools and turns itself.
BACKENDS = ["ollama", "openai", "mcp"]


def native(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=({"name": name, "arguments": arguments},))


def on(pipe: Pipeline, backend: str, extra: str = "") -> None:
    """Agent mode with the implementer behind `backend` (the OpenAI-compatible API at FakeOllama's /v1)."""
    if backend == "openai":
        extra += f'openai: {{base_url: "{pipe.fake.url}/v1"}}\n'
    agent_mode(pipe, extra=extra)
    if backend == "openai":
        text = (pipe.repo / "hub.yaml").read_text(encoding="utf-8")
        pipe.commit(
            "the implementer behind /v1", {"hub.yaml": text.replace("backend: ollama", "backend: openai", 1)}
        )


def wire(pipe: Pipeline, n: int) -> list[dict[str, Any]]:
    return list(pipe.fake.chat_requests(IMPL)[n]["messages"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_calls_read_edit_test_and_finish_through_either_api(pipe: Pipeline, backend: str) -> None:
    on(pipe, backend)
    pipe.fake.script(
        IMPL,
        native("read_file", path="src/app.py"),
        native(
            "edit_file",
            path="src/app.py",
            search='    return "hello " + name\n',
            replace='    return "hello, " + name\n',
        ),
        native("run_tests"),
        native("done", summary="comma"),
    )
    pipe.start(acceptance_commands=[greet_check("hello, x")])

    assert pipe.implement().to_state == "pending_local_review"

    assert pipe.read("src/app.py") == GREET_FIXED
    first = pipe.fake.chat_requests(IMPL)[0]
    assert [t["function"]["name"] for t in first["tools"]][-1] == "done"
    # Each result went back as a tool turn answering the call, after the assistant turn that made it.
    second = wire(pipe, 1)
    assert [m["role"] for m in second[-2:]] == ["assistant", "tool"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert "1| def greet(name):" in second[-1]["content"]
    fourth = wire(pipe, 3)
    assert "all 1 acceptance command(s) passed" in fourth[-1]["content"]
    assert all(t["native_calls"] for t in pipe.records("agent-turn"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_whose_arguments_are_not_json_is_told_and_never_run(pipe: Pipeline, backend: str) -> None:
    on(pipe, backend)
    broken = Reply(
        tool_calls=({"name": "write_file", "arguments": '{"path": "src/app.py", "content": oops'},)
    )
    pipe.fake.script(IMPL, broken, Reply(text=FIX), native("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    told = wire(pipe, 1)[-1]["content"]
    assert told.startswith("error:")
    record = pipe.records("agent-turn")[0]["calls"][0]
    assert record["name"] == "write_file" and record["problem"]
    assert [d["outcome"] for d in pipe.records("diff")] == ["applied"]  # only the fix was ever written


def test_arguments_of_the_wrong_type_are_told_with_the_schema_problem(pipe: Pipeline) -> None:
    on(pipe, "ollama")
    pipe.fake.script(
        IMPL, native("read_file", path=["src/app.py"]), Reply(text=FIX), native("done", summary="ok")
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert wire(pipe, 1)[-1]["content"].startswith("error:")
    assert pipe.records("agent-turn")[0]["calls"][0]["problem"]


def test_native_calls_come_before_calls_written_in_the_text(pipe: Pipeline) -> None:
    on(pipe, "ollama")
    both = Reply(
        text='```json\n{"name": "write_file", "arguments": {"path": "src/app.py", "content": "x = 1\\n"}}\n```',
        tool_calls=({"name": "list_files", "arguments": {}},),
    )
    pipe.fake.script(IMPL, both, Reply(text=FIX), native("done", summary="ok"))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert [c["name"] for c in pipe.records("agent-turn")[0]["calls"]] == ["list_files"]
    assert pipe.read("src/app.py") == GREET_FIXED


def test_a_native_call_to_an_unknown_tool_is_answered_with_an_error(pipe: Pipeline) -> None:
    on(pipe, "ollama")
    pipe.fake.script(
        IMPL, native("delete_everything", path="/"), Reply(text=FIX), native("done", summary="ok")
    )
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    told = wire(pipe, 1)[-1]
    assert (
        told["role"] == "tool"
        and told["content"].startswith("error:")
        and "delete_everything" in told["content"]
    )
