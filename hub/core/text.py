"""Message text written one way everywhere: a long list shown as its first few items and "and N more"."""

from __future__ import annotations

from collections.abc import Sequence


def and_more(count: int, limit: int) -> str:
    """` and N more` when `count` items are more than the `limit` shown, else ``."""
    return f" and {count - limit} more" if count > limit else ""


def listed(items: Sequence[str], limit: int) -> str:
    """The first `limit` items joined with `, `, then ` and N more` for the rest."""
    return ", ".join(items[:limit]) + and_more(len(items), limit)
