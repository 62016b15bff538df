"""STATUS.md: assembled from one row per task, it shows what `hub status` shows, and a transition of
one task renders that task's row only."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from hub.phases.context import Context
from hub.phases.run import Run
from hub.phases.status import status
from hub.phases.status_md import ROW_FILE, render_status_md, write_status
from hub.state import store

if TYPE_CHECKING:
    from conftest import TaskDriver


def two_tasks(ctx: Context, task: TaskDriver) -> tuple[Context, Context]:
    first = task.new(title="First task")
    second = task.new(title="Second task")
    return ctx.for_task(first), ctx.for_task(second)


def shown(ctx: Context) -> str:
    return ctx.handoff_root.status_file.read_text(encoding="utf-8")


def test_status_md_shows_what_hub_status_shows_after_every_transition(ctx: Context, task: TaskDriver) -> None:
    first, second = two_tasks(ctx, task)
    assert shown(ctx) == render_status_md(status(ctx.for_task(None)))
    run = Run(first, store.load(first.handoff.contract), "test")
    for event in ("lock_acquired", "code_written", "circuit_breaker_halt"):
        run.record(event)  # type: ignore[arg-type]
        assert shown(ctx) == render_status_md(status(ctx.for_task(None)))
    # The halted task needs a person: it comes first.
    assert shown(ctx).index(first.task_id or "") < shown(ctx).index(second.task_id or "")


def test_a_transition_of_one_task_renders_its_own_row_and_reuses_the_others(
    ctx: Context, task: TaskDriver
) -> None:
    first, second = two_tasks(ctx, task)
    rows = {c.task_id: c.handoff.task_dir / ROW_FILE for c in (first, second)}
    before = {
        task_id: (path.stat().st_ino, path.read_text(encoding="utf-8")) for task_id, path in rows.items()
    }

    Run(first, store.load(first.handoff.contract), "test").record("lock_acquired")  # type: ignore[arg-type]

    after = {
        task_id: (path.stat().st_ino, path.read_text(encoding="utf-8")) for task_id, path in rows.items()
    }
    assert after[second.task_id] == before[second.task_id]
    assert after[first.task_id] != before[first.task_id]
    assert "implementation_in_progress" in json.loads(after[first.task_id][1])["lines"][2]


def test_a_row_is_rendered_again_when_a_judge_report_lands_beside_its_task(
    ctx: Context, task: TaskDriver
) -> None:
    first, second = two_tasks(ctx, task)
    second.handoff.judge_report_json.write_text("{}", encoding="utf-8")
    write_status(first)
    assert shown(ctx) == render_status_md(status(ctx.for_task(None)))
