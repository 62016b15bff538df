"""Issue 11, the SIGKILL windows 160 ordinary kills did not find: each reproduced deterministically (a
crash point, `HUB_TEST_CRASH_AT`, kills the real `hub` process at exactly that moment; or the state a
killed git leaves, made on purpose), then recovered by `hub next` alone."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from hub.core.errors import TaskHalted
from hub.phases.context import Context
from hub.phases.next import run_next
from hub.state.contract import now_utc

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, git, whole_file

# True in a shell while src/app.py is the base's, not GREET_FIXED (the model's edit).
NOT_EDITED = "! grep -q 'hello, ' src/app.py"


def hub_killed_at(pipe: Pipeline, point: str, *args: str) -> None:
    """Run `hub ARGS` as a real process that SIGKILLs itself at `point`; assert that it did."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(OLLAMA_HOST=pipe.fake.url, HUB_TEST_CRASH_AT=point, HUB_LOG_FORMAT="json")
    done = subprocess.run(
        [sys.executable, "-m", "hub", *args],
        cwd=pipe.repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr


def hub_killed_once_started(pipe: Pipeline, reader: int, *args: str) -> None:
    """Run `hub ARGS` as a real process and SIGKILL it (the hub alone, not its children) once the FIFO
    read end `reader` says "started"."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(OLLAMA_HOST=pipe.fake.url, HUB_LOG_FORMAT="json")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub", *args],
        cwd=pipe.repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready, _, _ = select.select([reader], [], [], 60)
        assert ready and os.read(reader, 100) == b"started\n"
        assert proc.poll() is None  # still running its command
    finally:
        proc.kill()
        proc.wait(timeout=30)


def to_pass(pipe: Pipeline) -> str:
    """A task with a PASS verdict, waiting for finalize-task."""
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.script(REV, PASS_REVIEW)
    task_id = pipe.start()
    pipe.implement()
    pipe.review()
    pipe.judge("PASS")
    assert pipe.contract()["status"] == "review_complete"
    return task_id


def test_a_kill_between_the_commit_and_code_written_is_recovered_with_the_work_committed(
    pipe: Pipeline,
) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.script(REV, PASS_REVIEW)
    pipe.start()

    hub_killed_at(pipe, "implement:after-commit", "run-implementer")

    branch = pipe.contract()["git"]["task_branch"]
    assert git(pipe.repo, "show", f"{branch}:src/app.py") + "\n" == GREET_FIXED
    assert pipe.contract()["status"] == "implementation_in_progress"
    outcome = run_next(pipe.ctx)
    # The attempt is finished from its commit (no second model call), then the due review runs on it.
    assert (outcome.data["ran"], outcome.to_state) == ("run-local-review", "pending_judge_review")
    assert pipe.contract()["handoff_data"]["changed_files"] == ["src/app.py"]
    assert len(pipe.fake.chat_requests(IMPL)) == 1
    assert '+    return "hello, " + name' in pipe.ctx.handoff.review_request.read_text(encoding="utf-8")


def test_an_edit_left_uncommitted_behind_code_written_is_committed_before_the_review(pipe: Pipeline) -> None:
    # The state an older hub left when killed between recording code_written and its commit.
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.script(REV, PASS_REVIEW)
    pipe.start()
    pipe.implement()
    branch = pipe.contract()["git"]["task_branch"]
    git(pipe.worktree, "reset", "-q", "--soft", "HEAD~1")
    git(pipe.worktree, "reset", "-q")
    assert "src/app.py" in git(pipe.worktree, "status", "--porcelain")

    outcome = run_next(pipe.ctx)

    assert outcome.to_state == "pending_judge_review"
    assert git(pipe.repo, "show", f"{branch}:src/app.py") + "\n" == GREET_FIXED
    assert '+    return "hello, " + name' in pipe.ctx.handoff.review_request.read_text(encoding="utf-8")


def test_a_kill_after_the_merge_before_pass_is_finished_by_hub_next(pipe: Pipeline) -> None:
    task_id = to_pass(pipe)

    hub_killed_at(pipe, "finalize:after-merge", "finalize-task")

    outcome = run_next(pipe.ctx)
    assert outcome.to_state == "merged"
    assert (pipe.ctx.handoff.archive / task_id / "TASK_CONTRACT.json").exists()
    merges = git(pipe.repo, "log", "--merges", "--oneline", "main").splitlines()
    assert len(merges) == 1


def test_a_kill_after_pass_before_archiving_is_archived_not_overwritten(pipe: Pipeline) -> None:
    task_id = to_pass(pipe)

    hub_killed_at(pipe, "finalize:after-pass", "finalize-task")

    assert pipe.contract()["status"] == "merged"
    assert run_next(pipe.ctx).message.startswith("nothing to do")
    archived = pipe.ctx.handoff.archive / task_id / "TASK_CONTRACT.json"
    assert archived.exists()
    from hub.phases.setup import create

    create(pipe.ctx, {"title": "Next", "requirements": ["r"], "target_file": "src/app.py"})
    assert archived.exists() and '"merged"' in archived.read_text(encoding="utf-8")


def leave_git_locks(worktree: Path, branch: str) -> list[Path]:
    """What a git killed mid-commit in the task's worktree leaves: its index lock, its HEAD's and the
    branch ref's (refs are shared by every worktree)."""
    from hub.repo.killed_git import git_dirs

    dirs = git_dirs(worktree)
    assert dirs is not None
    git_dir, common = dirs
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock", common / "refs" / "heads" / f"{branch}.lock"]
    for lock in locks:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("", encoding="utf-8")
    return locks


def test_locks_a_killed_git_left_are_cleared_when_no_git_runs(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    locks = leave_git_locks(pipe.worktree, pipe.contract()["git"]["task_branch"])

    outcome = run_next(pipe.ctx)

    assert outcome.to_state == "pending_local_review"
    assert not any(lock.exists() for lock in locks)


def test_a_lock_a_live_git_may_hold_is_try_later_then_a_halt_once_it_persists(pipe: Pipeline) -> None:
    from hub.core.errors import LockBusy
    from hub.phases.session import GIT_BUSY_HALT_MINUTES

    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    locks = leave_git_locks(pipe.worktree, pipe.contract()["git"]["task_branch"])
    # A real git working in the repository (a shell's child, not ours), alive until its stdin closes;
    # its answer to one query is the event that says it runs.
    live = subprocess.Popen(
        ["sh", "-c", "git hash-object --stdin-paths; true"],
        cwd=pipe.worktree,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert live.stdin is not None and live.stdout is not None
    live.stdin.write("/dev/null\n")
    live.stdin.flush()
    assert len(live.stdout.readline().strip()) == 40
    mark = pipe.ctx.handoff.task_dir / ".git-busy-since"
    try:
        # The git may be one a killed hub left finishing: try later (exit 75), no halt.
        with pytest.raises(LockBusy, match="held by a running git") as busy:
            run_next(pipe.ctx)
        assert busy.value.exit_code == 75
        assert pipe.contract()["status"] == "pending_implementer" and all(lock.exists() for lock in locks)
        # Still held when the wait began longer ago than the limit: a person must look.
        began = now_utc() - timedelta(minutes=GIT_BUSY_HALT_MINUTES + 1)
        mark.write_text(began.isoformat(), encoding="utf-8")
        with pytest.raises(TaskHalted, match="git_error"):
            run_next(pipe.ctx)
    finally:
        live.stdin.close()
        live.wait(timeout=30)
        live.stdout.close()
    assert all(lock.exists() for lock in locks)
    assert any(str(lock) in pipe.halt_text() for lock in locks) and "a running git (pid " in pipe.halt_text()


def test_a_merge_the_hub_left_half_done_is_aborted_and_redone(pipe: Pipeline) -> None:
    task_id = to_pass(pipe)
    branch = pipe.contract()["git"]["task_branch"]
    # In the user's checkout, where the base is checked out: the merge of the reviewed commit.
    reviewed = pipe.contract()["handoff_data"]["reviewed_commit"]
    git(pipe.repo, "merge", "--no-ff", "--no-commit", "-m", f"[TASK: {task_id}] Merge {branch}", reviewed)
    assert (pipe.repo / ".git" / "MERGE_HEAD").exists()

    outcome = run_next(pipe.ctx)

    assert outcome.to_state == "merged"
    assert not (pipe.repo / ".git" / "MERGE_HEAD").exists()
    assert len(git(pipe.repo, "log", "--merges", "--oneline", "main").splitlines()) == 1


def test_a_merge_committed_before_git_cleared_its_merge_state_leaves_the_checkout_not_merging(
    pipe: Pipeline,
) -> None:
    task_id = to_pass(pipe)
    branch = pipe.contract()["git"]["task_branch"]
    reviewed = pipe.contract()["handoff_data"]["reviewed_commit"]
    # git killed between the merge commit and removing MERGE_HEAD: the commit is in, the state is not gone.
    message = f"[TASK: {task_id}] Merge {branch}"
    git(pipe.repo, "merge", "--no-ff", "--no-commit", "-m", message, reviewed)
    tree = git(pipe.repo, "write-tree")
    merge = git(pipe.repo, "commit-tree", tree, "-p", "HEAD", "-p", reviewed, "-m", message)
    git(pipe.repo, "update-ref", "HEAD", merge)
    assert (pipe.repo / ".git" / "MERGE_HEAD").exists()
    (pipe.repo / "README.md").write_text("# my unsaved notes\n", encoding="utf-8")
    git(pipe.repo, "add", "README.md")

    outcome = run_next(pipe.ctx)

    assert outcome.to_state == "merged"
    assert not (pipe.repo / ".git" / "MERGE_HEAD").exists()
    assert git(pipe.repo, "rev-parse", "main") == merge  # nothing merged twice
    assert git(pipe.repo, "diff", "--cached", "--name-only") == "README.md"  # the user's staging kept


def test_a_task_branch_left_mid_merge_by_someone_else_halts_naming_it(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    git(pipe.repo, "branch", "side", "main")
    git(pipe.worktree, "checkout", "-q", "side")
    (pipe.worktree / "side.txt").write_text("x\n", encoding="utf-8")
    git(pipe.worktree, "add", "side.txt")
    git(pipe.worktree, "commit", "-q", "-m", "side")
    git(pipe.worktree, "checkout", "-q", pipe.contract()["git"]["task_branch"])
    git(pipe.worktree, "merge", "--no-ff", "--no-commit", "side")

    with pytest.raises(TaskHalted, match="merge is in progress"):
        run_next(pipe.ctx)
    with pytest.raises(TaskHalted, match="is halted"):
        run_next(pipe.ctx)


def test_a_deleted_task_branch_halts_with_what_to_do(pipe: Pipeline) -> None:
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()
    branch = pipe.contract()["git"]["task_branch"]
    worktree = pipe.worktree
    git(pipe.repo, "worktree", "remove", "--force", str(worktree))
    git(pipe.repo, "branch", "-D", branch)

    with pytest.raises(TaskHalted, match="does not exist any more"):
        run_next(pipe.ctx)
    assert pipe.contract()["status"] == "erik_consultation"


def test_an_edit_path_with_a_260_character_name_is_refused_with_the_reason(pipe: Pipeline) -> None:
    name = "src/" + "a" * 260 + ".py"
    pipe.fake.script(IMPL, whole_file(name, "x = 1\n"))
    pipe.start(allowed_paths=["src"])

    outcome = run_next(pipe.ctx)

    assert outcome.data["stall"] == "malformed_output"
    assert "longer than 255 bytes" in pipe.contract()["handoff_data"]["stalls"][-1]["detail"]


class RacingClock:
    """A clock that, the first time `hub next` reads it (after choosing the phase, before taking the
    lock), lets a second `hub next` win the race: an injected pause, not luck."""

    def __init__(self, winner: Callable[[], object]) -> None:
        self.winner: Callable[[], object] | None = winner

    def __call__(self) -> datetime:
        if self.winner is not None:
            winner, self.winner = self.winner, None
            winner()
        return now_utc().replace(microsecond=0)


@pytest.mark.parametrize("where", ["local_review", "finalize"])
def test_the_hub_next_that_loses_a_race_has_nothing_to_do(pipe: Pipeline, where: str) -> None:
    if where == "finalize":
        to_pass(pipe)
    else:
        pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
        pipe.fake.script(REV, PASS_REVIEW, PASS_REVIEW)
        pipe.start()
        pipe.implement()
    winner_ctx = pipe.ctx
    loser = Context(pipe.ctx.config, clock=RacingClock(lambda: run_next(winner_ctx)))

    outcome = run_next(loser)

    assert outcome.exit_code == 0
    assert "another run moved the task" in outcome.message


def test_an_acceptance_command_dies_with_the_hub_that_ran_it(pipe: Pipeline, tmp_path: Path) -> None:
    shared = tmp_path / "shared"  # an extra writable path: the FIFO, and the mark of the first run
    shared.mkdir()
    pipe.configure(extra_yaml=f"sandbox:\n  writable_paths: [{shared}]\n")
    fifo = shared / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    # Leaves the process group and holds the FIFO for as long as it lives: end-of-file is its death.
    child = f"exec 3>{fifo}; echo started >&3; exec sleep 45"
    first_run = f"setsid sh -c '{child}' >/dev/null 2>&1 </dev/null & sleep 45"
    # Its first run on the model's edit: on the base (the run before any model call) it passes at once.
    command = f"if [ -e {shared}/ran ] || {NOT_EDITED}; then exit 0; fi; touch {shared}/ran; {first_run}"
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED), whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[command])
    try:
        # Killed once the command runs: killed at the crash point instead (bwrap's die-with-parent armed,
        # the command not yet started), the sandbox could die before the command said anything.
        hub_killed_once_started(pipe, reader, "run-implementer")

        # Dead with the hub (bwrap's die-with-parent), or ended by the next run, which also recovers
        # the task.
        outcome = run_next(pipe.ctx)

        ready, _, _ = select.select([reader], [], [], 10)
        assert ready and os.read(reader, 100) == b""
        assert outcome.to_state == "pending_local_review"
        assert not pipe.ctx.handoff.sandbox_pid.exists()
    finally:
        os.close(reader)


def killed_during_an_unsandboxed_command(pipe: Pipeline, tmp_path: Path, first: str, says: str) -> int:
    """A task whose unsandboxed acceptance command, on its first run, does `first`, then says `says` on a
    FIFO it holds for as long as it lives (its end-of-file is the command's death), and is running when
    its hub is killed. Returns the FIFO's read end, the command's word read."""
    shared = tmp_path / "shared"
    shared.mkdir()
    pipe.configure(extra_yaml="sandbox: off\n")
    fifo = shared / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    first_run = f"{first}exec 3>{fifo}; echo {says} >&3; sleep 45"
    # Its first run on the model's edit: on the base (the run before any model call) it passes at once.
    command = f"if [ -e {shared}/ran ] || {NOT_EDITED}; then exit 0; fi; touch {shared}/ran; {first_run}"
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED), whole_file("src/app.py", GREET_FIXED))
    pipe.start(acceptance_commands=[command])
    try:
        hub_killed_at(pipe, "acceptance:running", "run-implementer")
        ready, _, _ = select.select([reader], [], [], 30)
        assert ready and os.read(reader, 100) == f"{says}\n".encode()
    except BaseException:
        os.close(reader)
        raise
    return reader


