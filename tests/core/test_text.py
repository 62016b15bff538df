"""hub.core.text: a long list in a message reads as its first few items and "and N more"."""

from __future__ import annotations

from hub.core.text import and_more, listed


def test_a_list_within_the_limit_is_shown_whole() -> None:
    assert listed(["a", "b"], 2) == "a, b"
    assert listed([], 3) == ""


def test_a_longer_list_shows_the_first_items_and_counts_the_rest() -> None:
    assert listed(["a", "b", "c", "d"], 2) == "a, b and 2 more"
    assert and_more(25, 20) == " and 5 more"
    assert and_more(20, 20) == ""
