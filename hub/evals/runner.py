"""`hub eval`: a suite of exercises through the whole pipeline, as a user's cron would run it.

The exercises go into one new git repository (`exercises/<name>/`: the stub and its tests), each becomes
a task (`hub new`: the instructions as the requirement, the stub as the only allowed path, its test file
as the acceptance command, never shown to the model up front), and one `hub next --until-idle` takes them
through setup, implementer, local review, judge and merge, several at once as the scheduler allows. The
hub runs as the real CLI in subprocesses, with the configuration under test as the repository's
hub.yaml. Afterwards each exercise's tests run on the merged base (solved = merged and passing there),
and on the task branch of every halted task (a halt of work whose tests pass is the costliest mistake):
model-written code and the suite's tests, so in the same sandbox as the pipeline's acceptance commands
(`run_tests`; issue 38: a plain subprocess there read the home folder and wrote outside every repository).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hub.core.config import load_config
from hub.core.errors import ConfigError, SuiteInvalid
from hub.core.log import get_logger
from hub.evals.report import EvalReport, TaskResult
from hub.evals.suite import Exercise, copy_inside
from hub.phases.acceptance import jail_for, run_command
from hub.safety.git_view import git_folders
from hub.safety.sandbox import SandboxUnavailable
from hub.state.machine import ERIK_CONSULTATION, MERGED

log = get_logger(__name__)

# The eval's judge when the configuration's own is not asked for: the acceptance commands already
# passed, so it approves what reaches it (and `hub eval` checks the merged code itself afterwards).
APPROVE = (
    'cat >/dev/null; echo \'{"verdict": "PASS", "summary": "hub eval: the acceptance tests are the check"}\''
)
TEST_TIMEOUT = 300.0
MAX_ROUNDS = 5

REQUIREMENT = (
    "Complete {files} so that it does what the instructions below describe. Keep the names of the "
    "existing functions and classes: tests call them. Use only the Python standard library."
)
# --hide-files: the task names the exercise's folder only, never its file; the model must find it (agent
# mode's list_files and search), and the tests in the folder are forbidden to it.
HIDDEN_REQUIREMENT = (
    "Complete the code in the folder {folder} so that it does what the instructions below describe. Keep "
    "the names of the existing functions and classes: tests call them. Use only the Python standard library."
)


@dataclass(frozen=True)
class EvalSettings:
    """What one `hub eval` run evaluates and where it works."""

    config_file: Path  # the hub.yaml under test
    workdir: Path  # a new folder: the eval repository and the report go here
    judge: str = "approve"  # "approve" (APPROVE) or "config": the judge hub.yaml configures
    parallel_tasks: int | None = None  # limits.parallel_tasks for this run (None: the file's)
    python: str = sys.executable  # runs the acceptance tests (needs pytest; `hub eval --python`)
    mode: str | None = None  # roles.implementer.mode for this run: edit or agent (None: the file's)
    hide_files: bool = False  # the tasks name the exercise's folder, not its files (HIDDEN_REQUIREMENT)


def run_eval(
    exercises: list[Exercise], settings: EvalSettings, progress: Callable[[str], None] = lambda _: None
) -> EvalReport:
    """Run every exercise through the pipeline; the report of what became of each."""
    started = time.monotonic()
    repo = settings.workdir / "repo"
    require_new_workdir(settings.workdir)
    hub = Hub(repo, settings.workdir / "hub-next.log")
    config = eval_config(settings)
    make_repo(repo, exercises, yaml.safe_dump(config, sort_keys=False))
    hub.call("init")
    tasks: dict[str, Exercise] = {}
    for ex in exercises:
        tasks[hub.new_task(ex, settings.python, settings.hide_files)] = ex
    progress(f"{len(tasks)} tasks in {repo}; running `hub next --until-idle`")
    phases = drive(hub, {task_id: ex.name for task_id, ex in tasks.items()}, progress)
    results = [
        collect(hub, task_id, ex.name, exercise_check(ex, settings.python), phases.get(task_id, 0.0))
        for task_id, ex in tasks.items()
    ]
    return EvalReport(
        suite=str(exercises[0].folder.parent) if exercises else "",
        config=str(settings.config_file),
        models=role_models(config),
        seconds=round(time.monotonic() - started, 1),
        tasks=results,
        mode=implementer_mode(config),
        hidden_files=settings.hide_files,
    )


def require_new_workdir(workdir: Path) -> None:
    if workdir.exists() and any(workdir.iterdir()):
        raise SuiteInvalid(f"{workdir}: not empty; `hub eval` works in a new folder (--workdir)")


def drive(hub: Hub, names: dict[str, str], progress: Callable[[str], None]) -> dict[str, float]:
    """`hub next --until-idle` until a round moves nothing (at most MAX_ROUNDS), each transition told
    by task name; the seconds each task spent in phases."""
    for _ in range(MAX_ROUNDS):
        seen = hub.transitions_seen
        hub.until_idle(lambda line: progress(describe(line, names)))
        if hub.transitions_seen == seen:
            break
    return hub.phase_seconds()


def role_models(config: dict[str, Any]) -> dict[str, str]:
    return {
        role: str(spec.get("model"))
        for role, spec in (config.get("roles") or {}).items()
        if isinstance(spec, dict)
    }


def implementer_mode(config: dict[str, Any]) -> str:
    """The implementer's mode in a hub.yaml's data: edit unless it says agent."""
    return str(_mapping(_mapping(config.get("roles")).get("implementer")).get("mode") or "edit")


def eval_config(settings: EvalSettings) -> dict[str, Any]:
    """The hub.yaml under test, with the eval's judge and parallelism; ConfigError if it is unreadable."""
    try:
        data = yaml.safe_load(settings.config_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{settings.config_file}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{settings.config_file}: expected a mapping of hub.yaml keys")
    if settings.judge == "approve":
        data["judge"] = {"command": APPROVE, "backend": None}
    if settings.parallel_tasks is not None:
        data.setdefault("limits", {})["parallel_tasks"] = settings.parallel_tasks
    if settings.python != sys.executable:
        # An interpreter of the person's choosing (--python): its environment is not the hub's, which
        # the sandbox mounts, so it is given as a read path (a venv: the folder above its bin/).
        data = {**data, "sandbox": with_read_path(data.get("sandbox"), Path(settings.python).parent.parent)}
    if settings.mode is not None:
        roles = _mapping(data.get("roles"))
        data["roles"] = {
            **roles,
            "implementer": {**_mapping(roles.get("implementer")), "mode": settings.mode},
        }
    return data


def with_read_path(sandbox: Any, folder: Path) -> dict[str, Any]:
    """hub.yaml's `sandbox:` (a mode or a mapping) with `folder` among its read paths."""
    data: dict[str, Any] = dict(sandbox) if isinstance(sandbox, dict) else {}
    if isinstance(sandbox, str):
        data["mode"] = sandbox
    paths = data.get("read_paths")
    data["read_paths"] = [*(paths if isinstance(paths, list) else []), str(folder)]
    return data


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def make_repo(repo: Path, exercises: Iterable[Exercise], config: str) -> None:
    """A new repository holding every exercise's stub and tests, and the configuration under test."""
    for ex in exercises:
        for rel in exercise_files(ex):
            dest = repo / "exercises" / ex.name / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            copy_inside(ex.folder, rel, dest)
    (repo / "hub.yaml").write_text(config, encoding="utf-8")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    # An identity of the repository's own: the hub's checkpoints and merges must not need the user's.
    git(repo, "config", "user.name", "hub eval")
    git(repo, "config", "user.email", "hub-eval@localhost")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the suite")


def exercise_files(ex: Exercise) -> list[str]:
    """What an exercise's folder gives the repository: the stub, the tests and the helpers its tests
    import (exercism's error-handling imports test_utils.py, listed in no `files` key); never `.meta/`
    (the example solution) or `.docs/`."""
    return sorted(
        str(p.relative_to(ex.folder))
        for p in ex.folder.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(ex.folder).parts)
    )