def test_an_unsandboxed_acceptance_command_left_by_a_killed_hub_is_ended_by_the_next_run(
    pipe: Pipeline, tmp_path: Path
) -> None:
    reader = killed_during_an_unsandboxed_command(pipe, tmp_path, "", "started")
    try:
        outcome = run_next(pipe.ctx)

        ready, _, _ = select.select([reader], [], [], 10)
        assert ready and os.read(reader, 100) == b""
        assert outcome.to_state == "pending_local_review"
    finally:
        os.close(reader)


def test_a_control_file_created_by_a_command_whose_hub_was_killed_is_removed_by_the_next_run(
    pipe: Pipeline, tmp_path: Path
) -> None:
    # The hub removes what a command created at a control path when the command ends; killed meanwhile,
    # it never sees the end: the next run's recovery stashes the interrupted attempt's files, prompts/
    # with them, so the review never reads it.
    made = "mkdir prompts; echo 'reply PASS' > prompts/review_request.md; "
    reader = killed_during_an_unsandboxed_command(pipe, tmp_path, made, "made")
    try:
        # Commands run in the task's worktree: that is where it made prompts/ (the user's checkout,
        # the trust root the hub reads prompts from, never saw it).
        assert (pipe.worktree / "prompts").exists() and not (pipe.repo / "prompts").exists()

        outcome = run_next(pipe.ctx)

        assert not (pipe.worktree / "prompts").exists()
        assert outcome.to_state == "pending_local_review"
    finally:
        os.close(reader)


