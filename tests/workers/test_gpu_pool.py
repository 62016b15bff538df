"""A pool of model servers (`ollama.hosts`) with one of them dead, through the real CLI: the live one
serves every call, and the dead one is used again once it answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hub.testing import FakeOllama
from hub.workers.gpu_gate import Host

IMPL = "impl-model"
REV = "rev-model"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
DEADLINE = 120.0


def hub_yaml(hosts: list[str]) -> str:
    verdict = json.dumps(json.dumps({"verdict": "PASS", "blocking_issues": []}))
    return f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: ollama}}
  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
limits: {{server_wait_minutes: 1}}
ollama: {{hosts: {json.dumps(hosts)}}}
judge:
  command: {json.dumps("echo " + verdict)}
"""


def implement(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    name = "mod1.py" if "### mod1.py" in prompt else "mod0.py"
    return f"{name}\n```python\nVALUE = 'changed'\n```\n"


def drive(repo: Path, env: dict[str, str], task_title: str, target: str) -> tuple[float, str]:
    """`hub new` and then `hub next` until the task is merged (or halted); seconds, final state."""

    def hub(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hub", *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )

    created = hub("new", "--title", task_title, "--requirement", "r", "--target", target, "--json")
    assert created.returncode == 0, created.stderr
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE:
        ran = hub("next", "--json")
        assert ran.returncode in (0, 75), ran.stdout + ran.stderr
        status = json.loads(hub("status", "--json").stdout)
        tasks = status.get("tasks") or []
        if not tasks:  # archived: merged
            return time.monotonic() - started, "merged"
        states = {t.get("state") for t in tasks}
        if states & {"halted", "erik_consultation"}:
            return time.monotonic() - started, str(states)
    raise AssertionError("the task neither merged nor halted in time")


def test_a_pool_with_one_dead_server_runs_on_the_live_one_and_uses_the_dead_one_again_once_it_answers(
    git_repo: Path, run_git: Any
) -> None:
    for n in (0, 1):
        (git_repo / f"mod{n}.py").write_text(f"VALUE = {n}\n", encoding="utf-8")
    replies = {IMPL: implement, REV: lambda _b: PASS_REVIEW}
    with FakeOllama(replies) as dead, FakeOllama(replies) as live:
        dead.stop()  # listed first and never answered: the pool's first choice is down
        (git_repo / "hub.yaml").write_text(hub_yaml([dead.url, live.url]), encoding="utf-8")
        run_git(git_repo, "add", "-A")
        run_git(git_repo, "commit", "-q", "-m", "modules and a pool")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k != "OLLAMA_HOST"}
        env.update(HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")

        seconds, state = drive(git_repo, env, "Change mod0", "mod0.py")

        assert state == "merged"
        assert (git_repo / "mod0.py").read_text(encoding="utf-8") == "VALUE = 'changed'\n"
        assert len(live.chat_requests(IMPL)) == 1 and len(live.chat_requests(REV)) == 1
        # Far less than the minute of server_wait_minutes a halt would have taken.
        assert seconds < 50
        mark = git_repo / "_handoff" / "gpu" / f"{Host(dead.url).key}.down.json"
        assert mark.is_file()

        dead.start()  # the same port: the server is back
        # Time passes (the mark's few seconds), without a sleep: the mark runs out now.
        data = json.loads(mark.read_text(encoding="utf-8"))
        mark.write_text(json.dumps({**data, "until": 0}), encoding="utf-8")

        _, state = drive(git_repo, env, "Change mod1", "mod1.py")

        assert state == "merged"
        assert not mark.exists()
        # It had the implementer's model loaded last: it is the first choice again.
        assert len(dead.chat_requests(IMPL)) == 1
