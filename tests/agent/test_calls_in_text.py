"""Reading tool calls from a reply's text and holding every call to its tool's schema."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hub.agent.text_calls import ReadCalls, calls_in_text, checked
from hub.testing.call_corpus import TOOLS
from hub.workers.base import ToolCall
from hub.workers.toolcalls import text_turns

OPEN: dict[str, dict[str, Any]] = {"note": {"type": "object"}}  # any arguments, none coerced


def test_the_prose_is_the_reply_without_its_calls() -> None:
    reply = (
        "I need the file first.\n\n```json\n"
        '{"name": "read_file", "arguments": {"path": "calc.py"}}\n```\n\nThen I will fix `add`.\n'
    )
    read = calls_in_text(reply, TOOLS)
    assert read == ReadCalls(
        (ToolCall("read_file", {"path": "calc.py"}),), "I need the file first.\n\nThen I will fix `add`."
    )


def test_a_reply_without_calls_comes_back_whole() -> None:
    reply = "All done: `add` now returns a + b.\n\n```python\ndef add(a, b):\n    return a + b\n```"
    assert calls_in_text(reply, TOOLS) == ReadCalls((), reply)


def test_a_call_written_as_an_example_stays_in_the_prose_and_is_never_run() -> None:
    reply = 'You could send {"name": "run_tests", "arguments": {}} to check it.'
    read = calls_in_text(reply, TOOLS)
    assert read.text == reply
    assert len(read.calls) == 1
    assert read.calls[0].name == "run_tests"
    assert read.calls[0].problem.startswith("the call to run_tests stands inside a sentence")


def test_a_wrapped_call_quoted_mid_sentence_is_an_example_but_one_ending_the_line_is_a_call() -> None:
    wrapped = '<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>'
    quoted = calls_in_text(f"Qwen writes calls like {wrapped} in its replies.", TOOLS).calls
    assert [(c.name, c.problem.split(",")[0]) for c in quoted] == [
        ("run_tests", "the call to run_tests stands inside a sentence")
    ]
    assert calls_in_text(f"Let me run them: {wrapped}", TOOLS) == ReadCalls(
        (ToolCall("run_tests", {}),), "Let me run them:"
    )


def test_a_call_that_cannot_run_leaves_the_prose_around_it_whole() -> None:
    reply = 'Before.\n```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": """x"""}}\n```\nAfter.'
    read = calls_in_text(reply, TOOLS)
    assert read.text == "Before.\n\nAfter."
    assert [c.problem.split(":")[1] for c in read.calls] == [
        ' it writes a string in triple quotes ("""), which JSON does not have'
    ]


def test_the_tools_definitions_echoed_back_are_no_calls_and_no_problems() -> None:
    definition = {
        "name": "done",
        "description": "Say the change is finished.",
        "parameters": {"type": "object"},
    }
    echoed = f"<tools>\n{json.dumps({'type': 'function', 'function': definition})}\n</tools>"
    assert calls_in_text(echoed, TOOLS) == ReadCalls((), "")


def test_a_code_block_is_never_a_call_whatever_it_holds() -> None:
    for language in ("python", "bash", "js"):
        reply = f'```{language}\n{{"name": "read_file", "arguments": {{"path": "a.py"}}}}\n```'
        assert calls_in_text(reply, TOOLS) == ReadCalls((), reply)


def test_an_unknown_tool_is_told_the_closest_name_and_every_tool_there_is() -> None:
    call = checked(ToolCall("serch", {"pattern": "x"}, id="c1"), TOOLS)
    assert call.id == "c1"
    assert call.problem == (
        "there is no tool 'serch'; did you mean 'search'? The tools are: done, list_files, read_file, "
        "run_tests, search, write_file"
    )


def test_arguments_sent_as_a_json_string_are_parsed() -> None:
    call = ToolCall("read_file", '{"path": "a.py", "start": 3}')  # type: ignore[arg-type]
    assert checked(call, TOOLS) == ToolCall("read_file", {"path": "a.py", "start": 3})


