"""Every halt trigger is spelled once, in `hub.state.triggers.Trigger`; the values are what contracts on
disk and ERIK_HALT.md already hold."""

from __future__ import annotations

import ast
from pathlib import Path

from hub.state.triggers import Trigger

HUB = Path(__file__).resolve().parents[2] / "hub"

# Words that are both a trigger and something else (a breaker counter, an event, a clock in hub.yaml):
# only a place that names a trigger may not spell them.
ALSO_SOMETHING_ELSE = {"stall", "critical_flaw", "interruptions", "review_cycles", "token_budget"}


def _strings(node: ast.AST) -> list[ast.Constant]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def free_trigger_strings(source: str) -> list[tuple[int, str]]:
    """(line, value) of every trigger spelled as a string where a Trigger belongs."""
    values = {t.value for t in Trigger}
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Trip"
        ):
            named = [kw.value for kw in node.keywords if kw.arg == "trigger"]
            for arg in node.args[:1] + named:
                found += [c for c in _strings(arg) if c.value in values]
        elif isinstance(node, ast.Constant) and node.value in values - ALSO_SOMETHING_ELSE:
            found.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.Compare):
            # `trigger = "git_error"`, `trip.trigger == "stall"`, `NOTE_NEEDED = {"stall", ...}`
            text = ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node)
            if "trigger" in text.lower() or "NOTE_NEEDED" in text:
                found += [c for c in _strings(node) if c.value in values]
    return sorted({(c.lineno, c.value) for c in found})


def test_no_module_spells_a_halt_trigger_as_a_free_string() -> None:
    spelled = {
        str(path.relative_to(HUB)): hits
        for path in HUB.rglob("*.py")
        if path.name != "triggers.py" and not path.name.startswith("_validate")
        if (hits := free_trigger_strings(path.read_text(encoding="utf-8")))
    }
    assert spelled == {}


def test_the_check_sees_a_trigger_spelled_in_a_trip_an_assignment_and_a_set() -> None:
    source = (
        'Trip("stall" if x else "review_stall", "why")\n'
        'trigger, hint = "git_error", ""\n'
        'NOTE_NEEDED = frozenset({"hash_loop"})\n'
        'breakers.Trip(trigger="interruptions", reason="r")\n'
        'counters.pop("interruptions", None)\n'
    )
    assert free_trigger_strings(source) == [
        (1, "review_stall"),
        (1, "stall"),
        (2, "git_error"),
        (3, "hash_loop"),
        (4, "interruptions"),
    ]


def test_trigger_values_are_the_strings_contracts_on_disk_hold() -> None:
    assert Trigger.SERVER_UNAVAILABLE == "server_unavailable"
    assert f"{Trigger.HASH_LOOP}" == "hash_loop"
    assert len({t.value for t in Trigger}) == len(Trigger) == 27
