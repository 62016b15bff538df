"""Crash recovery: a task left in an *_in_progress state by a dead phase is taken back by the next
command, its uncommitted work stashed; phases killed with SIGKILL at random moments leave a valid
contract that one more command finishes."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.errors import GitError, LockBusy
from hub.phases.context import Context
from hub.phases.judge import report_judge
from hub.phases.session import running
from hub.phases.setup import setup_task
from hub.state import breakers
from hub.state.contract import iso
from hub.state.handoff import read_transitions
from hub.state.machine import PENDING_IMPLEMENTER, TABLE
from hub.state.store import load as load_contract

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import TaskDriver


def left_in_implementation(
    task: TaskDriver, ctx: Context, holder: str | None = None, minutes: float = 30
) -> None:
    """A run-implementer that died mid-way: the state says in progress, the tree holds half its work."""
    task.new()
    task.setup()
    contract = task.contract()
    contract["lock"] = {
        "held_by": holder or f"{os.uname().nodename}:999999",
        "acquired_at": iso(ctx.clock()),
        "expires_at": iso(ctx.clock() + timedelta(minutes=minutes)),
    }
    task.hand.contract.write_text(json.dumps(contract), encoding="utf-8")
    task.record("lock_acquired")
    task.write({"src/app.py": "def greet(name):\n    return 'half wr", "src/helper.py": "# new file\n"})


def test_the_next_command_records_interrupted_and_stashes_the_dead_phases_work(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    left_in_implementation(task, ctx)
    with running(ctx, "probe", {PENDING_IMPLEMENTER}) as run:
        assert run.start_state == PENDING_IMPLEMENTER
    contract = task.contract()
    assert contract["status"] == "pending_implementer"
    assert contract["lock"] is None
    assert contract["breaker"]["counters"]["interruptions"] == 1
    last = contract["history"][-1]
    assert (last["event"], last["from"]) == ("interrupted", "implementation_in_progress")
    stash = f"refs/hub/stashes/{contract['task_id']}/attempt-1-interrupted"
    assert f"`git stash apply {stash}`" in last["reason"]
    worktree = task.worktree
    assert run_git(worktree, "status", "--porcelain") == ""
    assert run_git(ctx.repo_root, "stash", "list") == ""  # never in the user's list
    run_git(worktree, "stash", "apply", stash)
    assert (worktree / "src/helper.py").read_text(encoding="utf-8") == "# new file\n"
    assert not (ctx.repo_root / "src/helper.py").exists()  # the user's checkout never saw it


def test_recovery_happens_even_when_the_phase_then_refuses_the_state(task: TaskDriver, ctx: Context) -> None:
    left_in_implementation(task, ctx)
    with pytest.raises(Exception, match="set up already"):
        setup_task(ctx)
    assert task.contract()["status"] == "pending_implementer"


def test_a_lease_held_on_another_host_is_respected_until_it_expires(
    task: TaskDriver, ctx: Context, clock: Any
) -> None:
    left_in_implementation(task, ctx, holder="other-host:4242", minutes=30)
    with (
        pytest.raises(LockBusy, match="held by other-host:4242 on another host until"),
        running(ctx, "probe", {PENDING_IMPLEMENTER}),
    ):
        pass
    assert task.contract()["status"] == "implementation_in_progress"
    clock.advance(minutes=31)
    with running(ctx, "probe", {PENDING_IMPLEMENTER}):
        pass
    assert task.contract()["history"][-1]["event"] == "interrupted"


def test_three_interruptions_in_a_row_trip_the_breaker(task: TaskDriver, ctx: Context) -> None:
    task.new()
    task.setup()
    for _ in range(3):
        task.record("lock_acquired")
        with running(ctx, "probe", {PENDING_IMPLEMENTER}):
            pass
    contract = task.contract()
    assert contract["breaker"]["counters"]["interruptions"] == 3
    trip = breakers.before_phase(contract, ctx.clock())
    assert trip is not None and trip.trigger == "interruptions"


def test_a_dead_judge_review_goes_back_to_pending_and_report_judge_then_applies_the_verdict(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.record("review_started")
    task.judge_report("PASS")
    report_judge(ctx)
    contract = task.contract()
    assert [h["event"] for h in contract["history"]][-4:] == [
        "review_started",
        "interrupted",
        "review_started",
        "judge_complete",
    ]
    assert contract["status"] == "review_complete"
    assert "interruptions" not in contract["breaker"]["counters"]  # a verdict ends the streak


# --- SIGKILL at random moments -----------------------------------------------------------------------


def hub_process(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    environment.update({"HUB_LOG_FORMAT": "json", "HUB_LOG_LEVEL": "DEBUG", **(env or {})})
    return subprocess.Popen(
        [sys.executable, "-m", "hub", *args],
        cwd=repo,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,
    )


def kill_when(
    proc: subprocess.Popen[bytes], marker: str | None, extra: float, deadline: float = 20.0
) -> bool:
    """SIGKILL `proc` `extra` seconds after its log shows `marker` (None: `extra` seconds after the
    start). Every wait is bounded. True if the kill landed before the process ended."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    while marker is not None and marker.encode() not in seen:
        ready, _, _ = select.select([fd], [], [], deadline)
        assert ready, f"no '{marker}' in the log within {deadline} s"
        chunk = os.read(fd, 65536)
        if not chunk:
            break  # the process ended before logging it
        seen += chunk
    try:
        proc.wait(timeout=extra)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=deadline)
        return True
    finally:
        proc.stderr.close()