def test_only_readings_the_schema_is_sure_of_are_coerced() -> None:
    assert checked(ToolCall("read_file", {"path": 7, "start": "12", "end": 20.0}), TOOLS).arguments == {
        "path": "7",
        "start": 12,
        "end": 20,
    }
    for start in ("12.5", "twelve", " 12", True):
        problem = checked(ToolCall("read_file", {"path": "a.py", "start": start}), TOOLS).problem
        assert (
            f"argument 'start' must be an integer, got {'a boolean' if start is True else 'a string'}"
            in problem
        )


def test_a_field_of_several_types_is_left_as_written() -> None:
    tools = {"t": {"type": "object", "properties": {"n": {"type": ["integer", "string"]}}}}
    assert checked(ToolCall("t", {"n": "12"}), tools).arguments == {"n": "12"}


def test_a_wrong_call_says_which_argument_what_was_expected_and_what_the_tool_takes() -> None:
    call = checked(ToolCall("read_file", {"file": "a.py", "start": [1]}), TOOLS)
    assert call.problem == (
        "read_file was not run: unknown argument 'file'; argument 'start' must be an integer, got a list "
        "[1]; missing required argument 'path' (a string). read_file takes path (string, required), "
        "start (integer), end (integer)."
    )


def test_nested_values_and_enums_are_held_to_the_schema() -> None:
    tools = {
        "edit": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["append", "replace"]},
                "lines": {"type": "array", "items": {"type": "integer"}},
            },
        }
    }
    assert (
        'must be one of ["append", "replace"], got "insert"'
        in checked(ToolCall("edit", {"mode": "insert"}), tools).problem
    )
    assert (
        "argument lines[1] must be integer" in checked(ToolCall("edit", {"lines": [1, "x"]}), tools).problem
    )


def test_extra_arguments_pass_only_where_the_schema_allows_them() -> None:
    allowing = {
        "t": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}
    }
    assert checked(ToolCall("t", {"a": "x", "b": 1}), allowing).problem == ""
    assert checked(ToolCall("note", {"anything": [1]}), OPEN).problem == ""


def test_a_call_that_already_has_a_problem_is_left_alone() -> None:
    call = ToolCall("write_file", {}, problem="cut off")
    assert checked(call, TOOLS) is call


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_SHAPES = (
    "```json\n{call}\n```",
    "{call}",
    "<tool_call>\n{call}\n</tool_call>",
    "<tool_call>{call}",
    "[TOOL_CALLS][{call}]",
    "<|tool_call|>[{call}]<|/tool_call|>",
    "Let me note it.\n{call}\nThat is all.",
)


@given(arguments=st.dictionaries(st.text(max_size=10), _VALUES, max_size=5), shape=st.sampled_from(_SHAPES))
def test_arguments_read_from_text_are_exactly_the_ones_written(arguments: dict[str, Any], shape: str) -> None:
    call = json.dumps({"name": "note", "arguments": arguments})
    read = calls_in_text(shape.replace("{call}", call), OPEN)
    assert read.calls == (ToolCall("note", arguments),)


_NOT_OFFERED = st.sampled_from(["weather", "Skill", "get_state", "fetch", "calc", "x"])
_PIECES = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda n, a: json.dumps({"name": n, "arguments": a}),
        _NOT_OFFERED,
        st.dictionaries(st.text(max_size=5), _VALUES, max_size=3),
    ),
    st.sampled_from(
        ["<tool_call>", "</tool_call>", "```json", "```", "[TOOL_CALLS]", "{", "[", "\n", "<function=", ">"]
    ),
)


@given(st.lists(_PIECES, max_size=12))
def test_no_text_without_an_offered_tools_name_yields_a_call_to_run(pieces: list[str]) -> None:
    text = "".join(pieces)
    if any(name in text for name in TOOLS):
        return
    assert all(call.problem for call in calls_in_text(text, TOOLS).calls)


