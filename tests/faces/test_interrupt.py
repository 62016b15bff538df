"""Ctrl-C to a `hub next` running several tasks' phases: the first waits for them, a second stops now.

Real subprocesses of the CLI against a FakeOllama whose first answers take longer than the test waits.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.testing import FakeOllama, Reply

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import HubRunner

IMPL, REV = "impl-model", "rev-model"
TARGETS = ("src/app.py", "src/other.py")
WAIT = 30.0  # a bound on every wait below
# `hub` as started at a terminal, where Ctrl-C raises KeyboardInterrupt: a test run started in the
# background by a non-interactive shell (CI) inherits SIGINT ignored, and Python then leaves it so.
AS_AT_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'hub'; runpy.run_module('hub', run_name='__main__')"
)


CHANGED = {"src/app.py": 'def greet(name):\n    return "hello, " + name\n', "src/other.py": "VALUE = 1\n"}


def answer(rel: str) -> str:
    return f"{rel}\n```python\n{CHANGED[rel]}```\n"


def read_until(proc: subprocess.Popen[str], event: str, seen: list[str]) -> None:
    """Read the process's JSON log lines until one with `event` (bounded by WAIT)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + WAIT
    while not any(f'"{event}"' in line for line in seen):
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {event} in the log within {WAIT} s: {seen[-5:]}"
        line = proc.stderr.readline()
        assert line, f"the process ended before {event}: {seen[-5:]}"
        seen.append(line)


