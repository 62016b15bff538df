"""A rework whose prompt starts as the last attempt's did, through the real CLI and a FakeOllama that counts
prompts as Ollama does (its prompt cache leaves out the start it already evaluated): the low count is a
cache hit, not a prompt the server cut, and no warning says it was cut (issue 36, item 10); a count far
below even the uncached rest still is one. Each `hub` command is a process of its own, as a person runs it:
what one process sent, the next one learns from the hub's memory of recent prompts."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hub.testing import FakeOllama, Reply

MODEL = "impl-model"
REVIEWER = "rev-model"
HUB_YAML = f"""\
project: demo
roles:
  implementer: {{model: {MODEL}, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
  local_reviewer: {{model: {REVIEWER}, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
models:
  {MODEL}: {{num_ctx: 8192}}
"""
FIRST = 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name\n```\n'
REWORK = 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name.strip()\n```\n'
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
CUT = "worker.prompt_truncated"

Hub = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(prompt_cache=True) as server:
        yield server


def rework(
    git_repo: Path, hub: Hub, fake: FakeOllama, run_git: Callable[..., str], backend: str, code: int = 0
) -> subprocess.CompletedProcess[str]:
    """A task's first attempt, a FAIL verdict, and the rework, which exits `code`."""
    (git_repo / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
    run_git(git_repo, "commit", "-q", "-am", "configure the hub")
    env = {"OLLAMA_HOST": fake.url, "HUB_IMPLEMENTER_BACKEND": backend, "HUB_LOCAL_REVIEWER_BACKEND": backend}

    def cli(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = hub(*args, env=env, timeout=90)
        assert done.returncode == code, (
            f"hub {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        return done

    cli("new", "--title", "Greet", "--requirement", "greet() says 'hello, NAME'", "--target", "src/app.py")
    cli("setup-task")
    first = cli("run-implementer")
    cli("run-local-review")
    (task_dir,) = (git_repo / "_handoff" / "tasks").iterdir()
    issue = {"id": "B1", "severity": "major", "file": "src/app.py", "line": 2, "description": "spaces kept"}
    verdict = {"verdict": "FAIL", "summary": "s", "blocking_issues": [issue], "suggestions": []}
    (task_dir / "JUDGE_REPORT.json").write_text(json.dumps(verdict), encoding="utf-8")
    cli("report-judge")
    again = cli("run-implementer", code=code)
    assert CUT not in first.stderr
    return again


@pytest.mark.parametrize("backend", ["mcp", "ollama"])
def test_a_rework_whose_prompt_starts_as_the_last_ones_is_no_cut_prompt(
    git_repo: Path, hub: Hub, fake: FakeOllama, run_git: Callable[..., str], backend: str
) -> None:
    fake.script(MODEL, FIRST, REWORK)
    fake.script(REVIEWER, PASS_REVIEW)

    stderr = rework(git_repo, hub, fake, run_git, backend).stderr

    first, again = (b["messages"] for b in fake.chat_requests(MODEL))
    assert first[0] == again[0]  # the same instructions: the server had them cached
    assert CUT not in stderr and "prompt_count_low" not in stderr, stderr


def test_a_rework_count_far_below_its_uncached_rest_is_still_a_cut_prompt(
    git_repo: Path, hub: Hub, fake: FakeOllama, run_git: Callable[..., str]
) -> None:
    fake.script(MODEL, FIRST, Reply(text=REWORK, prompt_eval_count=30))
    fake.script(REVIEWER, PASS_REVIEW)

    done = rework(git_repo, hub, fake, run_git, "mcp", code=4)

    # The rework's first call has nothing of its own cached: a cut there halts before any edit.
    assert CUT in done.stderr
    assert "halted (context_overflow): the server read only 30 prompt tokens" in done.stdout