def _with_trailing_commas(value: Any) -> str:
    if isinstance(value, dict):
        inner = "".join(f"{json.dumps(k)}: {_with_trailing_commas(v)}, " for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + "".join(f"{_with_trailing_commas(v)},\n" for v in value) + "]"
    return json.dumps(value)


@given(arguments=st.dictionaries(st.text(max_size=10), _VALUES, max_size=5), shape=st.sampled_from(_SHAPES))
def test_dropping_trailing_commas_never_changes_a_value(arguments: dict[str, Any], shape: str) -> None:
    call = '{"name": "note", "arguments": ' + _with_trailing_commas(arguments) + ",}"
    read = calls_in_text(shape.replace("{call}", call), OPEN)
    assert read.calls == (ToolCall("note", arguments),)


_NEVER_RUN = (
    "You could call it like {call} if you want.",
    "```python\nrequest = {call}\n```",
    "- {call}",
)


@given(
    arguments=st.dictionaries(st.text(max_size=10), _VALUES, max_size=5), shape=st.sampled_from(_NEVER_RUN)
)
def test_a_call_inside_a_sentence_or_code_is_never_run(arguments: dict[str, Any], shape: str) -> None:
    call = json.dumps({"name": "note", "arguments": arguments})
    assert all(c.problem for c in calls_in_text(shape.replace("{call}", call), OPEN).calls)


@given(
    arguments=st.dictionaries(st.text(max_size=10), _VALUES, max_size=5),
    shape=st.sampled_from(_SHAPES),
    cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_a_call_the_reply_ends_inside_is_never_run(arguments: dict[str, Any], shape: str, cut: float) -> None:
    call = json.dumps({"name": "note", "arguments": arguments})
    whole = shape.replace("{call}", call)
    first, last = whole.index('"note"'), whole.index(call) + len(call) - 1  # up to its final brace
    assert all(c.problem for c in calls_in_text(whole[: first + int(cut * (last - first))], OPEN).calls)


def test_a_number_longer_than_python_converts_is_a_problem_not_a_crash() -> None:
    digits = "9" * 5000
    bare = calls_in_text(
        f'{{"name": "read_file", "arguments": {{"path": "a.py", "start": {digits}}}}}', TOOLS
    )
    assert [(c.name, c.problem[:40]) for c in bare.calls] == [
        ("read_file", "the call to read_file was not run: it is")
    ]
    quoted = checked(ToolCall("read_file", {"path": "a.py", "start": digits}), TOOLS)
    assert "argument 'start' must be an integer, got a string" in quoted.problem


def test_a_tool_offered_without_a_schema_takes_any_arguments() -> None:
    assert checked(ToolCall("ping", {"host": "x"}), {"ping": {}}) == ToolCall("ping", {"host": "x"})


_TOKENS = (
    *"{}[]\",:'\\ \n`<>|=/_-abnrtu0159.eE",
    *("read_file", "name", "arguments", "<tool_call>", "```json", "[TOOL_CALLS]", "<function="),
    *("<parameter=path>", "</parameter>", "</function>"),
)
_NOISE = st.lists(st.sampled_from(_TOKENS), max_size=60).map("".join)


@given(_NOISE)
def test_any_text_reads_without_an_error_and_every_call_is_runnable_or_says_why_not(text: str) -> None:
    for call in calls_in_text(text, TOOLS).calls:
        assert call.problem or checked(call, TOOLS) == call


def test_arguments_nested_deeper_than_python_reads_are_a_problem_not_a_crash() -> None:
    call = checked(ToolCall("read_file", "[" * 100_000), TOOLS)  # type: ignore[arg-type]
    assert call.problem.startswith("read_file was not run: the arguments of read_file are nested too deep")


@given(
    arguments=st.dictionaries(st.text(max_size=10), _VALUES, max_size=5),
    prose=st.sampled_from(["", "I will note it."]),
)
def test_a_call_the_providers_write_as_text_reads_back_as_the_same_call(
    arguments: dict[str, Any], prose: str
) -> None:
    # npm ollama-mcp carries no tools: the providers send the agent's earlier calls as text (text_turns).
    turn = {"role": "assistant", "content": prose, "tool_calls": [ToolCall("note", arguments, id="c1")]}
    (written,) = text_turns((turn,))
    assert calls_in_text(written["content"], OPEN) == ReadCalls((ToolCall("note", arguments),), prose)
