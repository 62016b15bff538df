"""workers/base.split_thinking: think blocks come out of prose, never out of code fences."""

from __future__ import annotations

from hub.workers.base import split_thinking


def test_a_think_block_before_the_answer_is_taken_out_and_kept_apart() -> None:
    assert split_thinking("<think>plan it</think>\n\nThe answer.") == ("The answer.", "plan it")


def test_think_tags_inside_a_code_fence_are_part_of_the_file() -> None:
    answer = 'tags.py\n```python\nOPEN = "<think>"\nCLOSE = "</think>"\n```\n'
    assert split_thinking(answer) == (answer.strip(), "")


def test_a_fence_inside_thinking_does_not_hide_the_closing_tag() -> None:
    text, thinking = split_thinking("<think>draft:\n```python\nx = 1\n</think>\na.py\n```python\nx = 2\n```")
    assert text == "a.py\n```python\nx = 2\n```"
    assert thinking == "draft:\n```python\nx = 1"


def test_an_unclosed_think_block_runs_to_the_end() -> None:
    assert split_thinking("Answer first.\n<think>and then I wondered") == (
        "Answer first.",
        "and then I wondered",
    )


def test_a_tag_named_in_backticks_is_prose_not_thinking() -> None:
    text = "Wrap it in `<think>` tags."
    assert split_thinking(text) == (text, "")


def test_a_tilde_fence_and_a_longer_backtick_fence_protect_their_contents() -> None:
    answer = "~~~\n<think>kept</think>\n~~~\n````md\n```\n<think>kept too</think>\n```\n````"
    assert split_thinking(answer) == (answer, "")
