"""`hub watch`: a whole task driven by the watcher in a subprocess (FakeOllama for the models, a command
judge that writes PASS), a clean stop on SIGTERM even mid-model-call, and the loop's rules in-process
(what wakes it, what is due, no busy retry of a failing phase, the polling fallback)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.faces.watch import PhaseRun, Watcher, decide, relevant
from hub.phases.context import Context
from hub.state import handoff
from hub.state.backlog import add_tasks
from hub.state.breakers import Trip
from hub.state.contract import now_utc
from hub.testing import FakeOllama, Reply

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner, TaskDriver

IMPL, REV = "impl-model", "rev-model"
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
IMPLEMENTER_ANSWER = f"src/app.py\n```python\n{GREET_FIXED}```\n"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
PROPOSAL = "# Greet politely\n\nTarget: src/app.py\n\n## Requirements\n\n- greet() says 'hello, NAME'\n"
JUDGE_PASS = (
    "import json, os, sys\n"
    "sys.stdin.read()\n"
    "with open(os.environ['HUB_JUDGE_REPORT'], 'w', encoding='utf-8') as f:\n"
    "    json.dump({'verdict': 'PASS', 'summary': 'the comma is there'}, f)\n"
)
DEADLINE = 60.0


def configure(repo: Path, run_git: Callable[..., str], judge_command: str) -> None:
    (repo / "hub.yaml").write_text(
        f"""project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama, timeouts: {{first_token: 60, stall: 30, total: 120}}}}
  local_reviewer: {{model: {REV}, backend: ollama, timeouts: {{first_token: 60, stall: 30, total: 120}}}}
judge:
  command: {json.dumps(judge_command)}
""",
        encoding="utf-8",
    )
    run_git(repo, "commit", "-q", "-am", "configure the hub")


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        server.add_model(IMPL)
        server.add_model(REV)
        yield server


class WatchProcess:
    """`hub watch` as a subprocess; its JSON log lines are read by a thread and can be waited for."""

    def __init__(self, repo: Path, ollama_url: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(OLLAMA_HOST=ollama_url, HUB_LOG_FORMAT="json")
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.seen = 0
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hub", "watch", *args],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self.changed:
                self.raw.append(line)
                with contextlib.suppress(ValueError):
                    self.lines.append(json.loads(line))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], seconds: float = DEADLINE
    ) -> dict[str, Any]:
        """The first log line after the last one waited for that satisfies `predicate`."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while True:
                for i in range(self.seen, len(self.lines)):
                    if predicate(self.lines[i]):
                        self.seen = i + 1
                        return self.lines[i]
                remaining = deadline - time.monotonic()
                assert remaining > 0 and self.process.poll() is None, "".join(self.raw[-30:])
                self.changed.wait(remaining)

    def phases(self) -> list[tuple[str, str | None, int]]:
        return [(e["phase"], e.get("to"), e["exit"]) for e in self.lines if e.get("event") == "watch.phase"]

    def stop(self, seconds: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=seconds)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
            self.reader.join(timeout=10)
            assert self.process.stderr is not None
            self.process.stderr.close()


def test_watch_drives_a_whole_task_and_stops_cleanly_on_sigterm(
    git_repo: Path, ctx: Context, fake: FakeOllama, run_git: Callable[..., str], tmp_path: Path
) -> None:
    judge = tmp_path / "judge.py"
    judge.write_text(JUDGE_PASS, encoding="utf-8")
    configure(git_repo, run_git, f"{shlex.quote(sys.executable)} {shlex.quote(str(judge))}")
    fake.script(IMPL, IMPLEMENTER_ANSWER)
    fake.script(REV, PASS_REVIEW)
    watcher = WatchProcess(git_repo, fake.url, "--interval", "30")
    try:
        watcher.wait_for(lambda e: e.get("event") == "watch.waiting")
        add_tasks(ctx.handoff, ctx.clock, [{"content": PROPOSAL, "priority": 1}])

        watcher.wait_for(lambda e: e.get("event") == "watch.phase" and e.get("to") == "merged")
        watcher.wait_for(lambda e: e.get("event") == "watch.waiting" and "no proposals" in e.get("why", ""))
        code = watcher.stop()
    finally:
        watcher.stop()

    assert code == 0
    assert watcher.phases() == [
        ("promote-backlog", "pending_implementer", 0),
        ("setup-task", "pending_implementer", 0),
        ("run-implementer", "pending_local_review", 0),
        ("run-local-review", "pending_judge_review", 0),
        ("run-judge", "review_complete", 0),
        ("finalize-task", "merged", 0),
    ]
    assert watcher.lines[-1]["event"] == "watch.stopped"
    assert run_git(git_repo, "show", "main:src/app.py") + "\n" == GREET_FIXED
    assert [e["status"] for e in json.loads(ctx.handoff.backlog.read_text(encoding="utf-8"))["tasks"]] == [
        "merged"
    ]


