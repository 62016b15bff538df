"""`hub.state.task.Task` is the only writer of a contract: every other module of hub/ reads it.

The check is over the source (tests/state/test_task.py): a write to the contract or to what a module
took out of it (`data = run.contract["handoff_data"]`, `git = contract["git"]`) anywhere but the record
and the store that saves it fails here, naming the line."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hub.core.errors import InvalidTransition
from hub.state.contract import now_utc
from hub.state.new_task import new_contract
from hub.state.schema import validate
from hub.state.task import Task
from hub.state.triggers import Trigger

HUB = Path(__file__).resolve().parents[2] / "hub"
WRITERS = {"state/task.py", "state/store.py"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "setdefault", "update", "sort"}
# handoff_data's keys (hub.state.contract.HandoffData): distinctive enough to flag wherever they are written.
HANDOFF_KEYS = {
    "changed_files",
    "diff_summary",
    "local_review_passed",
    "local_review_issues",
    "local_review_note",
    "judge_verdict",
    "judge_blocking_issues",
    "judge_suggestions",
    "judge_summary",
    "acceptance_results",
    "attempts",
    "stalls",
    "stashes",
    "halt",
    "resume_notes",
    "review_requested_at",
    "review_request_mtime_ns",
    "merge_commit",
    "reviewed_commit",
    "merge_wait",
    "server_wait",
    "sandbox",
    "committing",
    "handoff_data",
}


def _from_contract(node: ast.expr, taken: set[str]) -> bool:
    """`node` is the contract or a part of it (not a copy): `run.contract["git"]`, `data.get("x") or {}`."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute):
            if node.attr == "contract":
                return True
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr
            in (
                "get",
                "setdefault",
            )
        ):
            node = node.func.value
        elif isinstance(node, ast.BoolOp):
            return any(_from_contract(value, taken) for value in node.values)
        elif isinstance(node, ast.Name):
            return node.id == "contract" or node.id in taken
        else:
            return False


def _key(node: ast.Subscript) -> object:
    return node.slice.value if isinstance(node.slice, ast.Constant) else None


def _walk(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a scope: a function with what it nests (closures share its names), the module
    without its functions."""
    if not isinstance(scope, ast.Module):
        return list(ast.walk(scope))
    nodes: list[ast.AST] = []
    todo: list[ast.AST] = [scope]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo += [
            c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
    return nodes


def _taken(nodes: list[ast.AST]) -> set[str]:
    """Names bound to the contract or a part of it in these nodes."""
    taken: set[str] = set()
    while True:  # until nothing more is found: an alias may be seen before what it aliases
        before = len(taken)
        _take(nodes, taken)
        if len(taken) == before:
            return taken


def _take(nodes: list[ast.AST], taken: set[str]) -> None:
    for node in nodes:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            # `for attempt in reversed(data["attempts"])`: each item is the contract's own.
            items = node.iter
            if isinstance(items, ast.Call) and getattr(items.func, "id", None) == "reversed" and items.args:
                items = items.args[0]
            if _from_contract(items, taken):
                taken.add(node.target.id)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value] * len(names)
                for name, value in zip(names, values, strict=False):
                    if isinstance(name, ast.Name) and _from_contract(value, taken):
                        taken.add(name.id)


def _writes(nodes: list[ast.AST], taken: set[str]) -> set[int]:
    lines = set()
    for node in nodes:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript) and (
                _from_contract(target.value, taken) or _key(target) in HANDOFF_KEYS
            ):
                lines.add(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            first = node.args[0] if node.args else None
            named = isinstance(first, ast.Constant) and first.value in HANDOFF_KEYS
            if _from_contract(node.func.value, taken) or (named and node.func.attr in ("pop", "setdefault")):
                lines.add(node.lineno)
    return lines


def contract_writes(source: str) -> list[int]:
    """The lines of `source` that write a contract (names are followed within one function)."""
    tree = ast.parse(source)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    lines: set[int] = set()
    for scope in scopes:
        nodes = _walk(scope)
        lines |= _writes(nodes, _taken(nodes))
    return sorted(lines)


def test_no_module_but_the_task_record_and_the_store_writes_a_contract() -> None:
    writes = {
        rel: lines
        for path in sorted(HUB.rglob("*.py"))
        if (rel := path.relative_to(HUB).as_posix()) not in WRITERS and not path.name.startswith("_validate")
        if (lines := contract_writes(path.read_text(encoding="utf-8")))
    }
    assert writes == {}


def test_the_check_sees_writes_through_the_contract_and_what_was_taken_out_of_it() -> None:
    source = "\n".join(
        [
            'run.contract["status"] = "merged"',  # 1
            'data = run.contract["handoff_data"]',
            'data["judge_verdict"] = None',  # 3
            'data.pop("merge_wait", None)',  # 4
            'git = contract["git"]',
            'git.update({"worktree": "w"})',  # 6
            'contract.setdefault("breaker", {})["counters"] = {}',  # 7
            'copy = list(contract["history"])',
            "copy.append(1)",  # a copy: not a write
            'def f(d):\n    d["merge_wait"] = "x"',  # 10-11
            'self.contract["attempt"] += 1',  # 12
            'for attempt in reversed(data.get("attempts", [])):\n    attempt["verdict"] = "PASS"',  # 13-14
        ]
    )
    assert contract_writes(source) == [1, 3, 4, 6, 7, 11, 12, 14]


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def task() -> Task:
    return Task(new_contract(project="p", title="t", requirements=["r"], now=now_utc(), roles={}))


def test_a_halt_trips_the_breaker_and_records_where_the_task_halted_from() -> None:
    t = task()
    t.take_lease("host:1", NOW, 5)
    t.set_halt(Trigger.HASH_LOOP, "same files again")
    t.advance("circuit_breaker_halt", NOW, "hash_loop: same files again")
    assert t.contract["breaker"]["status"] == "tripped" and t.contract["lock"] is None
    assert t.data["halt"] == {
        "trigger": "hash_loop",
        "reason": "same files again",
        "from_state": "pending_implementer",
    }
    t.reset_breakers()
    assert t.contract["breaker"]["trigger"] is None
    validate(t.contract)


def test_a_verdict_is_recorded_on_the_task_and_on_the_attempt_it_judged() -> None:
    t = task()
    t.record_written(
        ["a.py"],
        "1 files changed, +1 -0",
        {"attempt": 1, "content_hash": "h", "commit": "c", "changed_files": ["a.py"], "verdict": None},
    )
    t.record_verdict("FAIL", [], [], "no")
    assert t.verdict == "FAIL" and t.data["attempts"][-1]["verdict"] == "FAIL"
    validate(t.contract)


def test_rewinding_a_hand_set_merged_is_recorded_and_goes_to_the_last_recorded_state() -> None:
    t = task()
    t.advance("lock_acquired", NOW)
    t.contract["status"] = "merged"  # by hand (a test may write the contract; hub/ may not)
    line = t.rewind_status(NOW, "not in the base")
    assert (line["old_status"], line["new_status"], line["event"]) == (
        "merged",
        "implementation_in_progress",
        "rewind",
    )
    assert t.status == "implementation_in_progress" and t.history[-1]["event"] == "rewind"


def test_a_transition_the_machine_does_not_have_is_refused() -> None:
    with pytest.raises(InvalidTransition):
        task().advance("pass", NOW)
