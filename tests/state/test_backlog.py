"""The backlog and notes: queueing proposals, what `task-next` picks, promotion by `hub next`, and notes
reaching the implementer's prompt. Real repos and real files; the CLI as a subprocess where it is the
boundary."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.errors import ContractInvalid, WrongState
from hub.phases.context import Context
from hub.phases.next import run_next
from hub.phases.promote import promote_next
from hub.state import backlog
from hub.state.contract import iso

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver

PROPOSAL = """# Greet politely

Target: src/app.py

## Requirements

- greet() says 'hello, NAME'
"""


def entries(ctx: Context) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in backlog.list_tasks(ctx.handoff, ctx.clock)}


def finish_active_task(task: TaskDriver) -> None:
    """Drive the active (promoted) task to merged and archived, as the pipeline would."""
    from hub.phases.finalize import finalize_task

    task.to_review_complete("PASS")
    assert finalize_task(task.ctx).to_state == "merged"


def test_task_next_picks_the_most_urgent_proposal_whose_dependencies_are_merged(ctx: Context) -> None:
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [
            {"id": "base", "content": "Lay the base", "priority": 3},
            {"id": "urgent", "content": "Urgent but blocked", "priority": 0, "depends_on": ["base"]},
            {"id": "later", "content": "Unrelated", "priority": 3},
            {"id": "soon", "content": "Unrelated and sooner", "priority": 1},
        ],
    )

    assert backlog.next_task(ctx.handoff, ctx.clock)["task"]["id"] == "soon"
    backlog.update_task(ctx.handoff, ctx.clock, "soon", {"status": "dropped"})
    # Equal priority: the one added first.
    assert backlog.next_task(ctx.handoff, ctx.clock)["task"]["id"] == "base"
    backlog.update_task(ctx.handoff, ctx.clock, "base", {"status": "blocked"})
    assert backlog.next_task(ctx.handoff, ctx.clock)["task"]["id"] == "later"
    backlog.update_task(ctx.handoff, ctx.clock, "later", {"status": "dropped"})
    nothing = backlog.next_task(ctx.handoff, ctx.clock)
    assert nothing["task"] is None
    assert "urgent waits on base (blocked)" in nothing["why"]


def test_hub_next_promotes_the_next_proposal_after_a_merge(
    ctx: Context, task: TaskDriver, hub: HubRunner
) -> None:
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [
            {"id": "first", "content": PROPOSAL, "priority": 2},
            {
                "id": "second",
                "content": "Say goodbye\nAdd farewell(name).\nTarget: src/app.py",
                "priority": 0,
                "depends_on": ["first"],
            },
        ],
    )

    promoted = run_next(ctx)

    assert promoted.data["ran"] == "promote-backlog"
    contract = task.contract()
    assert contract["title"] == "Greet politely"
    assert contract["specification"]["target_file"] == "src/app.py"
    assert contract["specification"]["requirements"] == ["greet() says 'hello, NAME'"]
    first = entries(ctx)["first"]
    assert (first["status"], first["task_id"]) == ("in_progress", contract["task_id"])
    # While a task is active nothing else is promoted, however urgent.
    assert promote_next(ctx).task_id is None

    finish_active_task(task)
    assert entries(ctx)["first"]["status"] == "merged"

    done = hub("next", "--json")

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["data"]["backlog_id"] == "second"
    second_contract = task.contract()
    assert second_contract["title"] == "Say goodbye"
    assert second_contract["specification"]["requirements"] == [
        "Say goodbye\nAdd farewell(name).\nTarget: src/app.py"
    ]
    assert second_contract["specification"]["target_file"] == "src/app.py"
    stored = json.loads(ctx.handoff.backlog.read_text(encoding="utf-8"))
    assert [(e["id"], e["status"]) for e in stored["tasks"]] == [
        ("first", "merged"),
        ("second", "in_progress"),
    ]


def test_task_add_is_all_or_nothing(ctx: Context) -> None:
    backlog.add_tasks(ctx.handoff, ctx.clock, [{"content": "one"}])
    before = ctx.handoff.backlog.read_bytes()

    with pytest.raises(ContractInvalid, match="no backlog task 'missing'"):
        backlog.add_tasks(
            ctx.handoff, ctx.clock, [{"content": "two"}, {"content": "three", "depends_on": ["missing"]}]
        )
    with pytest.raises(ContractInvalid, match="from 0"):
        backlog.add_tasks(ctx.handoff, ctx.clock, [{"content": "four", "priority": 5}])
    with pytest.raises(ContractInvalid, match="complexity"):
        backlog.add_tasks(
            ctx.handoff, ctx.clock, [{"content": "# T\n\nComplexity: huge\n\n## Requirements\n\n- x\n"}]
        )

    assert ctx.handoff.backlog.read_bytes() == before


def test_a_dependency_cycle_is_refused(ctx: Context) -> None:
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [{"id": "a", "content": "a"}, {"id": "b", "content": "b", "depends_on": ["a"]}],
    )

    with pytest.raises(ContractInvalid, match="cycle"):
        backlog.update_task(ctx.handoff, ctx.clock, "a", {"depends_on": ["b"]})

    assert entries(ctx)["a"]["depends_on"] == []


def test_the_hub_alone_sets_in_progress_and_merged(ctx: Context) -> None:
    backlog.add_tasks(ctx.handoff, ctx.clock, [{"id": "a", "content": "a\nTarget: src/app.py"}])
    with pytest.raises(ContractInvalid, match="proposed, blocked, dropped"):
        backlog.update_task(ctx.handoff, ctx.clock, "a", {"status": "merged"})

    run_next(ctx)

    with pytest.raises(WrongState, match="active task"):
        backlog.update_task(ctx.handoff, ctx.clock, "a", {"status": "dropped"})
    with pytest.raises(WrongState, match="no longer change"):
        backlog.update_task(ctx.handoff, ctx.clock, "a", {"content": "something else"})


def test_session_complete_waits_until_every_task_is_merged_or_dropped(ctx: Context, task: TaskDriver) -> None:
    ctx.config = ctx.config._replace(parallel_tasks=1)  # one task in flight: the second stays proposed
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [{"id": "a", "content": "Greet\nsay hello\nTarget: src/app.py"}, {"id": "b", "content": "b"}],
    )
    with pytest.raises(WrongState, match=r"2 backlog tasks are not merged or dropped: a \(proposed\)"):
        backlog.session_complete(ctx.handoff, ctx.clock)

    run_next(ctx)
    finish_active_task(task)
    backlog.update_task(ctx.handoff, ctx.clock, "b", {"status": "dropped"})
    session = backlog.session_complete(ctx.handoff, ctx.clock)

    assert (session["merged"], session["dropped"]) == (1, 1)
    assert json.loads(ctx.handoff.backlog.read_text(encoding="utf-8"))["session"] == session


def test_a_promotion_that_cannot_create_the_contract_puts_the_proposal_back(ctx: Context) -> None:
    backlog.add_tasks(ctx.handoff, ctx.clock, [{"id": "a", "content": "a\nTarget: src/app.py"}])
    ctx.handoff_root.tasks_dir.write_text("a file where the tasks folder goes", encoding="utf-8")

    with pytest.raises(FileExistsError):
        promote_next(ctx)

    assert entries(ctx)["a"]["status"] == "proposed"


def test_a_promoter_that_died_midway_is_repaired(ctx: Context, task: TaskDriver) -> None:
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [{"id": "linked", "content": "Greet politely\nx"}, {"id": "orphan", "content": "o"}],
    )
    doc = json.loads(ctx.handoff.backlog.read_text(encoding="utf-8"))
    long_ago = iso(ctx.clock() - timedelta(minutes=5))
    for entry in doc["tasks"]:
        entry.update(status="in_progress", task_id=None, promoted_at=long_ago)
    ctx.handoff.backlog.write_text(json.dumps(doc), encoding="utf-8")
    task_id = task.new(title="Greet politely")

    backlog.add_tasks(ctx.handoff, ctx.clock, [{"id": "c", "content": "c"}])  # any write repairs the backlog

    now = entries(ctx)
    assert (now["linked"]["status"], now["linked"]["task_id"]) == ("in_progress", task_id)
    # The other one has no contract to show for it; with a task active it waits, once none is, it is released.
    assert now["orphan"]["task_id"] is None
    ctx.handoff.contract.unlink()
    backlog.add_tasks(ctx.handoff, ctx.clock, [{"id": "d", "content": "d"}])
    assert entries(ctx)["orphan"]["status"] == "proposed"


def test_notes_attach_to_the_active_task_and_reach_its_prompt(ctx: Context, task: TaskDriver) -> None:
    everyone = backlog.add_note(ctx.handoff, ctx.clock, "the project uses pathlib", "tip")
    task_id = task.new()
    mine = backlog.add_note(ctx.handoff, ctx.clock, "greet() is called from cli.py too", "learning")
    backlog.add_note(ctx.handoff, ctx.clock, "use an f-string", "decision")

    assert everyone["task_id"] is None and mine["task_id"] == task_id
    shown = backlog.notes_for_prompt(ctx.handoff, task_id)
    assert [n["content"] for n in shown] == [
        "the project uses pathlib",
        "greet() is called from cli.py too",
        "use an f-string",
    ]
    assert [n["content"] for n in backlog.notes_for_prompt(ctx.handoff, "another-task")] == [
        "the project uses pathlib"
    ]
    assert [n["id"] for n in backlog.list_notes(ctx.handoff, "decision")] == ["N3"]
    with pytest.raises(ContractInvalid, match="learning, stuck, tip, decision"):
        backlog.add_note(ctx.handoff, ctx.clock, "x", "rant")


def test_iteration_summaries_are_kept_with_the_notes(ctx: Context) -> None:
    item = backlog.iteration_summary(ctx.handoff, ctx.clock, "added greet()")

    stored = json.loads(ctx.handoff.notes.read_text(encoding="utf-8"))
    assert stored["summaries"] == [item]
    assert item["summary"] == "added greet()"


def test_backlog_and_note_commands_on_the_cli(hub: HubRunner) -> None:
    assert hub("backlog", "add", "Lay the base", "--id", "base", "--priority", "3").returncode == 0
    added = hub("backlog", "add", "Build on it", "--depends-on", "base", "--priority", "0", "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)[0]["depends_on"] == ["base"]

    listed = hub("backlog", "list")
    nxt = hub("backlog", "next", "--json")
    refused = hub("backlog", "complete")
    note = hub("note", "add", "remember the comma", "--type", "tip", "--json")

    assert "base" in listed.stdout and "after base" in listed.stdout
    assert json.loads(nxt.stdout)["task"]["id"] == "base"
    assert refused.returncode == 3 and "not merged or dropped" in refused.stderr
    assert json.loads(note.stdout)["type"] == "tip"
    assert "remember the comma" in hub("note", "list").stdout


def test_with_several_tasks_a_note_goes_to_the_task_named(ctx: Context) -> None:
    from hub.phases.setup import create

    first = str(create(ctx, {"title": "One", "requirements": ["r"], "target_file": "README.md"}).task_id)
    second = str(create(ctx, {"title": "Two", "requirements": ["r"], "target_file": "README.md"}).task_id)
    note = backlog.add_note(ctx.for_task(first).handoff, ctx.clock, "keep the signature", "tip")
    assert note["task_id"] == first
    assert (
        backlog.add_note(ctx.handoff, ctx.clock, "for everyone", "tip")["task_id"] is None
    )  # several active: every task
    first_notes = [n["content"] for n in backlog.list_notes(ctx.for_task(first).handoff, None, False)]
    second_notes = [n["content"] for n in backlog.list_notes(ctx.for_task(second).handoff, None, False)]
    assert first_notes == ["keep the signature", "for everyone"]
    assert second_notes == ["for everyone"]


def test_a_mistyped_proposal_is_blocked_with_the_reason_and_one_naming_no_file_is_promoted(
    ctx: Context, task: Any
) -> None:
    backlog.add_tasks(
        ctx.handoff,
        ctx.clock,
        [
            {"id": "typo", "content": "Greet politely\nSource: src/ap.py", "priority": 0},
            {"id": "vague", "content": "Make it better", "priority": 1},
        ],
    )

    blocked = run_next(ctx)

    assert blocked.task_id is None and "backlog task typo blocked" in blocked.message
    typo = entries(ctx)["typo"]
    assert typo["status"] == "blocked" and "did you mean src/app.py?" in typo["blocked_reason"]
    assert "Source: a.py, b.py" in typo["blocked_reason"]
    assert ctx.handoff_root.task_ids() == []
    # A proposal naming no file is a task whose files the implementer finds with the repository map.
    promoted = run_next(ctx)
    assert promoted.data["backlog_id"] == "vague"
    spec = task.contract()["specification"]
    assert spec["find_files"] is True and spec["target_file"] is None


def test_updating_a_missing_backlog_task_names_the_list_command_of_each_face(hub: HubRunner) -> None:
    done = hub("backlog", "update", "B9", "--priority", "1")
    assert done.returncode == 1
    assert "no backlog task 'B9'; fix: see `hub backlog list`, or task_list over MCP" in done.stderr


def test_backlog_next_says_when_hub_next_would_block_the_proposal_it_names(hub: HubRunner) -> None:
    assert hub("backlog", "add", "Greet\nSource: src/ap.py", "--id", "typo").returncode == 0
    shown = hub("backlog", "next")
    doc = json.loads(hub("backlog", "next", "--json").stdout)
    assert doc["task"]["id"] == "typo" and "did you mean src/app.py?" in doc["blocked"]
    assert f"`hub next` blocks it: {doc['blocked']}" in shown.stdout
    assert hub("next").stdout.startswith(f"backlog task typo blocked: {doc['blocked']}")


def test_a_backlog_file_that_is_not_utf8_is_refused_naming_it(ctx: Context) -> None:
    ctx.handoff.ensure()
    ctx.handoff.backlog.write_bytes(b'{"tasks": ["\xff"]}')
    with pytest.raises(ContractInvalid, match=r"backlog\.json: \$: not UTF-8 text \(byte 12\)"):
        backlog.list_tasks(ctx.handoff, ctx.clock)