def test_sigterm_during_a_model_call_interrupts_the_phase_and_the_next_run_recovers(
    git_repo: Path,
    ctx: Context,
    task: TaskDriver,
    fake: FakeOllama,
    run_git: Callable[..., str],
    hub: HubRunner,
) -> None:
    configure(git_repo, run_git, "false")
    asked = threading.Event()

    def slow(_body: dict[str, Any]) -> Reply:
        asked.set()
        return Reply(text=IMPLEMENTER_ANSWER, first_token_delay=120)

    fake.respond_with(IMPL, slow)
    task.new(target="src/app.py")
    watcher = WatchProcess(git_repo, fake.url, "--grace", "0.2")
    try:
        assert asked.wait(DEADLINE), "".join(watcher.raw)
        started = time.monotonic()
        code = watcher.stop()
        stopped_in = time.monotonic() - started
    finally:
        watcher.stop()

    assert code == 0 and stopped_in < 15
    assert watcher.lines[-1]["event"] == "watch.stopped"
    assert task.contract()["status"] == "implementation_in_progress"
    with handoff.phase_lock(ctx.handoff, "test", now_utc()):
        pass  # the interrupted phase's lock died with it

    fake.respond_with(IMPL, lambda _body: IMPLEMENTER_ANSWER)
    done = hub("next", "--json", env={"OLLAMA_HOST": fake.url})

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["to"] == "pending_local_review"
    events = [h["event"] for h in task.contract()["history"]]
    assert events == ["lock_acquired", "interrupted", "lock_acquired", "code_written"]


# --- the loop, in-process ----------------------------------------------------------------------------


def test_only_changes_that_can_make_a_phase_due_wake_the_watcher(tmp_path: Path) -> None:
    folder = tmp_path / "_handoff"
    for name in ("TASK_CONTRACT.json", "backlog.json", "notes.json", "JUDGE_REPORT.json", "REBUTTAL.md"):
        assert relevant(folder, folder / name), name
        assert relevant(folder, folder / "tasks" / "t" / name), name
    for path in (
        "tasks/t/.hub.lock",
        "tasks/t/runs/001-model-call.json",
        ".hub.lock",
        ".hub.lock.owner",
        ".backlog.lock",
        ".status.lock",
        "transition.ndjson",
        "transition.ndjson.1",
        ".TASK_CONTRACT.json.abc.tmp",
        "runs/t/001-model-call.json",
        "archive/t/TASK_CONTRACT.json",
        "logs/worker.log",
        "notify.log",
        ".notified/drained-1-0a1b2c3d",
        "tasks/t/.notified/halted-7",
    ):
        assert not relevant(folder, folder / path), path
    assert not relevant(folder, tmp_path / "elsewhere" / "TASK_CONTRACT.json")


def test_decide_runs_what_hub_next_would_and_applies_a_waiting_judge_report(
    ctx: Context, task: TaskDriver
) -> None:
    assert decide(ctx) == (None, "no active task; backlog: no proposals in the backlog")
    add_tasks(ctx.handoff, ctx.clock, [{"content": "Greet politely"}])
    assert decide(ctx)[0] == ["next"]

    task.ctx.handoff.backlog.unlink()
    task.to_judge_review()
    assert decide(ctx)[0] is None  # no judge configured: waiting for one
    task.judge_report("PASS")
    assert decide(ctx) == (["next"], f"report-judge: task {task.contract()['task_id']}")

    task.ctx.handoff.judge_report_json.unlink()
    task.run().halt(Trip("test", "a person must look"))
    command, why = decide(ctx)
    assert command is None and "halted" in why


def run_watcher(watcher: Watcher) -> threading.Thread:
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    return thread


