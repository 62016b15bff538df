"""Message text written one way everywhere: a long list shown as its first few items and "and N more",
and one line of text from outside made safe to print."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence


def and_more(count: int, limit: int) -> str:
    """` and N more` when `count` items are more than the `limit` shown, else ``."""
    return f" and {count - limit} more" if count > limit else ""


def listed(items: Sequence[str], limit: int) -> str:
    """The first `limit` items joined with `, `, then ` and N more` for the rest."""
    return ", ".join(items[:limit]) + and_more(len(items), limit)


def one_line(text: str) -> str:
    """`text` on one printable line: control and format characters (newlines, the escape that starts a
    terminal sequence, bidi overrides) become spaces, runs of spaces one. A title from outside must not
    set the terminal's title or print a fake `Status:` line."""
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
    return " ".join(cleaned.split())
