"""FakeOllama answers tool calls as Ollama and the OpenAI-compatible servers do, takes tool turns back in
each API's shape (refusing the others as a real server does), and counts them in the prompt."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from hub.testing import FakeOllama, Reply, load_script

READ = {"name": "read_file", "arguments": {"path": "calc.py", "start": 1}}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository, with line numbers.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def body(stream: bool, messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    out = {
        "model": "m",
        "messages": messages or [{"role": "user", "content": "what does calc.py hold?"}],
        "stream": stream,
        "tools": TOOLS,
    }
    return {**out, **extra}


def sse_events(client: httpx.Client, payload: dict[str, Any]) -> list[Any]:
    with client.stream("POST", "/v1/chat/completions", json=payload) as response:
        assert response.status_code == 200
        data = [line.removeprefix("data: ") for line in response.iter_lines() if line]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_ollama_streams_each_call_whole_in_one_chunk_after_the_text(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script(
        "m", Reply(text="Reading it.", chunk_chars=4, tool_calls=(READ, {"name": "list", "id": "c9"}))
    )
    with client.stream("POST", "/api/chat", json=body(stream=True)) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    text = "".join(line["message"]["content"] for line in lines)
    calls = [c for line in lines for c in line["message"].get("tool_calls", [])]
    assert text == "Reading it."
    assert calls == [
        {"function": {"name": "read_file", "arguments": {"path": "calc.py", "start": 1}}},
        {"function": {"name": "list", "arguments": {}}, "id": "c9"},
    ]
    assert [len(line["message"].get("tool_calls", [])) for line in lines[-3:]] == [1, 1, 0]
    assert (lines[-1]["done"], lines[-1]["done_reason"]) == (True, "stop")


def test_ollama_without_stream_puts_the_calls_in_the_message(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(tool_calls=(READ,)))
    answer = client.post("/api/chat", json=body(stream=False)).json()
    assert answer["message"] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "calc.py", "start": 1}}}],
    }
    assert answer["done_reason"] == "stop"


def test_openai_streams_a_call_as_deltas_keyed_by_index_and_ends_with_tool_calls(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script("m", Reply(text="ok", chunk_chars=5, tool_calls=(READ, {"name": "done", "arguments": {}})))
    events = sse_events(client, body(stream=True))
    deltas = [d for e in events for d in e["choices"][0]["delta"].get("tool_calls", []) if e["choices"]]
    firsts = [d for d in deltas if "id" in d]
    assert [(d["index"], d["type"], d["function"]["name"]) for d in firsts] == [
        (0, "function", "read_file"),
        (1, "function", "done"),
    ]
    assert firsts[0]["id"] != firsts[1]["id"]
    assert all(
        set(d) == {"index", "function"} and set(d["function"]) == {"arguments"}
        for d in deltas[1:]
        if d not in firsts
    )
    fragments = {i: "".join(d["function"]["arguments"] for d in deltas if d["index"] == i) for i in (0, 1)}
    assert len([d for d in deltas if d["index"] == 0]) > 2  # the arguments arrive in several pieces
    assert json.loads(fragments[0]) == READ["arguments"]
    assert json.loads(fragments[1]) == {}
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_openai_without_stream_gives_the_calls_whole_with_null_content(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script("m", Reply(tool_calls=({**READ, "id": "call_7"},)))
    choice = client.post("/v1/chat/completions", json=body(stream=False)).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_7",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps(READ["arguments"])},
        }
    ]


def test_arguments_that_are_not_json_are_sent_as_the_model_wrote_them(
    fake: FakeOllama, client: httpx.Client
) -> None:
    broken = {"name": "read_file", "arguments": "path=calc.py"}
    fake.script("m", Reply(tool_calls=(broken,)), Reply(tool_calls=(broken,)))
    ollama = client.post("/api/chat", json=body(stream=False)).json()["message"]["tool_calls"]
    assert ollama == [{"function": {"name": "read_file", "arguments": "path=calc.py"}}]
    events = sse_events(client, body(stream=True))
    fragments = [
        d["function"]["arguments"]
        for e in events
        if e["choices"]
        for d in e["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert "".join(fragments) == "path=calc.py"


def test_a_call_cut_by_the_token_limit_ends_unterminated_with_length(
    fake: FakeOllama, client: httpx.Client
) -> None:
    cut = {"name": "write_file", "arguments": '{"path": "calc.py", "content": "def add(a, b):\\n    ret'}
    fake.script("m", Reply(tool_calls=(cut,), done_reason="length", chunk_chars=8))
    events = sse_events(client, body(stream=True))
    fragments = "".join(
        d["function"]["arguments"]
        for e in events
        if e["choices"]
        for d in e["choices"][0]["delta"].get("tool_calls", [])
    )
    assert fragments == cut["arguments"]
    with pytest.raises(ValueError):
        json.loads(fragments)
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_tool_turns_in_each_apis_shape_are_accepted_and_recorded(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script("m", "It adds.", "It adds.")
    ollama_turns = [
        {"role": "user", "content": "what does calc.py hold?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "calc.py"}}}],
        },
        {"role": "tool", "content": "1: def add(a, b):", "tool_name": "read_file"},
    ]
    openai_turns = [
        {"role": "user", "content": "what does calc.py hold?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "1: def add(a, b):"},
    ]
    first = client.post("/api/chat", json=body(stream=False, messages=ollama_turns))
    second = client.post("/v1/chat/completions", json=body(stream=False, messages=openai_turns))
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["message"]["content"] == "It adds."
    assert [b["messages"] for b in fake.chat_requests()] == [ollama_turns, openai_turns]
    assert all(b["tools"] == TOOLS for b in fake.chat_requests())


@pytest.mark.parametrize(
    ("path", "turn", "words"),
    [
        (
            "/api/chat",
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": '{"path": "a"}'}}],
            },
            "cannot unmarshal string",
        ),
        (
            "/v1/chat/completions",
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": {"path": "a"}},
                    }
                ],
            },
            "must be a string",
        ),
        ("/v1/chat/completions", {"role": "tool", "content": "x"}, "tool_call_id"),
        (
            "/v1/chat/completions",
            {"role": "tool", "content": "x", "tool_call_id": "nowhere"},
            "answers no tool call",
        ),
    ],
)
def test_a_tool_turn_in_the_other_apis_shape_is_refused_as_the_server_does(
    fake: FakeOllama, client: httpx.Client, path: str, turn: dict[str, Any], words: str
) -> None:
    fake.script("m", "never sent")
    messages = [{"role": "user", "content": "go"}, turn]
    response = client.post(path, json=body(stream=False, messages=messages))
    assert response.status_code == 400
    assert words in json.dumps(response.json())


def test_a_tool_without_a_function_name_is_refused(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", "never sent")
    response = client.post("/api/chat", json=body(stream=False, tools=[{"type": "function"}]))
    assert response.status_code == 400 and "tools[0]" in response.json()["error"]


def test_the_prompt_count_includes_the_tools_and_the_tool_turns(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.respond_with("m", lambda _: "ok")
    turns = [
        {"role": "user", "content": "what does calc.py hold?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "calc.py"}}}],
        },
        {"role": "tool", "content": "1: def add(a, b):\n2:     return a + b\n", "tool_name": "read_file"},
    ]

    def count(payload: dict[str, Any]) -> int:
        return int(client.post("/api/chat", json=payload).json()["prompt_eval_count"])

    plain = count(body(stream=False, tools=None))
    with_tools = count(body(stream=False))
    with_turns = count(body(stream=False, messages=turns))
    assert plain < with_tools < with_turns
    # The schemas are counted as the template renders them (JSON), not as a few characters.
    assert with_tools - plain >= len(json.dumps(TOOLS)) // 8


def test_a_script_file_may_give_tool_calls_and_a_bad_one_is_refused() -> None:
    script = load_script(json.dumps({"models": {"m": [{"tool_calls": [READ]}]}}))
    replies = script["m"]
    assert isinstance(replies, list) and replies[0].tool_calls == (READ,)
    with pytest.raises(ValueError, match=r"tool_calls\[0\]"):
        load_script(json.dumps({"models": {"m": [{"tool_calls": [{"arguments": {}}]}]}}))
