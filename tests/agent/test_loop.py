"""The loop on its own, its model call a scripted function (the seam the phase fills with
`calls.generate`): what goes back to the model, in what shape, and where the loop stops."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hub.agent.builtin import Refused, Tool, ToolRefused, schema
from hub.agent.loop import RESULT_CHARS, Bounds, Loop
from hub.workers.base import ChatRequest, Generation, ToolCall

STR = {"type": "string"}


class Model:
    """Answers each turn with the next scripted generation, keeping every request it was sent."""

    def __init__(self, *replies: Generation) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest, purpose: str) -> Generation:
        self.requests.append(request)
        return self.replies.pop(0)


def calls(*made: tuple[str, dict[str, Any]]) -> Generation:
    return Generation(
        text="",
        model="m",
        prompt_tokens=10,
        completion_tokens=5,
        tool_calls=tuple(ToolCall(n, a) for n, a in made),
    )


def loop(model: Model, tools: list[Tool], records: list[dict[str, Any]], **kwargs: Any) -> Loop:
    done = Tool("done", "finish", schema({"summary": STR}), lambda args: "done")  # as the built-in done
    kwargs.setdefault("version", lambda: 1)  # a file was written: done is taken at once
    return Loop(
        ChatRequest(model="m", prompt="do it", system="sys"),
        [*tools, done],
        model,
        records.append,
        kwargs.pop("bounds", Bounds()),
        write_answer=lambda text, reason: None,
        **kwargs,
    )


def test_calls_after_done_in_the_same_reply_are_not_run() -> None:
    ran: list[Mapping[str, Any]] = []
    echo = Tool("echo", "say it", schema({"text": STR}, ["text"]), lambda args: ran.append(args) or "said")
    records: list[dict[str, Any]] = []
    model = Model(calls(("echo", {"text": "a"}), ("done", {"summary": "s"}), ("echo", {"text": "b"})))

    ending = loop(model, [echo], records).run()

    assert (ending.reason, ending.summary, ending.turns, ending.tokens) == ("done", "s", 1, 15)
    assert ran == [{"text": "a"}]
    assert [c["name"] for c in records[0]["calls"]] == ["echo", "done"]


def test_a_long_result_is_cut_and_secrets_are_redacted_before_the_model_sees_them() -> None:
    dump = Tool("dump", "a lot", schema({}), lambda args: "key=hunter2 " + "x" * (2 * RESULT_CHARS))
    model = Model(calls(("dump", {})), calls(("done", {"summary": "s"})))

    loop(model, [dump], [], redact=lambda text: text.replace("hunter2", "[REDACTED]")).run()

    result = model.requests[1].turns[-1]
    assert result["role"] == "tool" and result["name"] == "dump"
    assert result["content"].startswith("key=[REDACTED] x") and "hunter2" not in result["content"]
    # Redacted before it is cut: a secret across the cut is never half shown.
    cap = min(RESULT_CHARS, model.requests[0].num_ctx * 3 // 4)  # a quarter of the window, about
    cut = len("key=[REDACTED] ") + 2 * RESULT_CHARS - cap
    assert len(result["content"]) < cap + 50 and result["content"].endswith(
        f"\n... (cut: {cut} more characters)"
    )


def test_the_tools_go_out_in_the_request_and_each_call_is_answered_by_its_id() -> None:
    echo = Tool("echo", "say it", schema({"text": STR}, ["text"]), lambda args: "said " + args["text"])
    first = Generation(text="", model="m", tool_calls=(ToolCall("echo", {"text": "hi"}, id="abc"),))
    model = Model(first, calls(("done", {"summary": "s"})))

    loop(model, [echo], []).run()

    assert [t["function"]["name"] for t in model.requests[0].tools] == ["echo", "done"]
    assistant, tool = model.requests[1].turns
    assert assistant["tool_calls"] == (ToolCall("echo", {"text": "hi"}, id="abc"),)
    assert tool == {"role": "tool", "content": "said hi", "tool_call_id": "abc", "name": "echo"}


def test_a_call_missing_a_required_argument_is_told_and_never_run() -> None:
    ran: list[Mapping[str, Any]] = []
    echo = Tool("echo", "say it", schema({"text": STR}, ["text"]), lambda args: ran.append(args) or "said")
    model = Model(calls(("echo", {})), calls(("done", {"summary": "s"})))

    loop(model, [echo], []).run()

    assert ran == []
    assert model.requests[1].turns[-1]["content"].startswith("error:")


def test_the_turn_bound_ends_the_loop_and_a_later_run_goes_on_counting() -> None:
    echo = Tool("echo", "say it", schema({"text": STR}, ["text"]), lambda args: "said")
    model = Model(*(calls(("echo", {"text": str(n)})) for n in range(3)))
    agent = loop(model, [echo], [], bounds=Bounds(max_turns=2))

    first = agent.run()
    again = agent.run(note="the tests fail")

    assert (first.reason, first.turns, again.reason, again.turns) == ("max_turns", 2, "max_turns", 2)
    assert len(model.requests) == 2


def test_done_before_any_write_is_told_back_once_then_taken() -> None:
    records: list[dict[str, Any]] = []
    model = Model(calls(("done", {"summary": "nothing"})), calls(("done", {"summary": "still nothing"})))

    ending = loop(model, [], records, version=lambda: 0).run()

    assert (ending.reason, ending.summary, ending.turns) == ("done", "still nothing", 2)
    told = records[0]["calls"][0]["result"]
    assert told.startswith("error: no file has been written yet") and records[0]["ending"] is None
    assert "no file has been written yet" in str(model.requests[1].turns[-1]["content"])


def test_done_after_a_write_ends_the_loop_at_once() -> None:
    records: list[dict[str, Any]] = []
    model = Model(calls(("done", {"summary": "s"})))

    ending = loop(model, [], records, version=lambda: 1).run()

    assert (ending.reason, ending.turns) == ("done", 1)


def test_a_conversation_past_the_window_shrinks_the_answers_room_then_ends_context_full() -> None:
    from dataclasses import replace

    from hub.agent.loop import MIN_ANSWER_TOKENS

    # Each call carries a long argument, which stays in the conversation (only tool results are dropped).
    note = Tool("note", "keep it", schema({"text": STR}, ["text"]), lambda args: "kept")
    model = Model(*(calls(("note", {"text": f"{n} " + "word " * 300})) for n in range(30)))
    records: list[dict[str, Any]] = []
    agent = loop(model, [note], records)
    agent.request = replace(agent.request, num_ctx=4096, num_predict=2048)

    ending = agent.run()

    assert ending.reason == "context_full" and "no longer fits the window" in ending.detail
    rooms = [r.num_predict for r in model.requests]
    assert rooms[0] == 2048 and any(r is not None and MIN_ANSWER_TOKENS <= r < 2048 for r in rooms)
    assert ending.turns < 30 and len(records) == len(model.requests)


def text(reply: str) -> Generation:
    return Generation(text=reply, model="m", prompt_tokens=10, completion_tokens=5)


def test_a_reply_in_words_after_a_write_ends_the_loop_done_with_its_words_as_the_summary() -> None:
    records: list[dict[str, Any]] = []
    model = Model(text("Done. add now returns the sum."))

    ending = loop(model, [], records, version=lambda: 1).run()

    assert (ending.reason, ending.summary, ending.turns) == ("done", "Done. add now returns the sum.", 1)
    assert records[0]["ending"] == "done"


def test_a_reply_in_words_before_any_write_is_reminded_and_the_second_ends_the_loop() -> None:
    records: list[dict[str, Any]] = []
    model = Model(text("Done."), text("Done."))

    ending = loop(model, [], records, version=lambda: 0).run()

    assert (ending.reason, ending.turns) == ("no_tool_call", 2)
    assert "called no tool" in str(model.requests[1].turns[-1]["content"])


def test_done_with_an_empty_summary_or_none_is_done_with_a_default_summary() -> None:
    from hub.agent.loop import DEFAULT_SUMMARY

    for arguments in ({}, {"summary": "  "}):
        records: list[dict[str, Any]] = []
        ending = loop(Model(calls(("done", arguments))), [], records).run()

        assert (ending.reason, ending.summary) == ("done", DEFAULT_SUMMARY)
        assert not records[0]["calls"][0]["problem"]


def test_the_same_refusal_twice_in_a_row_is_told_what_to_do_instead() -> None:
    def refuse(args: Mapping[str, Any]) -> str:
        raise ToolRefused(f"{args['path']}: no such file")

    look = Tool("look", "look at a file", schema({"path": STR}, ["path"]), refuse)
    model = Model(*(calls(("look", {"path": "a.py"})) for _ in range(2)), calls(("done", {})))
    records: list[dict[str, Any]] = []

    loop(model, [look], records).run()

    results = [r["calls"][0]["result"] for r in records[:2]]
    assert results[0] == "error: a.py: no such file"
    assert "second time in a row that look was refused" in results[1] and "Do something else" in results[1]


def test_a_refusal_with_advice_from_the_tool_is_told_that_advice_the_second_time() -> None:
    state = {"n": 0}

    def write(args: Mapping[str, Any]) -> str:
        state["n"] += 1
        return f"refused, nothing written ({state['n']})"

    given = Tool("write", "write", schema({"path": STR}, ["path"]), write)
    model = Model(calls(("write", {"path": "x"})), calls(("write", {"path": "y"})), calls(("done", {})))
    records: list[dict[str, Any]] = []

    loop(model, [given], records, refusal=lambda: Refused("outside", "Write only src/app.py.")).run()

    first, second = (r["calls"][0]["result"] for r in records[:2])
    assert first == "refused, nothing written (1)"
    assert second.startswith("refused, nothing written (2)") and second.endswith("Write only src/app.py.")


def test_a_map_that_leaves_no_room_is_left_out_of_the_prompt_before_the_first_call() -> None:
    from dataclasses import replace

    model = Model(calls(("done", {})))
    records: list[dict[str, Any]] = []
    agent = loop(model, [], records, lean_prompt="do it")
    agent.request = replace(
        agent.request, prompt="do it\n\n" + "map line\n" * 4000, num_ctx=4096, num_predict=512
    )

    assert agent.run().reason == "done"
    assert model.requests[0].prompt == "do it"


def test_a_reply_in_words_cut_off_at_the_answers_room_after_a_write_is_not_taken_as_done() -> None:
    records: list[dict[str, Any]] = []
    cut = Generation(
        text="I will now call", model="m", prompt_tokens=10, completion_tokens=5, done_reason="length"
    )
    model = Model(cut, calls(("done", {"summary": "s"})))

    ending = loop(model, [], records, version=lambda: 1).run()

    assert (ending.reason, ending.summary, ending.turns) == ("done", "s", 2)
    assert "called no tool" in str(model.requests[1].turns[-1]["content"])