def wait_for_orphans(pgid: int, deadline: float = 20.0) -> None:
    """Wait, on pidfds, until every process left in the killed phase's group (git children) is gone."""
    while True:
        members = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8")
                if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                    members.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
        if not members:
            return
        fds = []
        try:
            for pid in members:
                try:
                    fds.append(os.pidfd_open(pid))
                except ProcessLookupError:
                    continue
            if fds:
                ready, _, _ = select.select(fds, [], [], deadline)
                assert ready, f"processes {members} of the killed phase did not end"
        finally:
            for fd in fds:
                os.close(fd)


def assert_consistent(hand: Any) -> dict[str, Any]:
    """The contract parses and validates; its history is a path through the table; the log is in step
    with it (a kill between the contract's save and the log's append may leave a line out)."""
    contract = load_contract(hand.contract)
    for entry in contract["history"]:
        assert (entry["from"], entry["event"]) in TABLE or entry["event"] in (
            "circuit_breaker_halt",
            "resume",
        )
    history = [h["event"] for h in contract["history"]]
    logged = [line["event"] for line in read_transitions(hand)]
    remaining = iter(history)
    assert all(event in remaining for event in logged), (history, logged)  # in order
    assert len(history) - len(logged) <= 1
    return contract


def test_report_judge_killed_at_random_moments_is_finished_by_one_more_report_judge(
    task: TaskDriver, ctx: Context
) -> None:
    task.to_judge_review()
    task.judge_report("FAIL", [{"description": "no comma"}])
    hand = task.hand
    paths = (hand.contract, hand.review_request, hand.judge_report_json, hand.transitions)
    prepared = {path: path.read_bytes() for path in paths}
    rng = random.Random(7)
    markers = [None, "review_started", "judge_complete", "judge_complete", "fail_agree"]
    kills = 0
    for round_ in range(8):
        for path, data in prepared.items():
            path.write_bytes(data)
        for leftover in (hand.review_in_progress, hand.runs(task.contract()["task_id"])):
            if leftover.is_file():
                leftover.unlink()
            elif leftover.is_dir():
                for p in leftover.iterdir():
                    p.unlink()
        proc = hub_process(ctx.repo_root, "report-judge")
        marker = markers[round_ % len(markers)]
        kills += kill_when(proc, marker, rng.uniform(0, 0.4 if marker is None else 0.01))
        contract = assert_consistent(hand)
        assert contract["status"] in (
            "pending_judge_review",
            "judge_review_in_progress",
            "review_complete",
            "pending_implementer",
        )
        if contract["status"] != "pending_implementer":
            report_judge(ctx)
        contract = assert_consistent(hand)
        assert contract["status"] == "pending_implementer", round_
        assert contract["attempt"] == 2
        assert contract["breaker"]["counters"]["review_cycles"] == 1
        assert contract["handoff_data"]["judge_blocking_issues"] == [{"description": "no comma"}]
    assert kills >= 4


