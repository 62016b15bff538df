"""Several tasks in flight, each in its own worktree, and a user working in their checkout meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.phases.context import Context
from hub.phases.finalize import finalize_task
from hub.phases.next import run_next
from hub.phases.setup import create, setup_task

from ..conftest import TaskDriver


def start(ctx: Context, title: str, target: str) -> TaskDriver:
    """`hub new` + `hub setup-task` for one more task; a driver bound to it."""
    fields = {"title": title, "requirements": ["r"], "target_file": target}
    task_id = str(create(ctx, fields, create_target=True).task_id)
    bound = ctx.for_task(task_id)
    setup_task(bound)
    return TaskDriver(bound)


def to_pass(driver: TaskDriver, files: dict[str, str]) -> None:
    from hub.phases.judge import enter_judge_review, report_judge

    run = driver.implement(files)
    enter_judge_review(run, "local_pass")
    driver.judge_report("PASS")
    report_judge(driver.ctx)


def test_a_dirty_checkout_survives_a_whole_task_to_merged_byte_for_byte(
    ctx: Context, git_repo: Path, run_git: Any
) -> None:
    readme = b"# demo\n\nthe user's unsaved notes \xe2\x9c\x8d\n"
    (git_repo / "README.md").write_bytes(readme)
    (git_repo / "scratch.txt").write_bytes(b"untracked work\r\n")
    head = run_git(git_repo, "rev-parse", "HEAD")
    task = start(ctx, "Greet politely", "src/app.py")
    run = task.implement({"src/app.py": 'def greet(name):\n    return "hello, " + name\n'})
    from hub.phases.judge import enter_judge_review, report_judge

    enter_judge_review(run, "local_pass")
    # Until the merge, none of the task's commits reach the user's checkout.
    assert run_git(git_repo, "rev-parse", "HEAD") == head
    assert run_git(git_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert 'return "hello " + name' in (git_repo / "src/app.py").read_text(encoding="utf-8")
    task.judge_report("PASS")
    report_judge(task.ctx)
    assert finalize_task(task.ctx).to_state == "merged"
    assert (git_repo / "README.md").read_bytes() == readme
    assert (git_repo / "scratch.txt").read_bytes() == b"untracked work\r\n"
    assert 'return "hello, " + name' in (git_repo / "src/app.py").read_text(encoding="utf-8")
    assert run_git(git_repo, "stash", "list") == ""
    assert len(run_git(git_repo, "worktree", "list").splitlines()) == 1


def test_two_tasks_on_different_files_both_merge(ctx: Context, git_repo: Path, run_git: Any) -> None:
    first = start(ctx, "Greet", "src/app.py")
    second = start(ctx, "Readme", "README.md")
    assert first.worktree != second.worktree
    to_pass(first, {"src/app.py": 'def greet(name):\n    return "hello, " + name\n'})
    to_pass(second, {"README.md": "# demo, documented\n"})
    assert finalize_task(first.ctx).to_state == "merged"
    assert finalize_task(second.ctx).to_state == "merged"
    assert run_git(git_repo, "show", "main:README.md") == "# demo, documented"
    assert 'return "hello, " + name' in run_git(git_repo, "show", "main:src/app.py")
    assert ctx.handoff_root.task_ids() == []


def test_two_tasks_on_the_same_lines_the_first_merges_the_second_halts_and_the_first_is_unaffected(
    ctx: Context, git_repo: Path, run_git: Any
) -> None:
    first = start(ctx, "Comma", "src/app.py")
    second = start(ctx, "Exclaim", "src/app.py")
    to_pass(first, {"src/app.py": 'def greet(name):\n    return "hello, " + name\n'})
    to_pass(second, {"src/app.py": 'def greet(name):\n    return "hello! " + name\n'})
    merged = finalize_task(first.ctx)
    assert merged.to_state == "merged"
    main_after_first = run_git(git_repo, "rev-parse", "main")
    halted = finalize_task(second.ctx)
    assert (halted.exit_code, halted.to_state) == (4, "erik_consultation")
    assert second.contract()["breaker"]["trigger"] == "git_conflict"
    assert run_git(git_repo, "rev-parse", "main") == main_after_first == merged.data["merge_commit"]
    assert run_git(git_repo, "status", "--porcelain") == ""
    assert 'return "hello, " + name' in (git_repo / "src/app.py").read_text(encoding="utf-8")


def test_hub_next_runs_the_due_phase_of_every_task_at_once_and_lists_them(
    ctx: Context, git_repo: Path
) -> None:
    drivers = [start(ctx, f"Task {n}", f"file{n}.txt") for n in range(3)]
    for n, driver in enumerate(drivers):
        to_pass(driver, {f"file{n}.txt": f"{n}\n"})
    outcome = run_next(ctx)
    assert outcome.exit_code == 0, outcome.message
    ran = outcome.data["ran"]
    assert sorted(r["task_id"] for r in ran) == sorted(d.ctx.task_id for d in drivers)
    assert {r["data"]["ran"] for r in ran} == {"finalize-task"}
    assert {r["to"] for r in ran} == {"merged"}
    for n in range(3):
        assert (git_repo / f"file{n}.txt").read_text(encoding="utf-8") == f"{n}\n"


def test_a_worktree_deleted_by_hand_is_recreated_from_its_branch(ctx: Context) -> None:
    import shutil

    task = start(ctx, "Greet", "src/app.py")
    task.implement({"src/app.py": "committed\n"})
    shutil.rmtree(task.worktree)
    run = task.run()
    assert (run.repo.working_tree_dir and Path(run.repo.working_tree_dir)) == task.worktree
    assert (task.worktree / "src/app.py").read_text(encoding="utf-8") == "committed\n"


def test_the_worktrees_dir_setting_places_worktrees_outside_the_repository(
    git_repo: Path, tmp_path: Path, clock: Any
) -> None:
    (git_repo / "hub.yaml").write_text(
        (git_repo / "hub.yaml").read_text(encoding="utf-8") + f"worktrees_dir: {tmp_path / 'trees'}\n",
        encoding="utf-8",
    )
    ctx = Context(load_config(git_repo, env={}), clock=clock)
    task = start(ctx, "Greet", "src/app.py")
    assert task.worktree == tmp_path / "trees" / task.ctx.task_id


class BuggyWorker:
    """A worker with a bug: every call raises something that is not a hub error."""

    def generate(self, request: Any) -> Any:
        raise RuntimeError("the worker has a bug")

    def list_models(self) -> list[str]:
        raise RuntimeError("the worker has a bug")

    def check_health(self, models: list[str]) -> Any:
        raise RuntimeError("the worker has a bug")

    def close(self) -> None:
        pass


def test_a_bug_in_one_tasks_phase_is_its_exit_1_and_the_other_tasks_still_advance_and_are_reported(
    ctx: Context, git_repo: Path
) -> None:

    from structlog.testing import capture_logs

    crashing = start(ctx, "Greet", "src/app.py")  # due: run-implementer, whose worker raises
    passing = start(ctx, "Readme", "README.md")
    to_pass(passing, {"README.md": "# demo, documented\n"})  # due: finalize-task, no worker
    buggy = ctx.replace(worker_factory=lambda role: BuggyWorker())
    with capture_logs() as logs:
        outcome = run_next(buggy)
    assert outcome.exit_code == 1
    lines = outcome.message.splitlines()
    assert f"{passing.ctx.task_id}: finalize-task: " in outcome.message
    assert not passing.hand.contract.exists()  # merged and archived
    assert (git_repo / "README.md").read_text(encoding="utf-8") == "# demo, documented\n"
    assert f"{crashing.ctx.task_id}: run-implementer: RuntimeError: the worker has a bug" in lines
    ran = {r["task_id"]: r for r in outcome.data["ran"]}
    assert ran[passing.ctx.task_id]["to"] == "merged"
    assert ran[crashing.ctx.task_id]["exit_code"] == 1
    crashed = [e for e in logs if e["event"] == "next.phase_crashed"]
    assert [(e["task"], e["log_level"], e.get("exc_info")) for e in crashed] == [
        (crashing.ctx.task_id, "error", True)
    ]


def status_md_states(path: Path) -> dict[str, str]:
    """Task id -> the state STATUS.md shows for it."""
    import re

    text = path.read_text(encoding="utf-8")
    found = re.findall(r"^## ([^:\n]+):.*\n\n- State: `([a-z_]+)`", text, flags=re.MULTILINE)
    return dict(found)


def test_status_md_shows_both_tasks_final_states_when_two_transitions_race(ctx: Context) -> None:
    # Each transition renders STATUS.md from every contract it reads; unlocked, the slower of two
    # writers put back its older view of the other task.
    import threading

    from hub.phases.run import Run
    from hub.state.machine import Event
    from hub.state.store import load as load_contract

    ids = [
        str(create(ctx, {"title": t, "requirements": ["r"], "target_file": "src/app.py"}).task_id)
        for t in "AB"
    ]
    runs = [Run(ctx.for_task(i), load_contract(ctx.for_task(i).handoff.contract), "test") for i in ids]
    barrier = threading.Barrier(2, timeout=30)
    failures: list[BaseException] = []

    def move(run: Run, event: Event) -> None:
        try:
            barrier.wait()
            run.record(event)
        except BaseException as exc:  # surfaced in the main thread below
            failures.append(exc)

    for round_no in range(100):
        event = Event.LOCK_ACQUIRED if round_no % 2 == 0 else Event.INTERRUPTED
        threads = [threading.Thread(target=move, args=(run, event)) for run in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not failures, failures
        expected = {run.task_id: str(run.contract["status"]) for run in runs}
        assert status_md_states(ctx.handoff_root.status_file) == expected, f"round {round_no}"