def git(repo: Path, *args: str) -> str:
    repo.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise ConfigError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")
    return done.stdout


def test_command(ex: Exercise, python: str) -> str:
    tests = " ".join(shlex.quote(f"exercises/{ex.name}/{t}") for t in ex.tests)
    # No bytecode or pytest cache: the tests must leave nothing outside the allowed paths behind.
    return (
        f"PYTHONDONTWRITEBYTECODE=1 {shlex.quote(python)} -m pytest -q -p no:cacheprovider --tb=short {tests}"
    )


class Hub:
    """The real `hub` CLI in the eval repository, its log lines kept for the report."""

    def __init__(self, repo: Path, log_file: Path) -> None:
        self.repo = repo
        self.log_file = log_file
        self.transitions_seen = 0
        self.env = {**os.environ, "HUB_LOG_FORMAT": "json", "HUB_LOG_LEVEL": "INFO"}
        self.env.pop("HUB_HANDOFF_DIR", None)

    def call(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hub", *args], cwd=self.repo, env=self.env, capture_output=True, text=True
        )
        if done.returncode:
            raise ConfigError(
                f"`hub {shlex.join(args)}` in {self.repo} exited {done.returncode}: {done.stderr[-2000:]}"
            )
        return done.stdout

    def new(self, *args: str) -> str:
        """`hub new --json` with `args`; the new task's id."""
        return str(json.loads(self.call("new", "--json", *args))["task_id"])

    def new_task(self, ex: Exercise, python: str, hide_files: bool = False) -> str:
        if hide_files:
            folder = f"exercises/{ex.name}"
            args = ["--title", f"Exercise {ex.name}", "--allowed-path", folder]
            args += [
                "--requirement",
                HIDDEN_REQUIREMENT.format(folder=folder),
                "--requirement",
                ex.instructions,
            ]
            for test in ex.tests:
                args += ["--forbidden-path", f"{folder}/{test}"]
            args += ["--acceptance-command", test_command(ex, python)]
            return self.new(*args)
        target, *sources = (f"exercises/{ex.name}/{s}" for s in ex.solution)
        args = ["--title", f"Exercise {ex.name}", "--target", target]
        files = ", ".join([target, *sources])
        args += ["--requirement", REQUIREMENT.format(files=files), "--requirement", ex.instructions]
        for path in (target, *sources):
            args += ["--allowed-path", path]
        for source in sources:
            args += ["--source", source]
        args += ["--acceptance-command", test_command(ex, python)]
        return self.new(*args)

    def until_idle(self, on_transition: Callable[[dict[str, Any]], None]) -> int:
        """One `hub next --until-idle`, each transition passed on as it happens; its exit code."""
        with self.log_file.open("a", encoding="utf-8") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hub", "next", "--until-idle"],
                cwd=self.repo,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            while True:
                try:
                    code = proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = None
                for line in self.new_transitions():
                    on_transition(line)
                if code is not None:
                    return code

    def new_transitions(self) -> list[dict[str, Any]]:
        path = self.repo / "_handoff" / "transition.ndjson"
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        fresh = [json.loads(line) for line in lines[self.transitions_seen :] if line.strip()]
        self.transitions_seen = len(lines)
        return fresh

    def phase_seconds(self) -> dict[str, float]:
        """Seconds per task spent in phases, from the canonical `phase` log lines, less the waits for a
        model server outside a model call (`server.waited`: a health check's; a call's wait is in its
        record's seconds, the model's time), which are not the hub's own time."""
        totals: dict[str, float] = {}
        if not self.log_file.exists():
            return totals
        for line in self.log_file.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or not entry.get("task"):
                continue
            if entry.get("event") == "phase":
                seconds = float(entry.get("seconds") or 0.0)
            elif entry.get("event") == "server.waited" and entry.get("during") != "model call":
                seconds = -float(entry.get("seconds") or 0.0)
            else:
                continue
            totals[entry["task"]] = totals.get(entry["task"], 0.0) + seconds
        return totals