def test_setup_task_killed_at_random_moments_is_finished_by_one_more_setup_task(
    task: TaskDriver, ctx: Context, run_git: Any
) -> None:
    task_id = task.new()
    repo = ctx.repo_root
    prepared = task.hand.contract.read_bytes()
    base = run_git(repo, "rev-parse", "main")
    rng = random.Random(11)
    kills = 0
    duration = 0.0
    for round_ in range(6):
        proc = hub_process(repo, "setup-task")
        if round_ == 0:  # unkilled: how long a whole setup-task takes here, to aim the kills inside it
            started = time.perf_counter()
            kill_when(proc, None, 60)
            duration = time.perf_counter() - started
        elif round_ % 2:
            kills += kill_when(proc, None, rng.uniform(0.2, 0.9) * duration)
        else:  # right after the worktree exists, before the contract says so: the adoption path
            kills += kill_when(proc, "worktree.add", rng.uniform(0.0, 0.01))
        wait_for_orphans(proc.pid)
        contract = assert_consistent(task.hand)
        if not contract["git"].get("task_branch"):
            setup_task(ctx)
        contract = assert_consistent(task.hand)
        assert contract["git"]["task_branch"] == f"task/{task_id}"
        assert contract["git"]["base_commit"] == base
        worktree = contract["git"]["worktree"]
        assert run_git(Path(worktree), "rev-parse", "--abbrev-ref", "HEAD") == f"task/{task_id}"
        assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
        assert run_git(repo, "rev-parse", f"task/{task_id}") == base
        assert run_git(repo, "status", "--porcelain") == ""
        assert run_git(Path(worktree), "status", "--porcelain") == ""
        # Back to the start for the next round.
        run_git(repo, "worktree", "remove", "--force", worktree)
        run_git(repo, "branch", "-q", "-D", f"task/{task_id}")
        task.hand.contract.write_bytes(prepared)
    assert kills >= 2


PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
# When to kill the `hub next` of each state: after its worktree is made (setup), after its first
# transition (inside the implementer, and the judge), with a model-server slot held (the review), and
# as the merge starts.
MARKERS = {
    "setup": "worktree.add",
    "pending_implementer": "handoff.transition",
    "pending_local_review": "gpu.slot",
    "pending_judge_review": "handoff.transition",
    "review_complete": "finalize.merging",
}


