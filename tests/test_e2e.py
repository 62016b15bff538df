"""A task end to end as a person runs it: the real `hub` CLI in a subprocess, the hub's own worker (backend
mcp, the default: its tools inside the CLI's process, `transport: inprocess`) and FakeOllama on loopback.

The main path runs through the worker, as a default install does. The failure paths run the same CLI
with the roles' backend set to `ollama` (HUB_*_BACKEND), which changes nothing above the Worker seam;
tests/phases/ has every failure case in-process, tests/faces/test_until_idle.py the worker over stdio.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hub.testing import FakeOllama, Reply

IMPL = "impl-model"
REV = "rev-model"
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
GREET_STRIPPED = 'def greet(name):\n    return "hello, " + name.strip()\n'
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
HUB_YAML = f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, timeouts: {{first_token: 30, stall: 1.5, total: 60}}}}
  local_reviewer: {{model: {REV}, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
models:
  {IMPL}: {{num_ctx: 8192}}
"""
PHASE_TIMEOUT = 90  # seconds; a loaded two-core machine spawns the worker server slowly

Hub = Callable[..., "subprocess.CompletedProcess[str]"]


def whole_file(path: str, text: str) -> str:
    return f"{path}\n```python\n{text}```\n"


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        server.add_model(IMPL)
        server.add_model(REV)
        yield server