def test_a_second_ctrl_c_stops_a_hub_next_waiting_on_model_calls_and_the_next_run_recovers_both(
    git_repo: Path, hub: HubRunner, run_git: Callable[..., str]
) -> None:
    (git_repo / "src" / "other.py").write_text("VALUE = 0\n", encoding="utf-8")
    (git_repo / "hub.yaml").write_text(
        f"""project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama, timeouts: {{first_token: 300, total: 600}}}}
  local_reviewer: {{model: {REV}, backend: ollama}}
ollama: {{slots: 2}}
""",
        encoding="utf-8",
    )
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "configure the hub")
    calls: list[str] = []
    asked = threading.Semaphore(0)  # released as each call reaches the model

    def implement(body: dict[str, Any]) -> Reply | str:
        prompt = body["messages"][-1]["content"]
        calls.append(prompt)
        asked.release()
        target = next(rel for rel in TARGETS if f"### {rel}" in prompt)
        # The first two answers take minutes, as a 32B model's may; the recovered tasks' come at once.
        return Reply(answer(target), first_token_delay=300) if len(calls) <= 2 else answer(target)

    with FakeOllama({IMPL: implement}) as fake:
        env = {"OLLAMA_HOST": fake.url, "HUB_LOG_LEVEL": "INFO"}
        for rel in TARGETS:
            assert (
                hub("new", "--title", f"Change {rel}", "--requirement", "r", "--target", rel).returncode == 0
            )
        assert hub("next", env=env).returncode == 0  # both set up

        proc = subprocess.Popen(
            [sys.executable, "-c", AS_AT_A_TERMINAL, "next"],
            cwd=git_repo,
            env={**_env(), **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[str] = []
        try:
            # Both implementers wait on the model.
            assert asked.acquire(timeout=WAIT) and asked.acquire(timeout=WAIT)

            proc.send_signal(signal.SIGINT)
            read_until(proc, "next.interrupted", seen)
            assert proc.poll() is None  # the first Ctrl-C waits for the running phases
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=WAIT) == 130
            read_until(proc, "next.stopped_now", seen)
        finally:
            proc.kill()
            proc.communicate()

        # Nothing lost: the next run recovers both tasks and runs their implementers again.
        again = hub("next", env=env, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    tasks = json.loads(hub("status", "--json").stdout)["tasks"]
    assert [t["status"] for t in tasks] == ["pending_local_review"] * 2
    for t in tasks:
        events = [h["event"] for h in t["last_transitions"]]
        assert "interrupted" in events, events


def test_a_first_ctrl_c_starts_no_queued_model_call_and_exits_130(
    git_repo: Path, hub: HubRunner, run_git: Callable[..., str]
) -> None:
    # Two tasks, one slot on the server: the second implementer waits for the first one's call. After
    # a Ctrl-C that call finishes, and the queued one must not start (it started 78 s later, issue 36).
    (git_repo / "src" / "other.py").write_text("VALUE = 0\n", encoding="utf-8")
    (git_repo / "hub.yaml").write_text(
        f"""project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama, timeouts: {{first_token: 300, total: 600}}}}
  local_reviewer: {{model: {REV}, backend: ollama}}
ollama: {{slots: 1}}
limits: {{parallel_tasks: 2}}
""",
        encoding="utf-8",
    )
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "configure the hub")
    calls: list[str] = []
    asked = threading.Semaphore(0)
    release = threading.Event()

    def implement(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        calls.append(prompt)
        asked.release()
        if len(calls) == 1:
            assert release.wait(WAIT)  # the call under way when Ctrl-C comes
        return answer(next(rel for rel in TARGETS if f"### {rel}" in prompt))

    with FakeOllama({IMPL: implement}) as fake:
        env = {"OLLAMA_HOST": fake.url, "HUB_LOG_LEVEL": "INFO"}
        for rel in TARGETS:
            assert (
                hub("new", "--title", f"Change {rel}", "--requirement", "r", "--target", rel).returncode == 0
            )
        assert hub("next", env=env).returncode == 0  # both set up

        proc = subprocess.Popen(
            [sys.executable, "-c", AS_AT_A_TERMINAL, "next"],
            cwd=git_repo,
            env={**_env(), **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[str] = []
        try:
            assert asked.acquire(timeout=WAIT)  # one call reached the model
            read_until(proc, "gpu.queued", seen)  # the other waits for the slot

            proc.send_signal(signal.SIGINT)
            read_until(proc, "next.interrupted", seen)
            release.set()  # the running call ends; its slot comes free
            code = proc.wait(timeout=WAIT)
            read_until(proc, "gpu.call_not_started", seen)
        finally:
            release.set()
            proc.kill()
            proc.communicate()
        started = len(calls)
        # Which task took the slot first is the threads' race: the other one was queued.
        queued_target = next(rel for rel in TARGETS if f"### {rel}" not in calls[0])

        again = hub("next", env=env, timeout=120)  # nothing lost: the next run takes both on

    assert code == 130
    assert started == 1
    # The task whose call never started is recovered and its implementer runs (the other one's local
    # review has no reviewer scripted here: it halts, which is not what this test is about).
    tasks = {t["title"]: t for t in json.loads(hub("status", "--json").stdout)["tasks"]}
    queued = tasks[f"Change {queued_target}"]
    assert queued["status"] == "pending_local_review", again.stderr[-2000:]
    assert "interrupted" in [h["event"] for h in queued["last_transitions"]]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("HUB_")} | {"HUB_LOG_FORMAT": "json"}


def test_a_watched_child_takes_the_watchers_sigint_even_when_started_with_it_ignored(
    git_repo: Path, hub: HubRunner
) -> None:
    # A watcher started in the background by a script (nohup hub watch &) passes SIGINT ignored on to
    # its children: its SIGINT after the grace did nothing, and only the SIGKILL 10 s later ended them.
    asked = threading.Semaphore(0)

    def slow(_body: dict[str, Any]) -> Reply:
        asked.release()
        return Reply(answer("src/app.py"), first_token_delay=300)

    (git_repo / "hub.yaml").write_text(
        f"project: demo\nroles:\n  implementer: {{model: {IMPL}, backend: ollama}}\n", encoding="utf-8"
    )
    with FakeOllama({IMPL: slow}) as fake:
        env = {"OLLAMA_HOST": fake.url}
        assert hub("new", "--title", "Change", "--requirement", "r", "--target", "src/app.py").returncode == 0
        assert hub("next", env=env).returncode == 0  # set up
        child = f"trap '' INT; exec {sys.executable} -m hub next --until-idle --stop-on-eof"
        proc = subprocess.Popen(
            ["bash", "-c", child],
            cwd=git_repo,
            env={**_env(), **env},
            stdin=subprocess.PIPE,  # as the watcher's children have it
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert asked.acquire(timeout=WAIT)  # the implementer waits on the model

            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=WAIT) == 130  # interrupted; the next run recovers the task
        finally:
            proc.kill()
            _, stderr = proc.communicate()
        # What happens next is said, and `hub status` does not show the dead process's lease as live.
        assert "aborted. Nothing is lost: the next `hub next` recovers" in stderr
        shown = hub("status").stdout
        assert "STALE: that process is gone" in shown, shown
