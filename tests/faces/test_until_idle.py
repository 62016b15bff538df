"""`hub next --until-idle`: one process takes tasks as far as they go, its MCP worker server started once.

Real subprocesses of the CLI, the default `mcp` backend (the hub's own worker in-process, or a real
`hub worker serve` over stdio) and a FakeOllama; the judge is a command that passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.testing import FakeOllama

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import HubRunner

IMPL, REV = "impl-model", "rev-model"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
TARGETS = ("src/app.py", "src/other.py")
VERDICT = json.dumps({"verdict": "PASS", "blocking_issues": []})


CHANGED = {
    "src/app.py": 'def greet(name):\n    return "hello, " + name\n',
    "src/other.py": "VALUE = 1\n",
}


def changed(rel: str) -> str:
    return CHANGED[rel]


def implement(body: dict[str, Any]) -> str:
    """The file the prompt asks for, changed: each task has its own target."""
    prompt = body["messages"][-1]["content"]
    for rel in TARGETS:
        if f"### {rel}" in prompt:
            return f"{rel}\n```python\n{changed(rel)}```\n"
    return "no target found"


STDIO_WORKER = "workers:\n  - {name: hub, transport: stdio, command: [python, -m, hub, worker, serve]}\n"


def configure(repo: Path, run_git: Callable[..., str], workers: str = "") -> None:
    (repo / "src" / "other.py").write_text("VALUE = 0\n", encoding="utf-8")
    (repo / "hub.yaml").write_text(
        f"""project: demo
roles:
  implementer: {{model: {IMPL}, backend: mcp}}
  local_reviewer: {{model: {REV}, backend: mcp}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
judge:
  command: {json.dumps("echo " + json.dumps(VERDICT))}
{workers}""",
        encoding="utf-8",
    )
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "configure the hub")


def events(stderr: str, name: str) -> list[dict[str, Any]]:
    found = []
    for line in stderr.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == name:
            found.append(entry)
    return found


@pytest.mark.parametrize(
    ("workers", "started", "stopped"),
    [("", "worker.inprocess_started", None), (STDIO_WORKER, "mcp.spawned", "mcp.stopped")],
    ids=["inprocess", "stdio"],
)
def test_one_run_takes_two_tasks_to_merged_with_one_worker_server(
    git_repo: Path,
    hub: HubRunner,
    run_git: Callable[..., str],
    workers: str,
    started: str,
    stopped: str | None,
) -> None:
    configure(git_repo, run_git, workers)
    with FakeOllama({IMPL: implement, REV: lambda _b: PASS_REVIEW}) as fake:
        env = {"OLLAMA_HOST": fake.url, "HUB_LOG_LEVEL": "DEBUG"}
        for rel in TARGETS:
            assert (
                hub("new", "--title", f"Change {rel}", "--requirement", "r", "--target", rel).returncode == 0
            )

        done = hub("next", "--until-idle", "--json", env=env, timeout=180)

    assert done.returncode == 0, done.stdout[-3000:]
    outcome = json.loads(done.stdout)
    ran = [(p["task_id"], p["data"]["ran"]) for p in outcome["data"]["ran"]]
    for task_id in {t for t, _ in ran}:
        phases = [phase for t, phase in ran if t == task_id]
        assert phases == ["setup-task", "run-implementer", "run-local-review", "run-judge", "finalize-task"]
    for rel in TARGETS:
        assert run_git(git_repo, "show", f"main:{rel}") == changed(rel).rstrip("\n")
    # Four model phases of two tasks, some at once: the one worker server was started once.
    assert len(events(done.stderr, started)) == 1
    if stopped:
        assert len(events(done.stderr, stopped)) == 1


def test_with_its_stdin_closed_a_watched_run_starts_no_second_round(
    git_repo: Path, run_git: Callable[..., str], hub: HubRunner
) -> None:
    configure(git_repo, run_git)
    assert hub("new", "--title", "Change", "--requirement", "r", "--target", "src/app.py").returncode == 0
    with FakeOllama({IMPL: implement, REV: lambda _b: PASS_REVIEW}) as fake:
        done = hub(
            *("next", "--until-idle", "--stop-on-eof", "--json"),
            env={"OLLAMA_HOST": fake.url},
            stdin=subprocess.DEVNULL,  # at its end already: what `hub watch` does when it stops
            timeout=120,
        )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]["ran"] == "setup-task"
    status = json.loads(hub("status", "--json").stdout)
    assert status["tasks"][0]["status"] == "pending_implementer"


def worker_server_pids(repo: Path) -> set[int]:
    """The `hub worker serve` processes working in `repo` (a server inherits the hub's working folder)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if b"worker" in cmdline and b"serve" in cmdline and Path(cwd) == repo:
            found.add(int(proc.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_shared_worker_server_killed_mid_call_strikes_both_tasks_and_a_fresh_one_finishes_them(
    git_repo: Path, hub: HubRunner, run_git: Callable[..., str]
) -> None:
    configure(git_repo, run_git, STDIO_WORKER)  # a worker server process, to be killed
    with (git_repo / "hub.yaml").open("a", encoding="utf-8") as config:
        config.write("ollama: {slots: 2}\n")  # both tasks' calls in flight on the one server at once
    run_git(git_repo, "commit", "-qam", "two calls at once")
    both_calling = threading.Barrier(2, timeout=60)
    killed: list[int] = []

    def crash_then_implement(body: dict[str, Any]) -> str:
        if not killed:
            try:
                both_calling.wait()
            except threading.BrokenBarrierError:
                return "the other task never called"
            with lock:
                if not killed:
                    (pid,) = worker_server_pids(git_repo)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            return "the server died before this reached it"
        return implement(body)

    lock = threading.Lock()
    with FakeOllama({IMPL: crash_then_implement, REV: lambda _b: PASS_REVIEW}) as fake:
        env = {"OLLAMA_HOST": fake.url, "HUB_LOG_LEVEL": "DEBUG"}
        for rel in TARGETS:
            assert (
                hub("new", "--title", f"Change {rel}", "--requirement", "r", "--target", rel).returncode == 0
            )

        done = hub("next", "--until-idle", "--json", env=env, timeout=240)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(killed) == 1
    messages = [p["message"] for p in json.loads(done.stdout)["data"]["ran"]]
    strikes = [m for m in messages if m.startswith("strike 1 (error: MCPServerCrashed)")]
    assert len(strikes) == 2, messages  # each task's call failed honestly, neither hung
    for rel in TARGETS:
        assert run_git(git_repo, "show", f"main:{rel}") == changed(rel).rstrip("\n")
    spawned = [e["pid"] for e in events(done.stderr, "mcp.spawned")]
    assert len(spawned) == 2 and killed[0] == spawned[0]  # the retries share one fresh server
    assert not [pid for pid in spawned if alive(pid)]  # nothing left behind by the run