def describe(line: dict[str, Any], names: dict[str, str]) -> str:
    name = names.get(str(line.get("task_id")), str(line.get("task_id")))
    return f"{name}: {line.get('old_status')} -[{line.get('event')}]-> {line.get('new_status')}"


def task_folder(repo: Path, task_id: str) -> Path:
    live = repo / "_handoff" / "tasks" / task_id
    return live if (live / "TASK_CONTRACT.json").exists() else repo / "_handoff" / "archive" / task_id


def exercise_check(ex: Exercise, python: str) -> Callable[[Path], bool]:
    """Whether the exercise's tests pass in a checkout."""
    return lambda root: run_tests(test_command(ex, python), root)


def run_tests(command: str, root: Path) -> bool:
    """Whether `command` (a shell line) passes in `root` (the eval repository, or a worktree of it),
    within TEST_TIMEOUT, in the sandbox the eval repository's hub.yaml gives its acceptance commands:
    `root` the one writable folder, nothing of the home folder. `sandbox: required` where no sandbox can
    be built: it does not pass."""
    folders = git_folders(root)
    checkout = folders[1].parent if folders is not None else root
    try:
        jail = jail_for(load_config(checkout), root)
    except SandboxUnavailable as exc:
        log.warning("eval.tests_not_run", root=str(root), why=exc.why)
        return False
    return run_command(command, root, TEST_TIMEOUT, jail).ok


