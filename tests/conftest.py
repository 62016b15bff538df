"""Shared fixtures for the spine tests: a real git repo, the `hub` CLI as a subprocess, a phase context
with a clock the test moves, and a driver that puts a task into any state without a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import CONFIG_FILE, load_config
from hub.phases.context import Context
from hub.phases.run import Run
from hub.state import handoff
from hub.state.contract import Contract, now_utc
from hub.state.machine import ERIK_CONSULTATION, HALT_EVENT, RESUME_EVENT, TABLE, TERMINAL_STATES, Event
from hub.state.store import load as load_contract

APP_PY = 'def greet(name):\n    return "hello " + name\n'
# Variables that would make a test depend on the machine it runs on.
SCRUBBED_ENV = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` and return its stdout (stripped); fail the test on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED_ENV}
    env["HUB_LOG_FORMAT"] = "json"
    env.update(extra or {})
    return env


class Clock:
    """A clock the test moves by hand; phases read it through Context(clock=...)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def make_repo(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A git repo on `main` with one commit holding `files` (default: README.md and src/app.py) and
    hub.yaml, and _handoff/ excluded the way `hub init` does it."""
    from hub.core.config import default_yaml

    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    # Repo-local identity: the tests must not depend on the machine's global git config.
    with (path / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write("[user]\n\tname = Hub Test\n\temail = hub-test@example.invalid\n")
        config.write("[commit]\n\tgpgsign = false\n")
    for name, text in (files or {"README.md": "# demo\n", "src/app.py": APP_PY}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (path / CONFIG_FILE).write_text(default_yaml("demo"), encoding="utf-8")
    exclude = path / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def git_repo(fast_tmp: Path) -> Path:
    return make_repo(fast_tmp / "repo")


HubRunner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def hub(git_repo: Path) -> HubRunner:
    """Run `python -m hub ARGS` in the repo as a real subprocess; returns the CompletedProcess."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
        stdin: int | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hub", *args],
            cwd=cwd or git_repo,
            env=clean_env(env),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


@pytest.fixture
def clock() -> Clock:
    # Real time (whole seconds), so contracts made here look current to a `hub` subprocess too.
    return Clock(now_utc().replace(microsecond=0))


@pytest.fixture
def ctx(git_repo: Path, clock: Clock) -> Context:
    return Context(load_config(git_repo, env={}), clock=clock)


class TaskDriver:
    """Moves a task through its states with the spine's own pieces (no model): real commits on the task
    branch, `handoff.record` for the transitions a not-yet-written phase would make."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.repo = ctx.repo_root

    @property
    def hand(self) -> handoff.Handoff:
        return self.ctx.handoff

    def contract(self) -> Contract:
        return load_contract(self.hand.contract)

    def new(
        self,
        title: str = "Greet politely",
        requirements: Iterable[str] = ("greet() says 'hello, NAME'",),
        target: str = "src/app.py",
        **fields: Any,
    ) -> str:
        from hub.phases.setup import create

        outcome = create(
            self.ctx, {"title": title, "requirements": list(requirements), "target_file": target, **fields}
        )
        return str(outcome.task_id)

    def setup(self) -> Contract:
        from hub.phases.setup import setup_task

        setup_task(self.ctx)
        return self.contract()

    def run(self) -> Run:
        """A Run on the saved contract, without the lock (the driver plays a phase that holds it)."""
        return Run(self.ctx, self.contract(), "test-driver")

    def record(self, *events: str) -> Contract:
        contract = self.contract()
        for event in events:
            handoff.record(self.hand, contract, event, self.ctx.clock())
        return contract

    @property
    def worktree(self) -> Path:
        """The task's own worktree (the user's checkout before setup-task)."""
        recorded = self.contract()["git"].get("worktree") if self.hand.contract.exists() else None
        return Path(recorded) if recorded else self.repo

    def write(self, files: Mapping[str, str]) -> None:
        """Write files where the task works: its worktree."""
        root = self.worktree
        for name, text in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def implement(self, files: Mapping[str, str] | None = None) -> Run:
        """pending_implementer -> pending_local_review with `files` written and checkpointed."""
        run = self.run()
        run.take_lease(30)
        run.record("lock_acquired")
        self.write(files or {"src/app.py": APP_PY.replace('"hello "', '"hello, "')})
        run.drop_lease()
        run.record("code_written")
        run.checkpoint("code_written")
        return run

    def to_judge_review(self, files: Mapping[str, str] | None = None) -> Contract:
        """A fresh task, set up, implemented, and waiting in pending_judge_review with REVIEW_REQUEST.md."""
        from hub.phases.judge import enter_judge_review

        if not self.hand.contract.exists():
            self.new()
        if not self.contract()["git"].get("task_branch"):
            self.setup()
        run = self.implement(files)
        enter_judge_review(run, "local_pass")
        return self.contract()

    def judge_report(
        self, verdict: str, issues: Iterable[dict[str, Any]] = (), markdown: bool = False, **extra: Any
    ) -> Path:
        issues = list(issues)
        if markdown:
            bullets = "".join(f"- {i['description']}\n" for i in issues)
            text = f"# Review\n\nVerdict: {verdict}\n\n## Blocking issues\n\n{bullets}"
            self.hand.judge_report_md.write_text(text, encoding="utf-8")
            return self.hand.judge_report_md
        report = {"verdict": verdict, "blocking_issues": issues, "suggestions": [], **extra}
        self.hand.judge_report_json.write_text(json.dumps(report), encoding="utf-8")
        return self.hand.judge_report_json

    def to_review_complete(self, verdict: str = "PASS") -> Contract:
        from hub.phases.judge import report_judge

        self.to_judge_review()
        self.judge_report(verdict)
        report_judge(self.ctx)
        return self.contract()


@pytest.fixture
def task(ctx: Context) -> TaskDriver:
    return TaskDriver(ctx)


def read_bytes_tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative name -> bytes), for before/after comparisons."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes]]:
    return read_bytes_tree


def accepted_events(state: str) -> list[Event]:
    """Every event the transition table accepts in `state`: its edges, the halt from every state but a
    terminal one and erik_consultation, the resume from erik_consultation."""
    events = [event for (s, event) in TABLE if s == state]
    if state not in TERMINAL_STATES and state != ERIK_CONSULTATION:
        events.append(HALT_EVENT)
    if state == ERIK_CONSULTATION:
        events.append(RESUME_EVENT)
    return events


@pytest.fixture
def events_from() -> Callable[[str], list[Event]]:
    """`events_from(state)`: the events the machine accepts there (the tests' oracle for the table)."""
    return accepted_events


@pytest.fixture
def run_git() -> Callable[..., str]:
    """`run_git(repo, *args)`: git's stdout; with --import-mode=importlib tests cannot import conftest."""
    return git


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A temp dir on tmpfs when the machine has one: fsync costs nothing there, for tests of logic and
    of what a killed process leaves (a SIGKILL does not lose the page cache, so tmpfs loses no realism)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="hub-test-") as folder:
        yield Path(folder)
