"""Fixtures for the implementer, review and stall tests: a real git repo, a real FakeOllama on loopback,
and the phases run in-process with backend `ollama` (the MCP path is covered end to end in test_e2e.py).

The implementer and the reviewer get different model names so each one's script is unambiguous.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import load_config
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.state.contract import Contract, now_utc
from hub.state.provenance import read_records
from hub.state.store import load as load_contract
from hub.testing import FakeOllama

IMPL = "impl-model"
REV = "rev-model"
APP_PY = 'def greet(name):\n    return "hello " + name\n'
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'

HUB_YAML = """\
project: demo
roles:
  implementer:
    model: {impl}
    backend: ollama
    timeouts: {{first_token: 20, stall: {stall}, total: 60}}
  local_reviewer:
    model: {rev}
    backend: ollama
    timeouts: {{first_token: 20, stall: {stall}, total: 60}}
models:
  {impl}: {{num_ctx: {num_ctx}}}
  {rev}: {{num_ctx: 8192}}
acceptance_timeout_seconds: 30
"""


def whole_file(path: str, text: str, lang: str = "python") -> str:
    """An implementer answer in the default format: the path on its own line, then the whole file."""
    return f"{path}\n```{lang}\n{text}```\n"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def archived_at_the_next_read(monkeypatch: pytest.MonkeyPatch, ctx: Context, task_id: str) -> None:
    """The next contract read finds the task archived first: another run's finalize won the task
    between the caller's look and its read."""
    from hub.state import handoff, store

    read = store.load

    def archived_first(path: Path) -> Contract:
        handoff.archive_task(ctx.handoff_root, task_id)
        monkeypatch.setattr(store, "load", read)
        return read(path)

    monkeypatch.setattr(store, "load", archived_first)


class Clock:
    """Real time to the second, so the contract's deadlines look current; tests never need to move it."""

    def __call__(self) -> Any:
        return now_utc().replace(microsecond=0)


class Pipeline:
    """One task in a real repo, driven phase by phase in-process against a FakeOllama."""

    def __init__(self, repo: Path, fake: FakeOllama, ollama_host: str | None = None) -> None:
        self.repo = repo
        self.fake = fake
        self.ollama_host = ollama_host or fake.url
        # Outages are waited out on a simulated clock: each pause is recorded and moves `monotonic`,
        # and `on_pause` (if set) runs in it, e.g. to bring a stopped server back.
        self.pauses: list[float] = []
        self.on_pause: Callable[[int], None] | None = None
        self.monotonic = 0.0
        self.configure()

    # -- set-up ------------------------------------------------------------------------------------------

    def configure(self, stall: float = 20, num_ctx: int = 8192, extra_yaml: str = "") -> None:
        """Rewrite and commit hub.yaml (before `start`: setup-task needs a clean tree)."""
        text = HUB_YAML.format(impl=IMPL, rev=REV, stall=stall, num_ctx=num_ctx) + extra_yaml
        (self.repo / "hub.yaml").write_text(text, encoding="utf-8")
        self.commit("configure the hub")

    def commit(self, message: str, files: Mapping[str, str] | None = None) -> None:
        for name, body in (files or {}).items():
            target = self.repo / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        git(self.repo, "add", "-A")
        if git(self.repo, "status", "--porcelain"):
            git(self.repo, "commit", "-q", "-m", message)

    @property
    def ctx(self) -> Context:
        # A fresh config each time, as each CLI invocation would read it.
        config = load_config(self.repo, env={"OLLAMA_HOST": self.ollama_host})
        return Context(config, clock=Clock(), sleep=self._pause, monotonic=lambda: self.monotonic)

    def _pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.monotonic += seconds
        if self.on_pause is not None:
            self.on_pause(len(self.pauses))

    def start(self, **fields: Any) -> str:
        """`hub new` + `hub setup-task`: a task on its branch, waiting for the implementer."""
        from hub.phases.setup import create, setup_task

        values: dict[str, Any] = {
            "title": "Greet politely",
            "requirements": ["greet() says 'hello, NAME'"],
            "target_file": "src/app.py",
            "complexity": "minor",
        }
        values.update(fields)
        task_id = str(create(self.ctx, values).task_id)
        setup_task(self.ctx)
        return task_id

    # -- the phases ------------------------------------------------------------------------------------

    def implement(self) -> Outcome:
        from hub.phases.implement import run_implementer

        return run_implementer(self.ctx)

    def review(self) -> Outcome:
        from hub.phases.local_review import run_local_review

        return run_local_review(self.ctx)

    def judge(self, verdict: str, issues: list[dict[str, Any]] | None = None) -> Outcome:
        from hub.phases.judge import report_judge

        report = {"verdict": verdict, "summary": "", "blocking_issues": issues or [], "suggestions": []}
        self.ctx.handoff.judge_report_json.write_text(json.dumps(report), encoding="utf-8")
        return report_judge(self.ctx)

    def resume(self, to_state: str, note: str | None = None) -> Outcome:
        from hub.phases.finalize import resume

        return resume(self.ctx, to_state, note)

    # -- what happened ------------------------------------------------------------------------------------

    def contract(self) -> Contract:
        return load_contract(self.ctx.handoff.contract)

    def events(self) -> list[str]:
        return [h["event"] for h in self.contract()["history"]]

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        task_id = self.contract()["task_id"]
        found = read_records(self.ctx.handoff, task_id)
        return [r for r in found if kind is None or r["kind"] == kind]

    def prompts(self, model: str = IMPL) -> list[str]:
        """The user message of every generation request the model received, oldest first (a
        continuation's last message is the answer so far; its prompt is the user message before it)."""
        return [
            next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
            for body in self.fake.chat_requests(model)
        ]

    @property
    def worktree(self) -> Path:
        """Where the task works (its own git worktree); the user's checkout before setup-task."""
        recorded = self.contract()["git"].get("worktree") if self.ctx.handoff.contract.exists() else None
        return Path(recorded) if recorded else self.repo

    def read(self, rel: str) -> str:
        """A file as the task sees it, in its worktree."""
        return (self.worktree / rel).read_text(encoding="utf-8")

    def halt_text(self) -> str:
        return self.ctx.handoff.halt_report.read_text(encoding="utf-8")

    def stall_text(self) -> str:
        return self.ctx.handoff.stall_report.read_text(encoding="utf-8")


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        server.add_model(IMPL)
        server.add_model(REV)
        yield server


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the repository that no edit may ever reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("untouched\n", encoding="utf-8")
    return folder


@pytest.fixture
def pipe(git_repo: Path, fake: FakeOllama) -> Pipeline:
    return Pipeline(git_repo, fake)
