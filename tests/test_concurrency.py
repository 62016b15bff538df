"""Several triggers at once on several tasks: `hub watch` and three cron loops of `hub next`, real processes.

One phase per task at a time (the task's lock), no phase run twice or skipped (each task's history is
the straight path, each model called once per task), and never more model calls at once than the
server's slots (the GPU gate), with the simulated GPU counting what the clients sent concurrently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hub.testing import FakeOllama
from hub.testing.fake_gpu import SimulatedGPU

IMPL = "impl-model"
REV = "rev-model"
TASKS = 3
DEADLINE = 240.0
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
STRAIGHT = ["lock_acquired", "code_written", "local_pass", "review_started", "judge_complete", "pass"]


def hub_yaml() -> str:
    verdict = json.dumps(json.dumps({"verdict": "PASS", "blocking_issues": []}))
    return f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama}}
  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
limits: {{parallel_tasks: {TASKS}}}
ollama: {{slots: 1}}
judge:
  command: {json.dumps("echo " + verdict)}
"""


def implement(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    for n in range(TASKS):
        if f"### mod{n}.py" in prompt:
            return f"mod{n}.py\n```python\nVALUE = 'changed {n}'\n```\n"
    return "no target found"


def test_watch_and_three_cron_loops_drive_three_tasks_without_overlap_or_repeats(
    git_repo: Path, run_git: Any
) -> None:
    for n in range(TASKS):
        (git_repo / f"mod{n}.py").write_text(f"VALUE = {n}\n", encoding="utf-8")
    (git_repo / "hub.yaml").write_text(hub_yaml(), encoding="utf-8")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "modules")
    gpu = SimulatedGPU(slots=1, max_loaded=1, generation_seconds=0.05)
    with FakeOllama({IMPL: implement, REV: lambda _b: PASS_REVIEW}, gpu=gpu) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")

        def hub(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "hub", *args],
                cwd=git_repo,
                env=env,
                capture_output=True,
                text=True,
                timeout=DEADLINE,
                check=False,
            )

        for n in range(TASKS):
            created = hub("new", "--title", f"Change mod{n}", "--requirement", "r", "--target", f"mod{n}.py")
            assert created.returncode == 0, created.stderr

        archive = git_repo / "_handoff" / "archive"
        done = threading.Event()
        failures: list[str] = []

        def all_merged() -> bool:
            return archive.is_dir() and len(list(archive.glob("*/TASK_CONTRACT.json"))) == TASKS

        def cron() -> None:
            until = time.monotonic() + DEADLINE
            while not done.is_set() and time.monotonic() < until:
                ran = hub("next", "--json")
                if ran.returncode not in (0, 75):
                    failures.append(f"hub next exited {ran.returncode}: {ran.stdout} {ran.stderr}")
                    done.set()
                if all_merged():
                    done.set()

        watcher = subprocess.Popen(
            [sys.executable, "-m", "hub", "watch", "--poll", "--interval", "1", "--jobs", str(TASKS)],
            cwd=git_repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        loops = [threading.Thread(target=cron) for _ in range(3)]
        try:
            for loop in loops:
                loop.start()
            for loop in loops:
                loop.join(DEADLINE)
        finally:
            done.set()
            watcher.send_signal(signal.SIGTERM)
            watcher.wait(timeout=60)

    assert failures == []
    assert all_merged()
    for n in range(TASKS):
        assert (git_repo / f"mod{n}.py").read_text(encoding="utf-8") == f"VALUE = 'changed {n}'\n"
    for path in archive.glob("*/TASK_CONTRACT.json"):
        contract = json.loads(path.read_text(encoding="utf-8"))
        assert [h["event"] for h in contract["history"]] == STRAIGHT, contract["task_id"]
        assert contract["cost"]["implementer"]["calls"] == 1
        assert contract["cost"]["local_reviewer"]["calls"] == 1
    assert len(fake.chat_requests(IMPL)) == TASKS and len(fake.chat_requests(REV)) == TASKS
    assert gpu.stats.max_requested == 1
    assert len(run_git(git_repo, "worktree", "list").splitlines()) == 1