def has_work(repo: Path, contract: dict[str, Any]) -> bool:
    """Whether the task's branch holds commits of its own and its worktree is there to test."""
    refs = contract.get("git") or {}
    worktree, branch, base = refs.get("worktree"), refs.get("task_branch"), refs.get("base_commit")
    if not (worktree and branch and base and Path(worktree).is_dir()):
        return False
    done = subprocess.run(
        ["git", "rev-list", "--count", f"{base}..{branch}"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode == 0 and done.stdout.strip() not in ("", "0")


def read_contract(repo: Path, task_id: str) -> dict[str, Any]:
    folder = task_folder(repo, task_id)
    return dict(json.loads((folder / "TASK_CONTRACT.json").read_text(encoding="utf-8")))


def collect(hub: Hub, task_id: str, name: str, check: Callable[[Path], bool], phase: float) -> TaskResult:
    """What became of one task; `check` says whether its tests pass in a checkout (the repository's
    for a merged task, the task's worktree for a halted one); `phase` is its seconds in phases
    (Hub.phase_seconds)."""
    folder = task_folder(hub.repo, task_id)
    contract = read_contract(hub.repo, task_id)
    status = str(contract["status"])
    data = contract.get("handoff_data") or {}
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((folder / "runs").glob("*.json"))]
    calls = [r for r in records if r.get("kind") == "model-call"]
    turns = [r for r in records if r.get("kind") == "agent-turn"]
    commands = [r for r in records if r.get("kind") in ("command", "preflight")]
    model_seconds = sum(float(r.get("call_seconds") or r.get("seconds") or 0.0) for r in calls)
    command_seconds = sum(float(r.get("seconds") or 0.0) for r in commands)
    tests_pass = None
    if status == MERGED:
        tests_pass = check(hub.repo)
    elif has_work(hub.repo, contract):
        # A halted task's work is on its branch (a stalled attempt's went to a stash: its tests failed,
        # or nothing of it could be applied). Without work there is nothing of the model's to test: the
        # stub of a refactoring exercise passes its tests by itself.
        tests_pass = check(Path(contract["git"]["worktree"]))
    breaker = contract.get("breaker") or {}
    return TaskResult(
        name=name,
        task_id=task_id,
        status=status,
        solved=status == MERGED and bool(tests_pass),
        tests_pass=tests_pass,
        halt_trigger=str(breaker.get("trigger")) if status == ERIK_CONSULTATION else None,
        halt_reason=str(breaker.get("reason") or "")[:300] if status == ERIK_CONSULTATION else None,
        stalls=len(data.get("stalls") or []),
        attempts=int(contract.get("attempt") or 0),
        model_calls=len(calls),
        agent_turns=len(turns),
        tokens_in=sum(int(r.get("prompt_tokens") or 0) for r in calls),
        tokens_out=sum(int(r.get("completion_tokens") or 0) for r in calls),
        model_seconds=round(model_seconds, 1),
        hub_seconds=round(max(0.0, phase - model_seconds - command_seconds), 2),
    )
