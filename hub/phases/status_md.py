"""_handoff/STATUS.md: every task, its state, and what it needs from a person, people first.

Written at every transition and task creation, from one row per task kept beside it
(`tasks/<id>/.status_row.json`): a task's row is rendered again only when what it shows may have
changed (its contract, its judge report or cleanup note, the judge's clock), so a transition of one task
reads and validates one contract, not every task's. The file is what `render_status_md` makes of
`hub status`'s document.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import TypedDict

from hub.core.atomic import write_atomic
from hub.core.errors import ContractInvalid, HubError
from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.status import (
    StatusDoc,
    TaskView,
    damaged_view,
    judge_configured,
    report_waiting,
    review_deadline,
    task_view,
)
from hub.state import store
from hub.state.contract import parse_iso

log = get_logger(__name__)

ROW_FILE = ".status_row.json"
STATUS_LOCK_SECONDS = 30.0


class Row(TypedDict):
    """One task's part of STATUS.md, and what it was rendered from."""

    task_id: str
    needs_person: bool
    lines: list[str]
    stamp: list[object]  # `_stamp`: the files and settings the row shows
    deadline: str | None  # the judge's review deadline: the row changes when it passes
    deadline_passed: bool


def section(t: TaskView) -> list[str]:
    """One task in STATUS.md."""
    nxt = t["next"]["phase"]
    lines = [f"## {t['task_id']}: {t['title']}", ""]
    lines.append(f"- State: `{t['status']}` (attempt {t['attempt']}); {t['status_reason'] or ''}")
    if t["needs_person"]:
        lines.append(f"- **Needs you:** {t['needs_person']}")
    shown = f"`hub {nxt} --task {t['task_id']}`" if nxt else "nothing"  # bare, it is ambiguous
    lines.append(f"- Next: {shown} ({t['next']['why']})")
    if t["worktree"]:
        lines.append(f"- Worktree: `{t['worktree']}` (branch `{t['branch']}`)")
    lines.append("")
    return lines


def _render(parts: list[tuple[bool, str, list[str]]]) -> str:
    """STATUS.md from (needs a person, task id, section) of every task."""
    lines = ["# Tasks", "", "Written by `hub` at every transition; `hub status` shows the same.", ""]
    if not parts:
        lines.append("No task in flight.")
    for _, _, part in sorted(parts, key=lambda p: (not p[0], p[1])):
        lines += part
    return "\n".join(lines).rstrip() + "\n"


def render_status_md(doc: StatusDoc) -> str:
    """_handoff/STATUS.md: every task, its state, and what it needs from a person, people first."""
    return _render([(t["needs_person"] is not None, t["task_id"], section(t)) for t in doc["tasks"]])


def _stamp(ctx: Context) -> list[object] | None:
    """What a task's row shows besides the clock; None when its contract is gone (archived)."""
    hand = ctx.handoff
    try:
        contract = hand.contract.stat()
    except FileNotFoundError:
        return None
    try:
        cleanup = hand.cleanup_failed.stat().st_mtime_ns
    except OSError:
        cleanup = None
    return [
        contract.st_mtime_ns,
        contract.st_size,
        contract.st_ino,
        report_waiting(ctx),
        cleanup,
        judge_configured(ctx),
        str(hand.dir),
    ]


def _passed(deadline: str | None, ctx: Context) -> bool:
    return bool(deadline) and ctx.clock() > parse_iso(str(deadline))


def _row(ctx: Context) -> Row | None:
    """The task's row: the one kept beside it while it still holds, else rendered (and kept) anew.
    None: the task was archived meanwhile."""
    stamp = _stamp(ctx)
    if stamp is None:
        return None
    path = ctx.handoff.task_dir / ROW_FILE
    try:
        kept: Row = json.loads(path.read_text(encoding="utf-8"))
        if (
            kept["stamp"] == stamp
            and kept["deadline_passed"] == _passed(kept["deadline"], ctx)
            and all(isinstance(line, str) for line in kept["lines"])
        ):
            return kept
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable or damaged: rendered again
    try:
        contract = store.load(ctx.handoff.contract)
    except ContractInvalid as exc:
        if ctx.handoff.contract.exists():
            return _damaged_row(ctx, exc)  # shown as damaged; the other tasks' rows still render
        return None  # archived since it was listed (another run merged it meanwhile)
    view = task_view(ctx, contract)
    deadline = review_deadline(contract, judge_configured(ctx))
    row: Row = {
        "task_id": view["task_id"],
        "needs_person": view["needs_person"] is not None,
        "lines": section(view),
        "stamp": stamp,
        "deadline": deadline,
        "deadline_passed": _passed(deadline, ctx),
    }
    with suppress(OSError):  # a cache: archived meanwhile, or a full disk; the next write renders it again
        write_atomic(path, json.dumps(row, ensure_ascii=False) + "\n")
    return row


def _damaged_row(ctx: Context, error: ContractInvalid | None) -> Row:
    """The row of a task whose contract is damaged (or missing): never kept, its file may be mended."""
    view = damaged_view(ctx, error)
    return {
        "task_id": view["task_id"],
        "needs_person": True,
        "lines": section(view),
        "stamp": [],
        "deadline": None,
        "deadline_passed": False,
    }


def write_status(ctx: Context) -> None:
    """Rewrite _handoff/STATUS.md atomically (called at every transition and task creation).

    The rows are read and the file written under one lock (`.status.lock`): two processes moving two
    tasks at once each render what they read, and without it the slower writer could replace the
    other's newer view with its older one, losing a task's new state until the next transition. Under
    the lock the last write is rendered after every earlier one, so it shows every contract saved
    before it began."""
    from filelock import FileLock, Timeout

    root = ctx.handoff_root
    root.dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root.status_lock), timeout=STATUS_LOCK_SECONDS, is_singleton=False)
    try:
        with lock:
            try:
                rows = [_row(ctx.for_task(task_id)) for task_id in root.task_ids()]
                rows += [_damaged_row(ctx.for_task(task_id), None) for task_id in root.lost_ids()]
            except (HubError, OSError, ValueError):
                return  # a contract mid-migration or invalid: the next transition writes it
            parts = [(row["needs_person"], row["task_id"], row["lines"]) for row in rows if row]
            write_atomic(root.status_file, _render(parts))
    except Timeout:
        # Only a render stuck for STATUS_LOCK_SECONDS holds it; the task's state is in its contract.
        log.warning("status.lock_busy", lock=str(root.status_lock), waited=STATUS_LOCK_SECONDS)
