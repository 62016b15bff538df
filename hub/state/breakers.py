"""Circuit breakers: pure functions from a contract (and diff figures) to a trip, or None.

Each one names a trigger a person will read in ERIK_HALT.md. Time is passed in; nothing here reads
a clock, a file or the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from hub.core.config import DEFAULT_MAX_CHANGED_FILES
from hub.state.contract import Contract, Verdict, parse_iso
from hub.state.triggers import Trigger

MAX_INTERRUPTIONS = 3


@dataclass(frozen=True)
class Trip:
    """Why a breaker tripped: the trigger, one sentence, the figures behind it, and what a person can do
    about it (the `hint`, shown as errors show theirs: hub.core.errors.with_hint)."""

    trigger: Trigger
    reason: str
    evidence: dict[str, object] = field(default_factory=dict)
    hint: str = ""


def counter(contract: Contract, name: str) -> int:
    return int(contract.get("breaker", {}).get("counters", {}).get(name, 0))


def rebuttals_exceeded(contract: Contract) -> Trip | None:
    used, limit = counter(contract, "rebuttals"), contract["limits"]["max_rebuttals"]
    if used >= limit:
        return Trip(
            Trigger.REBUTTAL_LIMIT, f"{used} rebuttals filed; the limit is {limit}", {"rebuttals": used}
        )
    return None


def review_cycles_exceeded(contract: Contract) -> Trip | None:
    cycles, limit = counter(contract, "review_cycles"), contract["limits"]["max_review_cycles"]
    if cycles >= limit:
        return Trip(
            Trigger.REVIEW_CYCLES,
            f"{cycles} judge reviews without a PASS; the limit is {limit}",
            {"review_cycles": cycles, "max_review_cycles": limit},
        )
    return None


def destructive_diff(added: int, removed: int, delete_allowed: bool = False) -> Trip | None:
    """More than half of the changed lines are deletions."""
    total = added + removed
    if delete_allowed or total == 0 or removed * 2 <= total:
        return None
    return Trip(
        Trigger.DESTRUCTIVE_DIFF,
        f"{removed} of {total} changed lines are deletions (more than half)",
        {"added": added, "removed": removed},
    )


def too_many_files(contract: Contract, changed_files: int) -> Trip | None:
    limit = contract["limits"].get("max_changed_files", DEFAULT_MAX_CHANGED_FILES)
    if changed_files > limit:
        return Trip(
            Trigger.TOO_MANY_FILES,
            f"{changed_files} files changed; the limit is {limit}",
            {"changed_files": changed_files},
        )
    return None


def hash_loop(contract: Contract, content_hash: str) -> Trip | None:
    """The implementer produced exactly the content of an earlier attempt the judge FAILed."""
    for attempt in contract["handoff_data"].get("attempts", []):
        if attempt.get("content_hash") == content_hash and attempt.get("verdict") in (
            Verdict.FAIL,
            Verdict.CONDITIONAL,
        ):
            return Trip(
                Trigger.HASH_LOOP,
                f"attempt {contract['attempt']} wrote the same files as attempt {attempt.get('attempt')}, "
                f"which the judge rated {attempt.get('verdict')}",
                {"content_hash": content_hash[:16], "earlier_attempt": attempt.get("attempt")},
            )
    return None


def budget_exceeded(contract: Contract) -> Trip | None:
    cost = contract.get("cost", {})
    tokens = sum(int(r.get("tokens_in", 0)) + int(r.get("tokens_out", 0)) for r in cost.values())
    usd = sum(float(r.get("usd", 0.0)) for r in cost.values())
    token_budget = contract["limits"].get("token_budget")
    ceiling = contract["limits"].get("cost_ceiling_usd")
    if token_budget is not None and tokens > token_budget:
        return Trip(
            Trigger.TOKEN_BUDGET, f"{tokens} tokens used; the budget is {token_budget}", {"tokens": tokens}
        )
    if ceiling is not None and usd > ceiling:
        return Trip(
            Trigger.COST_CEILING, f"${usd:.2f} spent; the ceiling is ${ceiling:.2f}", {"usd": round(usd, 4)}
        )
    return None


def global_timeout(contract: Contract, now: datetime) -> Trip | None:
    deadline = contract["timestamps"].get("deadline_at")
    if deadline and now > parse_iso(deadline):
        return Trip(
            Trigger.GLOBAL_TIMEOUT, f"the task passed its deadline {deadline}", {"deadline_at": deadline}
        )
    return None


def interruptions_exceeded(contract: Contract) -> Trip | None:
    n = counter(contract, "interruptions")
    if n >= MAX_INTERRUPTIONS:
        return Trip(Trigger.INTERRUPTIONS, f"the phase died {n} times in a row", {"interruptions": n})
    return None


def before_phase(contract: Contract, now: datetime) -> Trip | None:
    """The checks every phase makes before it starts work."""
    return budget_exceeded(contract) or global_timeout(contract, now) or interruptions_exceeded(contract)


def after_implementation(
    contract: Contract, files: int, added: int, removed: int, content_hash: str
) -> Trip | None:
    """The checks on what an implementer attempt wrote."""
    return (
        too_many_files(contract, files)
        or destructive_diff(added, removed, contract["constraints"].get("delete_allowed", False))
        or hash_loop(contract, content_hash)
        or budget_exceeded(contract)
    )
