"""When a local reviewer's "critical" may halt a task: only on evidence a person would accept.

Measured with a real small reviewer (Qwen2.5-Coder-1.5B, issue 18): it calls correct code critical
("does not check if the input is a string", a case "not handled" that the code handles) while every test
passes, and a halt of correct work costs as much as a wrong merge: the person comes back to nothing done.
So a reviewer's finding halts only when

1. it is a security or data-loss finding (`kind: security`),
2. it quotes a line that the change really adds (its `quote`, found among the diff's added lines), and
3. a second look agrees: the reviewer, asked about that one line and claim alone, answers yes.

Every other critical is kept as a major finding for the judge (in the review request), with the reason
it did not halt. A static rule hit (ast-grep, severity error, tagged security) still halts at once: it is
evidence by construction. No model calls (the second look is the caller's), and the one file read is the
second look's template (prompts/second_look.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hub.core.templates import fragment
from hub.state.contract import Issue

if TYPE_CHECKING:
    from hub.core.config import Config

# A quote shorter than this is too common to prove anything ("return x", "}").
MIN_QUOTE_CHARS = 8
HALTING_KINDS = frozenset({"security"})


@dataclass(frozen=True)
class Judged:
    """A reviewer's critical findings sorted: those with evidence enough to ask a second look about,
    and the rest, downgraded to major with the reason (they go to the judge, never to a person)."""

    candidates: list[Issue]
    downgraded: list[Issue]


def added_lines(diff: str) -> dict[str, list[str]]:
    """The lines a unified diff adds, per file (the `+++ b/` path), stripped of their `+` and spaces."""
    added: dict[str, list[str]] = {}
    current = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            current = path[2:] if path.startswith("b/") else path
            added.setdefault(current, [])
        elif line.startswith("+") and current:
            added[current].append(line[1:].strip())
    return added


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quote_in_change(issue: Issue, added: dict[str, list[str]]) -> bool:
    """Whether the issue's quote is (part of) a line the change adds, in its file when it names one."""
    quote = _squeeze(str(issue.get("quote") or "")).strip("`")
    if len(quote) < MIN_QUOTE_CHARS:
        return False
    named = str(issue.get("file") or "")
    files = [f for f in added if named and (f == named or f.endswith("/" + named))] or list(added)
    return any(quote in _squeeze(line) for f in files for line in added[f])


def sort_criticals(issues: Iterable[Issue], diff: str) -> Judged:
    """The reviewer's critical findings into second-look candidates and downgraded ones."""
    added = added_lines(diff)
    candidates: list[Issue] = []
    downgraded: list[Issue] = []
    for issue in issues:
        if issue.get("severity") != "critical":
            continue
        if str(issue.get("kind") or "") not in HALTING_KINDS:
            why = "not a security finding"
        elif not quote_in_change(issue, added):
            why = "it quotes no line the change adds"
        else:
            candidates.append(issue)
            continue
        downgraded.append(downgrade(issue, why))
    return Judged(candidates, downgraded)


def downgrade(issue: Issue, why: str) -> Issue:
    return {
        **issue,
        "severity": "major",
        "description": f"{issue.get('description', '')} (rated critical by the local reviewer; not a halt: {why})",
    }


def second_look_prompt(issue: Issue, config: Config | None = None) -> str:
    """The question about one finding, from prompts/second_look.md (the trust root's own first; without
    a config, the packaged one)."""
    return fragment(
        config.trust_root if config is not None else None,
        "second_look",
        file=issue.get("file") or "the change",
        quote=_squeeze(str(issue.get("quote") or "")),
        description=str(issue.get("description") or "").strip(),
    )


def agrees(answer: str) -> bool:
    """A second look agrees only with a plain YES opening its answer (think blocks already gone)."""
    first = answer.strip().lstrip("*#> `").upper()
    return first.startswith("YES")
