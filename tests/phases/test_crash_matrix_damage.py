"""Issue 35, the crash matrix's damaged files: each file under `_handoff/` (and the hub's own in the git
directory) the hub reads, left empty, cut or deleted, and `hub next` alone (as cron runs it). A file the
hub can do without is set aside or written anew and both tasks merge; a damaged contract sets its task
aside with one line naming the file, `hub status` shows it as damaged, and the other task merges."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hub.core.errors import LockBusy
from hub.phases.next import run_next
from hub.phases.status import DAMAGED, status
from hub.phases.status_md import write_status
from hub.state.handoff import LOST_AFTER_SECONDS

from .conftest import Pipeline, git
from .test_crash_matrix import assert_merged_and_untouched, hub_next_alone_until_merged, two_tasks


def empty(path: Path) -> None:
    path.write_bytes(b"")


def cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff{not json")


# What is damaged (a path under the repository, {task} the first task's folder) -> how.
FILES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "an empty backlog.json": ("_handoff/backlog.json", empty),
    "a cut backlog.json": ("_handoff/backlog.json", cut),
    "an empty notes.json": ("_handoff/notes.json", empty),
    "an empty STATUS.md": ("_handoff/STATUS.md", empty),
    "a cut transition log": ("_handoff/transition.ndjson", cut),
    "a cut status row": ("{task}/.status_row.json", cut),
    "a status row of the wrong shape": ("{task}/.status_row.json", lambda p: p.write_text('{"lines": 3}')),
    "a damaged lock owner file": ("{task}/.hub.lock.owner", garbage),
    "an empty JUDGE_REPORT.json": ("{task}/JUDGE_REPORT.json", empty),
    "a damaged git-busy mark": ("{task}/.git-busy-since", garbage),
    "an empty hub.yaml cache": (".git/hub-yaml-cache.json", empty),
}


@pytest.mark.parametrize("what", list(FILES))
def test_a_damaged_file_the_hub_can_do_without_holds_no_task_up(pipe: Pipeline, what: str) -> None:
    ids = two_tasks(pipe)
    pipe.ctx.handoff_root.backlog.write_text('{"version": 1, "next_seq": 1, "tasks": []}\n', encoding="utf-8")
    (pipe.ctx.handoff_root.dir / "notes.json").write_text('{"notes": []}\n', encoding="utf-8")
    where, damage = FILES[what]
    path = pipe.repo / where.format(task=f"_handoff/tasks/{ids[0]}")
    if not path.exists():
        path.write_text("{}\n", encoding="utf-8")
    damage(path)

    hub_next_alone_until_merged(pipe, ids)

    assert_merged_and_untouched(pipe)


def lost(path: Path) -> None:
    path.unlink()
    old = path.parent.stat().st_mtime - LOST_AFTER_SECONDS - 1
    os.utime(path.parent, (old, old))


@pytest.mark.parametrize(
    ("damage", "said"),
    [(empty, "not valid JSON"), (cut, "not valid JSON"), (lost, "is missing")],
    ids=["empty", "cut", "deleted"],
)
def test_a_damaged_contract_sets_its_task_aside_and_the_other_task_merges(
    pipe: Pipeline, damage: Callable[[Path], None], said: str
) -> None:
    ids = two_tasks(pipe)
    damaged, other = ids
    contract = pipe.ctx.handoff_root.for_task(damaged).contract
    damage(contract)
    archive = pipe.ctx.handoff_root.archive
    codes, lines = [], []
    for _ in range(25):
        if (archive / other / "TASK_CONTRACT.json").exists():
            break
        try:
            outcome = run_next(pipe.ctx)
        except LockBusy:
            codes.append(75)
            continue
        codes.append(outcome.exit_code)
        lines.append(outcome.message)
    else:
        raise AssertionError(f"the other task did not merge: {codes}")
    assert set(codes) <= {0, 4, 75}, codes
    # Every run that reported on it named the file and what is wrong, in one line.
    assert any(f"{damaged}: {contract}" in line and said in line for line in lines), lines
    assert git(pipe.repo, "show", "main:src/other.py") == "X = 2"
    # `hub status` and STATUS.md show the damaged task, with what to do, and exit 0.
    shown = {view["task_id"]: view for view in status(pipe.ctx)["tasks"]}
    assert shown[damaged]["status"] == DAMAGED and said in str(shown[damaged]["status_reason"])
    assert "restore it" in str(shown[damaged]["needs_person"])
    write_status(pipe.ctx)
    assert damaged in pipe.ctx.handoff_root.status_file.read_text(encoding="utf-8")