def test_a_phase_that_makes_no_progress_is_retried_with_back_off(git_repo: Path, task: TaskDriver) -> None:
    task.new()  # setup-task is due
    runs: list[float] = []

    def on_phase(_run: PhaseRun) -> None:
        runs.append(time.monotonic())
        if len(runs) == 3:
            watcher.request_stop()

    watcher = Watcher(git_repo, interval=0.2, hub_argv=["sh", "-c", "exit 1", "sh"], on_phase=on_phase)
    thread = run_watcher(watcher)
    thread.join(DEADLINE)

    assert not thread.is_alive()
    assert len(runs) == 3
    assert runs[1] - runs[0] >= 0.2 and runs[2] - runs[1] >= 0.4


def test_a_merge_waiting_on_the_persons_checkout_is_retried_every_interval_not_at_once(
    git_repo: Path, task: TaskDriver
) -> None:
    task.to_review_complete("PASS")  # finalize-task is due
    status = git_repo / "_handoff" / "STATUS.md"
    # What finalize-task does while the person's checkout holds changes: rewrites the task's files
    # (progress to a fingerprint) and says the merge waits.
    outcome = {"phase": "finalize-task", "exit_code": 0, "data": {"merge_wait": "merge waits: calc.py"}}
    child = f"import time; open({str(status)!r}, 'w').write(str(time.time())); print({json.dumps(outcome)!r})"
    runs: list[PhaseRun] = []
    at: list[float] = []

    def on_phase(run: PhaseRun) -> None:
        runs.append(run)
        at.append(time.monotonic())
        if len(runs) == 3:
            watcher.request_stop()

    watcher = Watcher(git_repo, interval=0.3, hub_argv=[sys.executable, "-c", child], on_phase=on_phase)
    thread = run_watcher(watcher)
    thread.join(DEADLINE)

    assert not thread.is_alive()
    assert all(run.only_waited for run in runs)
    assert at[1] - at[0] >= 0.3 and at[2] - at[1] >= 0.3


def test_a_child_that_moved_a_task_but_met_a_busy_lock_has_made_progress() -> None:
    moved = {"task_id": "a", "exit_code": 0, "data": {"ran": "run-implementer"}}
    busy = {"task_id": "b", "exit_code": 75, "data": {"ran": "run-implementer"}}
    waits = {"task_id": "c", "exit_code": 0, "data": {"ran": "finalize-task", "merge_wait": "..."}}

    def run(code: int, *phases: dict[str, Any]) -> PhaseRun:
        outcome = {"exit_code": code, "data": {"ran": list(phases)}} if len(phases) > 1 else phases[0]
        return PhaseRun(["next"], code, 0.1, outcome)

    assert not run(75, moved, busy).only_waited
    assert run(75, busy, waits).only_waited
    assert run(0, waits).only_waited
    assert run(75, busy).only_waited
    assert PhaseRun(["next"], 75, 0.1, {}).only_waited  # the lock refused before any outcome
    assert not PhaseRun(["next"], 1, 0.1, {}).only_waited


def test_polling_notices_a_new_task(git_repo: Path, task: TaskDriver) -> None:
    waiting = threading.Event()
    ran: list[PhaseRun] = []

    def on_phase(run: PhaseRun) -> None:
        ran.append(run)
        watcher.request_stop()

    watcher = Watcher(
        git_repo,
        poll=True,
        interval=30,
        hub_argv=[sys.executable, "-c", 'print(\'{"phase": "fake"}\')'],
        on_phase=on_phase,
        on_wait=lambda _why: waiting.set(),
    )
    thread = run_watcher(watcher)
    assert waiting.wait(DEADLINE)
    task.new()
    thread.join(DEADLINE)

    assert not thread.is_alive()
    assert [(r.command, r.exit_code, r.outcome) for r in ran] == [(["next"], 0, {"phase": "fake"})]


def test_a_failed_phase_is_logged_with_its_phase_task_state_and_the_childs_error(
    git_repo: Path, task: Any
) -> None:
    import structlog

    task_id = task.new()  # setup-task is due
    failing = ["sh", "-c", "echo \"hub: base branch 'main' does not exist\" >&2; exit 1", "sh"]

    watcher = Watcher(git_repo, interval=30, hub_argv=failing, on_phase=lambda _run: watcher.request_stop())
    with structlog.testing.capture_logs() as logs:
        thread = run_watcher(watcher)
        thread.join(DEADLINE)

    assert not thread.is_alive()
    line = next(entry for entry in logs if entry["event"] == "watch.phase")
    assert (line["phase"], line["task"], line["from"], line["exit"]) == (
        "setup-task",
        task_id,
        "pending_implementer",
        1,
    )
    assert line["message"] == "base branch 'main' does not exist"