@pytest.fixture
def cli(git_repo: Path, hub: Hub, fake: FakeOllama, run_git: Callable[..., str]) -> Hub:
    """`hub ARGS` in a repo configured with distinct implementer and reviewer models behind the MCP worker
    (or, with `backend="ollama"`, straight to Ollama); fails the test on an unexpected exit code."""
    (git_repo / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
    run_git(git_repo, "commit", "-q", "-am", "configure the hub")

    def run(*args: str, code: int = 0, backend: str = "mcp") -> subprocess.CompletedProcess[str]:
        env = {"OLLAMA_HOST": fake.url}
        if backend != "mcp":
            env.update(HUB_IMPLEMENTER_BACKEND=backend, HUB_LOCAL_REVIEWER_BACKEND=backend)
        done = hub(*args, env=env, timeout=PHASE_TIMEOUT)
        assert done.returncode == code, (
            f"hub {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
        return done

    return run


def new_task(cli: Hub) -> str:
    done = cli(
        "new",
        "--title",
        "Greet politely",
        "--requirement",
        "greet() says 'hello, NAME'",
        "--target",
        "src/app.py",
        "--json",
    )
    task_id = str(json.loads(done.stdout)["task_id"])
    cli("setup-task")
    return task_id


def judge(repo: Path, verdict: str, issues: list[dict[str, object]] | None = None) -> None:
    report = {
        "verdict": verdict,
        "summary": "read the diff",
        "blocking_issues": issues or [],
        "suggestions": [],
    }
    (task_id,) = [p.name for p in (repo / "_handoff" / "tasks").iterdir()]
    (repo / "_handoff" / "tasks" / task_id / "JUDGE_REPORT.json").write_text(json.dumps(report), "utf-8")


def user_prompts(fake: FakeOllama, model: str) -> list[str]:
    return [body["messages"][-1]["content"] for body in fake.chat_requests(model)]


def transitions(repo: Path) -> list[tuple[str, str, str]]:
    lines = (repo / "_handoff" / "transition.ndjson").read_text(encoding="utf-8").splitlines()
    return [(e["old_status"], e["event"], e["new_status"]) for e in map(json.loads, lines)]


def test_a_task_runs_from_new_to_merged_through_the_cli_and_the_worker_server(
    git_repo: Path, cli: Hub, fake: FakeOllama, run_git: Callable[..., str]
) -> None:
    fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    fake.script(REV, PASS_REVIEW)
    task_id = new_task(cli)

    implemented = cli("run-implementer", "--json")
    reviewed = cli("run-local-review", "--json")
    judge(git_repo, "PASS")
    cli("report-judge")
    log = cli("log", "--task", task_id).stdout
    merged = cli("finalize-task", "--json")

    assert json.loads(implemented.stdout)["to"] == "pending_local_review"
    assert json.loads(reviewed.stdout)["to"] == "pending_judge_review"
    assert json.loads(merged.stdout)["to"] == "merged"
    assert run_git(git_repo, "show", "main:src/app.py") + "\n" == GREET_FIXED
    assert run_git(git_repo, "status", "--porcelain") == ""
    assert transitions(git_repo) == [
        ("pending_implementer", "lock_acquired", "implementation_in_progress"),
        ("implementation_in_progress", "code_written", "pending_local_review"),
        ("pending_local_review", "local_pass", "pending_judge_review"),
        ("pending_judge_review", "review_started", "judge_review_in_progress"),
        ("judge_review_in_progress", "judge_complete", "review_complete"),
        ("review_complete", "pass", "merged"),
    ]
    archive = git_repo / "_handoff" / "archive" / task_id
    contract = json.loads((archive / "TASK_CONTRACT.json").read_text(encoding="utf-8"))
    assert contract["status"] == "merged"
    assert [h["event"] for h in contract["history"]] == [t[1] for t in transitions(git_repo)]
    assert contract["cost"]["implementer"]["calls"] == 1
    assert contract["cost"]["local_reviewer"]["calls"] == 1
    # Each model was reached through the worker server, with the model's fixed num_ctx.
    assert [b["options"]["num_ctx"] for b in fake.chat_requests(IMPL)] == [8192]
    assert len(fake.chat_requests(REV)) == 1
    # Provenance: each model call, diff and report is on file, and `hub log --task` lists them in order.
    runs = sorted(p.name for p in (archive / "runs").iterdir())
    assert runs[:3] == ["001-model-call.json", "002-diff.json", "003-model-call.json"]
    shown = [name for name in re.findall(r"\d{3}-[a-z-]+\.\w+", log)]
    assert shown[:3] == runs[:3]
    assert "pending_local_review -[local_pass]-> pending_judge_review" in log


def test_a_failed_verdict_sends_its_blocking_issues_into_the_rework_prompt(
    git_repo: Path, cli: Hub, fake: FakeOllama, run_git: Callable[..., str]
) -> None:
    fake.script(IMPL, whole_file("src/app.py", GREET_FIXED), whole_file("src/app.py", GREET_STRIPPED))
    fake.script(REV, PASS_REVIEW, PASS_REVIEW)
    new_task(cli)
    cli("run-implementer", backend="ollama")
    cli("run-local-review", backend="ollama")
    issue = {
        "id": "B1",
        "severity": "major",
        "file": "src/app.py",
        "line": 2,
        "description": "names with spaces around them are greeted with the spaces",
        "fix_required": "strip NAME",
    }
    judge(git_repo, "FAIL", [issue])

    failed = cli("report-judge", "--json")
    cli("run-implementer", backend="ollama")
    cli("run-local-review", backend="ollama")
    judge(git_repo, "PASS")
    cli("report-judge")
    cli("finalize-task")

    assert json.loads(failed.stdout)["to"] == "pending_implementer"
    rework = user_prompts(fake, IMPL)[1]
    assert "The judge rated the last attempt FAIL" in rework
    assert "names with spaces around them are greeted with the spaces" in rework
    assert "Fix: strip NAME" in rework
    assert run_git(git_repo, "show", "main:src/app.py") + "\n" == GREET_STRIPPED


def test_an_empty_answer_is_strike_one_and_the_next_run_succeeds(cli: Hub, fake: FakeOllama) -> None:
    fake.script(IMPL, "", whole_file("src/app.py", GREET_FIXED))
    new_task(cli)

    first = cli("run-implementer", "--json", backend="ollama")
    second = cli("run-implementer", "--json", backend="ollama")

    assert json.loads(first.stdout)["to"] == "pending_implementer"
    assert json.loads(first.stdout)["data"]["stall"] == "empty_output"
    assert json.loads(second.stdout)["to"] == "pending_local_review"
    (status,) = json.loads(cli("status", "--json").stdout)["tasks"]
    assert status["attempt"] == 2
    assert status["next"]["phase"] == "run-local-review"


def test_two_stalls_halt_with_exit_4_and_the_printed_resume_command_works(
    git_repo: Path, cli: Hub, fake: FakeOllama, hub: Hub
) -> None:
    stalled = Reply(
        text="src/app.py\n```python\nHALF-WRITTEN-LINE\n",
        stall_after_chars=35,
        stall_seconds=30,
        chunk_chars=100,
    )
    fake.script(IMPL, stalled, "I will think about it.", whole_file("src/app.py", GREET_FIXED))
    new_task(cli)

    # The first stall crosses the worker server: its own stall clock, the partial output carried back.
    first = cli("run-implementer", "--json")
    second = cli("run-implementer", "--json", code=4, backend="ollama")
    next_ = cli("next", code=4)

    assert json.loads(first.stdout)["data"]["stall"] == "timeout: stall"
    assert json.loads(second.stdout)["to"] == "erik_consultation"
    (task_folder,) = (git_repo / "_handoff" / "tasks").iterdir()
    handoff = task_folder
    report = (handoff / "STALL_REPORT.md").read_text(encoding="utf-8")
    assert "## Attempt 1: timeout: stall" in report and "## Attempt 2: malformed_output" in report
    assert "HALF-WRITTEN" in report and "I will think about it." in report
    halt = (handoff / "ERIK_HALT.md").read_text(encoding="utf-8")
    assert "halted" in next_.stdout + next_.stderr
    resume_line = next(line.strip() for line in halt.splitlines() if "hub" in line and "resume --to" in line)
    assert resume_line.startswith("cd ")
    # Run the resume command exactly as printed, with `hub` meaning this checkout's CLI: a stall needs a
    # note for the implementer, and its placeholder is refused until a person replaces it.
    words = shlex.split(resume_line.split("&&", 1)[1])
    assert words[:5] == ["hub", "resume", "--to", "pending_implementer", "--note"]
    as_printed = hub(*words[1:], env={"OLLAMA_HOST": fake.url})
    assert as_printed.returncode == 1 and "placeholder" in as_printed.stderr
    words[5] = "Ollama restarted with a longer stall timeout"
    assert hub(*words[1:], env={"OLLAMA_HOST": fake.url}).returncode == 0
    resumed = cli("run-implementer", "--json", backend="ollama")

    assert json.loads(resumed.stdout)["to"] == "pending_local_review"
    worktree = Path(json.loads((handoff / "TASK_CONTRACT.json").read_text("utf-8"))["git"]["worktree"])
    assert (worktree / "src" / "app.py").read_text(encoding="utf-8") == GREET_FIXED
