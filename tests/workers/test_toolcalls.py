"""Both providers send the tools and the turns after the prompt in their API's shape, and read the
server's tool calls (broken ones included) into ToolCalls, against FakeOllama over loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hub.core.errors import ContextOverflow, WorkerTimeout
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest, ToolCall
from hub.workers.ollama import OllamaProvider
from hub.workers.openai import OpenAIProvider
from hub.workers.toolcalls import OpenAICalls

Provider = OllamaProvider | OpenAIProvider
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository, with line numbers.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
READ = {"name": "read_file", "arguments": {"path": "calc.py"}}
CALLED = ToolCall("read_file", {"path": "calc.py"}, id="call_a1")
TURNS = (
    {"role": "assistant", "content": "Let me look.", "tool_calls": [CALLED]},
    {
        "role": "tool",
        "content": "1: def add(a, b):\n2:     return a - b",
        "tool_call_id": "call_a1",
        "name": "read_file",
    },
)


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture(params=["ollama", "openai"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def provider(fake: FakeOllama, api: str) -> Iterator[Provider]:
    made: Provider = (
        OllamaProvider(fake.url, retries=0)
        if api == "ollama"
        else OpenAIProvider(fake.url + "/v1", retries=0)
    )
    with made:
        yield made


def ask(**overrides: Any) -> ChatRequest:
    values: dict[str, Any] = {
        "model": "m",
        "prompt": "Fix add in calc.py.",
        "tools": (READ_TOOL,),
        "first_token_timeout": 5.0,
        "stall_timeout": 5.0,
        "total_timeout": 10.0,
    }
    return ChatRequest(**{**values, **overrides})


def test_the_servers_calls_come_back_as_tool_calls(fake: FakeOllama, provider: Provider, api: str) -> None:
    second = {"name": "list_files", "arguments": {}, "id": "call_b2"}
    fake.script("m", Reply(text="Reading.", chunk_chars=3, tool_calls=(READ, second)))
    generation = provider.generate(ask())
    assert generation.text == "Reading."
    assert [(c.name, c.arguments, c.problem) for c in generation.tool_calls] == [
        ("read_file", {"path": "calc.py"}, ""),
        ("list_files", {}, ""),
    ]
    assert generation.tool_calls[1].id == "call_b2"
    if api == "openai":
        assert generation.tool_calls[0].id.startswith("call_")  # the server's id, to answer it with
    assert generation.done_reason == ("stop" if api == "ollama" else "tool_calls")
    (sent,) = fake.chat_requests("m")
    assert sent["tools"] == [READ_TOOL]


def test_a_call_whose_arguments_are_not_json_carries_a_problem_and_no_arguments(
    fake: FakeOllama, provider: Provider
) -> None:
    fake.script("m", Reply(tool_calls=({"name": "read_file", "arguments": "path=calc.py"},)))
    (call,) = provider.generate(ask()).tool_calls
    assert (call.name, call.arguments) == ("read_file", {})
    assert "arguments of read_file are not valid JSON" in call.problem and "path=calc.py" in call.problem


def test_arguments_that_are_json_but_not_an_object_are_named(fake: FakeOllama, provider: Provider) -> None:
    fake.script("m", Reply(tool_calls=({"name": "read_file", "arguments": '["calc.py"]'},)))
    (call,) = provider.generate(ask()).tool_calls
    assert call.arguments == {} and "must be a JSON object, not an array" in call.problem


def test_a_call_cut_by_the_token_limit_is_never_given_arguments(fake: FakeOllama, provider: Provider) -> None:
    cut = {"name": "write_file", "arguments": '{"path": "calc.py", "content": "def add(a, b):\\n    ret'}
    fake.script("m", Reply(tool_calls=(READ, cut), done_reason="length", chunk_chars=7))
    generation = provider.generate(ask(num_predict=40))
    assert generation.done_reason == "length"
    first, second = generation.tool_calls
    assert (first.name, first.arguments, first.problem) == ("read_file", {"path": "calc.py"}, "")
    assert (second.name, second.arguments) == ("write_file", {})
    assert "cut off by the token limit" in second.problem
    assert len(fake.chat_requests("m")) == 1  # a cut call is not continued


def test_a_call_to_a_tool_nobody_offered_comes_back_as_called(fake: FakeOllama, provider: Provider) -> None:
    # Whether a name is known is the agent's to judge (it answers the model); the wire keeps the call.
    fake.script("m", Reply(tool_calls=({"name": "rm_rf", "arguments": {"path": "/"}},)))
    (call,) = provider.generate(ask()).tool_calls
    assert (call.name, call.arguments, call.problem) == ("rm_rf", {"path": "/"}, "")


def test_a_call_written_in_the_text_stays_text(fake: FakeOllama, provider: Provider) -> None:
    written = '```json\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n```'
    fake.script("m", written)
    generation = provider.generate(ask())
    assert generation.text == written and generation.tool_calls == ()


def test_the_turns_go_back_in_ollamas_shape(fake: FakeOllama) -> None:
    fake.script("m", "add subtracts; fixing.")
    with OllamaProvider(fake.url, retries=0) as provider:
        generation = provider.generate(ask(system="You fix code.", turns=TURNS))
    assert generation.text == "add subtracts; fixing."
    (sent,) = fake.chat_requests("m")
    assert sent["messages"] == [
        {"role": "system", "content": "You fix code."},
        {"role": "user", "content": "Fix add in calc.py."},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "calc.py"}}}],
        },
        {"role": "tool", "content": "1: def add(a, b):\n2:     return a - b", "tool_name": "read_file"},
    ]


def test_the_turns_go_back_in_the_openai_shape(fake: FakeOllama) -> None:
    fake.script("m", "add subtracts; fixing.")
    with OpenAIProvider(fake.url + "/v1", retries=0) as provider:
        provider.generate(ask(turns=TURNS))
    (sent,) = fake.chat_requests("m")
    assert sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_a1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a1", "content": "1: def add(a, b):\n2:     return a - b"},
    ]


def test_calls_without_ids_get_ids_their_results_answer(fake: FakeOllama) -> None:
    # The text fallback's calls and Ollama's have no id; the OpenAI API refuses a result answering none.
    fake.script("m", "done")
    turns = (
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [ToolCall("list_files"), {"name": "read_file", "arguments": {"path": "a.py"}}],
        },
        {"role": "tool", "content": "a.py", "name": "list_files"},
        {"role": "tool", "content": "1: x = 1", "name": "read_file"},
    )
    with OpenAIProvider(fake.url + "/v1", retries=0) as provider:
        assert provider.generate(ask(turns=turns)).text == "done"
    (sent,) = fake.chat_requests("m")
    ids = [c["id"] for c in sent["messages"][1]["tool_calls"]]
    assert len(set(ids)) == 2
    assert [m["tool_call_id"] for m in sent["messages"][2:]] == ids
    assert sent["messages"][1]["content"] is None


def test_a_request_without_tools_sends_what_it_always_sent(fake: FakeOllama, provider: Provider) -> None:
    fake.script("m", "plain")
    request = ask(tools=(), system="s")
    provider.generate(request)
    (sent,) = fake.chat_requests("m")
    assert "tools" not in sent
    assert sent["messages"] == request.messages()


@pytest.mark.parametrize("grow", ["tools", "turns"])
def test_the_budget_counts_the_tools_and_the_turns(fake: FakeOllama, provider: Provider, grow: str) -> None:
    fake.add_model("m")
    small = ask(tools=(), num_ctx=1024, num_predict=256)
    big_tool = {**READ_TOOL, "function": {**READ_TOOL["function"], "description": "Reads a file. " * 200}}
    result = {"role": "tool", "content": "x = 1\n" * 600, "tool_call_id": "call_a1", "name": "read_file"}
    grown: Callable[[], ChatRequest] = {
        "tools": lambda: ask(tools=(big_tool,), num_ctx=1024, num_predict=256),
        "turns": lambda: ask(tools=(), turns=(TURNS[0], result), num_ctx=1024, num_predict=256),
    }[grow]
    fake.script("m", "fits")
    assert provider.generate(small).text == "fits"
    with pytest.raises(ContextOverflow):
        provider.generate(grown())
    assert len(fake.chat_requests("m")) == 1  # refused before sending


def test_a_server_that_read_only_part_of_the_turns_is_a_cut(fake: FakeOllama, provider: Provider) -> None:
    # The estimate counts the turns: a count far below it is the start of the conversation dropped.
    long_turns = (TURNS[0], {**TURNS[1], "content": "def f():\n    return 1\n" * 200})
    fake.script("m", Reply(text="ok", prompt_eval_count=60), Reply(text="ok"))
    assert provider.generate(ask(turns=long_turns)).truncated
    whole = provider.generate(ask(turns=long_turns))
    assert not whole.truncated and whole.prompt_tokens > 1000  # the fake counts the turns too


LONG_WRITE = {
    "name": "write_file",
    "arguments": {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n" * 4},
}


def test_a_call_streamed_in_fragments_keeps_the_stall_clock_quiet(fake: FakeOllama) -> None:
    # llama-server and vLLM stream a call's arguments as they are generated: each fragment is progress.
    fake.script("m", Reply(tool_calls=(LONG_WRITE,), chunk_chars=16, chunk_delay=0.15))
    with OpenAIProvider(fake.url + "/v1", retries=0) as provider:
        generation = provider.generate(ask(first_token_timeout=1.0, stall_timeout=1.0, total_timeout=20.0))
    assert generation.tool_calls[0].arguments == LONG_WRITE["arguments"]
    assert generation.seconds > 1.0  # longer than either clock: only the fragments kept them quiet


def test_ollama_says_nothing_while_a_call_is_written_so_a_long_call_meets_the_clock(fake: FakeOllama) -> None:
    # Ollama holds a call back until it parses whole: a slow model writing a long call looks silent.
    fake.script("m", Reply(text="Writing.", tool_calls=(LONG_WRITE,), chunk_chars=16, chunk_delay=0.15))
    with OllamaProvider(fake.url, retries=0) as provider, pytest.raises(WorkerTimeout) as caught:
        provider.generate(ask(first_token_timeout=5.0, stall_timeout=1.0, total_timeout=20.0))
    assert caught.value.clock == "stall" and caught.value.partial_text == "Writing."


def test_a_result_naming_an_id_of_the_loops_own_answers_the_call_it_follows(fake: FakeOllama) -> None:
    # A call without an id is given one on the OpenAI wire; the loop may have named its result otherwise.
    fake.script("m", "ok")
    turns = (
        {"role": "assistant", "content": "", "tool_calls": [ToolCall("read_file", {"path": "a.py"})]},
        {"role": "tool", "content": "1: x = 1", "tool_call_id": "call_7_0", "name": "read_file"},
    )
    with OpenAIProvider(fake.url + "/v1", retries=0) as provider:
        assert provider.generate(ask(turns=turns)).text == "ok"
    call, result = fake.chat_requests("m")[0]["messages"][1:]
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]


def test_interleaved_deltas_are_joined_by_their_index() -> None:
    # Two calls in one turn may interleave on the wire (llama.cpp's docs/function-calling.md).
    calls = OpenAICalls()
    for deltas in (
        [{"index": 0, "id": "a", "type": "function", "function": {"name": "read_file", "arguments": '{"pa'}}],
        [{"index": 1, "id": "b", "type": "function", "function": {"name": "list_files", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": 'th": "x.py"}'}}],
        [{"index": 1, "function": {"arguments": "{}"}}],
    ):
        assert calls.add(deltas)
    assert not calls.add(None) and not calls.add([])
    assert calls.result(cut=False) == [
        ToolCall("read_file", {"path": "x.py"}, "a"),
        ToolCall("list_files", {}, "b"),
    ]
    # Cut at the token limit, the last call is never run, even when what came of it parses.
    last = calls.result(cut=True)[1]
    assert (last.arguments, "cut off by the token limit" in last.problem) == ({}, True)