def test_a_dirty_checkout_survives_a_sigkill_in_every_phase_byte_for_byte(
    git_repo: Path, run_git: Any
) -> None:
    """Every phase of a task, each first killed at a random moment and then run again, with the user's
    uncommitted work in the checkout: it is never touched, and the task's commits reach the checkout
    only with the merge."""
    from hub.testing import FakeOllama

    (git_repo / "hub.yaml").write_text(
        (git_repo / "hub.yaml")
        .read_text(encoding="utf-8")
        .replace("backend: mcp", "backend: ollama")
        .replace("judge:\n  command: null", 'judge:\n  command: "echo \'{\\"verdict\\": \\"PASS\\"}\'"'),
        encoding="utf-8",
    )
    run_git(git_repo, "commit", "-q", "-am", "ollama backend, a judge command")
    mine = {"README.md": b"# my unsaved notes\r\n", "scratch.txt": b"untracked \x00 bytes"}
    for name, data in mine.items():
        (git_repo / name).write_bytes(data)
    head = run_git(git_repo, "rev-parse", "HEAD")
    model = "qwen2.5-coder:7b"
    answer = 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name\n```\n'
    rng = random.Random(5)
    with FakeOllama({model: lambda body: answer if "implement" in json.dumps(body) else PASS_REVIEW}) as fake:
        env = {"OLLAMA_HOST": fake.url}
        created = subprocess.run(
            [
                sys.executable,
                "-m",
                "hub",
                "new",
                "--title",
                "Comma",
                "--requirement",
                "r",
                "--target",
                "src/app.py",
            ],
            cwd=git_repo,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("HUB_")}, **env},
            capture_output=True,
            text=True,
            check=False,
        )
        assert created.returncode == 0, created.stderr
        kills = 0
        states: list[str] = []
        for _ in range(40):
            archive = git_repo / "_handoff" / "archive"
            if archive.is_dir() and any(archive.glob("*/TASK_CONTRACT.json")):
                break
            # First a run killed just after a moment of its phase, then one left to finish.
            (contract_path,) = (git_repo / "_handoff" / "tasks").glob("*/TASK_CONTRACT.json")
            contract = json.loads(contract_path.read_text(encoding="utf-8"))
            state = contract["status"] if contract["git"].get("task_branch") else "setup"
            marker = MARKERS.get(state, "handoff.transition")
            states.append(state)
            proc = hub_process(git_repo, "next", env=env)
            kills += kill_when(proc, marker, rng.uniform(0.0, 0.03))
            wait_for_orphans(proc.pid)
            for name, data in mine.items():
                assert (git_repo / name).read_bytes() == data
            if run_git(git_repo, "rev-parse", "HEAD") != head:
                break  # the merge landed (finished by the killed run or the last one)
            now = json.loads(contract_path.read_text(encoding="utf-8"))["status"]
            if now == "review_complete" and state != "review_complete":
                # The kill came after the judge's phase had finished (a loaded machine is slow to
                # deliver it): the next round kills the merge itself, rather than a run left to finish
                # merging it unkilled.
                continue
            done = hub_process(git_repo, "next", env=env)
            kill_when(done, None, 60)
            for name, data in mine.items():
                assert (git_repo / name).read_bytes() == data
        else:
            pytest.fail("the task never merged")
    # Whatever the kills left, one more run settles the merged task's bookkeeping.
    for _ in range(3):
        settle = hub_process(git_repo, "next", env=env)
        kill_when(settle, None, 60)
    assert kills >= 3 and "review_complete" in states, states  # the merge among them
    for name, data in mine.items():
        assert (git_repo / name).read_bytes() == data
    assert 'return "hello, " + name' in run_git(git_repo, "show", "main:src/app.py")
    assert run_git(git_repo, "stash", "list") == ""
    assert not (git_repo / ".git" / "MERGE_HEAD").exists()


def a_git_busy_run(ctx: Context) -> None:
    """A phase that finds a live git holding a lock (as killed_git reports it)."""
    from hub.phases.run import Run
    from hub.phases.session import busy_until_limit
    from hub.repo.killed_git import GitBusy

    run = Run(ctx, load_contract(ctx.handoff.contract), "setup-task")
    with busy_until_limit(run):
        raise GitBusy(ctx.repo_root / ".git" / "index.lock", [4242], ctx.repo_root)


@pytest.mark.parametrize(
    ("since", "seen"),
    [(timedelta(hours=2), timedelta(minutes=1)), (-timedelta(hours=2), timedelta(minutes=1))],
    ids=["unseen across a sleep", "begun in the future"],
)
def test_a_git_busy_wait_counts_only_the_time_it_was_seen(
    task: TaskDriver, ctx: Context, clock: Any, since: timedelta, seen: timedelta
) -> None:
    # Issue 35: a wait that spanned a laptop's sleep, or a mark from before a clock step, halted the task
    # `git_error` at the first look; it is a wait begun now.
    from hub.phases.session import GIT_BUSY_HALT_MINUTES

    task.new()
    mark = ctx.handoff.task_dir / ".git-busy-since"
    began = clock.now - since
    mark.write_text(f"{iso(began)}\n{iso(began + seen)}\n", encoding="utf-8")
    with pytest.raises(LockBusy) as busy:
        a_git_busy_run(ctx)
    assert busy.value.exit_code == 75
    assert mark.read_text(encoding="utf-8").split()[0] == iso(clock.now)
    # Seen all along from then on, it halts once it outlasts the limit.
    clock.advance(minutes=GIT_BUSY_HALT_MINUTES / 2)
    with pytest.raises(LockBusy):
        a_git_busy_run(ctx)
    clock.advance(minutes=GIT_BUSY_HALT_MINUTES / 2)
    with pytest.raises(GitError, match="held by a running git"):
        a_git_busy_run(ctx)


def test_a_worktree_set_aside_is_removed_by_a_later_phase_once_stale(task: TaskDriver, ctx: Context) -> None:
    # Issue 35: the `.broken-*` folders a half-made worktree is set aside as were never removed.
    from hub.repo.killed_git import SET_ASIDE_KEEP_SECONDS

    task.to_judge_review()
    worktrees = Path(task.contract()["git"]["worktree"]).parent
    now_ns = int(ctx.clock().timestamp() * 1e9)
    stale = worktrees / f"some-task.broken-{now_ns - int((SET_ASIDE_KEEP_SECONDS + 60) * 1e9)}"
    recent = worktrees / f"some-task.broken-{now_ns - int(60 * 1e9)}"
    ahead = worktrees / f"some-task.broken-{now_ns + int(3600 * 1e9)}"  # a clock ahead of ours made it
    for folder in (stale, recent, ahead):
        (folder / "src").mkdir(parents=True)
        (folder / "src" / "app.py").write_text("half written\n", encoding="utf-8")

    with running(ctx, "report-judge", {"pending_judge_review"}):
        pass

    assert not stale.exists() and recent.is_dir() and ahead.is_dir()