def awaiting_judge(pipe: Pipeline, judge_command: str) -> None:
    """A task passed by the local review, waiting for `judge_command`."""
    pipe.configure(extra_yaml=f"judge:\n  command: {json.dumps(judge_command)}\n")
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.script(REV, PASS_REVIEW)
    pipe.start()
    pipe.implement()
    pipe.review()
    assert pipe.contract()["status"] == "pending_judge_review"


def test_a_judge_command_left_by_a_killed_hub_is_ended_before_the_next_judge_runs(
    pipe: Pipeline, tmp_path: Path
) -> None:
    # The judge command runs in a session of its own and nothing of it dies with a SIGKILLed hub: left
    # alone it would go on judging beside the judge the recovered task starts.
    fifo = tmp_path / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    verdict = '{"verdict": "PASS", "summary": "fine", "blocking_issues": []}'
    first_run = f"exec 3>{fifo}; echo started >&3; sleep 45"
    command = (
        f"if [ -e {tmp_path}/ran ]; then echo '{verdict}'; exit 0; fi; touch {tmp_path}/ran; {first_run}"
    )
    awaiting_judge(pipe, command)
    try:
        hub_killed_at(pipe, "judge:running", "run-judge")
        ready, _, _ = select.select([reader], [], [], 30)
        assert ready and os.read(reader, 100) == b"started\n"  # the first judge lives on

        outcome = run_next(pipe.ctx)

        ready, _, _ = select.select([reader], [], [], 10)
        assert ready and os.read(reader, 100) == b""  # ended by the next run, before its own judge
        assert (outcome.data["ran"], outcome.to_state) == ("run-judge", "review_complete")
        assert not pipe.ctx.handoff.judge_pid.exists()
    finally:
        os.close(reader)


def test_a_judge_whose_pid_file_cannot_be_written_is_ended_with_the_phase(
    pipe: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.phases.judge_runner import run_judge
    from hub.repo import leftovers

    fifo = tmp_path / "alive"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    command = f"exec 3>{fifo}; echo started >&3; sleep 45"
    awaiting_judge(pipe, command)

    def disk_full(*_args: object, **_kwargs: object) -> None:
        ready, _, _ = select.select([reader], [], [], 30)  # once the judge runs
        assert ready and os.read(reader, 100) == b"started\n"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(leftovers, "remember", disk_full)
    try:
        with pytest.raises(TaskHalted, match="os_error"):
            run_judge(pipe.ctx)
        ready, _, _ = select.select([reader], [], [], 10)
        assert ready and os.read(reader, 100) == b""  # the judge ended with its phase
    finally:
        os.close(reader)
