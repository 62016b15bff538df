"""`hub eval --history REPO`: a repository's own commits through the whole pipeline (issue 34).

The repository is cloned into the eval's workdir (the user's is only read), its commits are walked for
candidates (hub.evals.history), its environment is made once (hub.evals.history_env: a venv beside the
clone, handed to the sandbox as a read path), and each candidate is verified and given its base branch.
Every verified commit becomes a task: its message as the requirement, its test files forbidden, the test
command on those files as the acceptance command, set up on its own base (`hub setup-task --base`). Then
`hub next --until-idle` as for a suite (hub.evals.runner), and afterwards: solved = merged and the touched
tests pass on the base; files found / needed compares what the task's change touched with the commit's
source files.

Without `--name-files` a task names no file (`hub new` without `--target`): the implementer is shown the
repository map and picks its files itself, in edit mode with one call (phases/attempt_files.py), in agent
mode with its tools.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from hub.core.errors import ConfigError, GitError, SuiteInvalid, describe
from hub.core.log import get_logger
from hub.evals import history
from hub.evals.history import HistoryTask, Reason, Skipped
from hub.evals.history_env import make_env, venv_python
from hub.evals.report import EvalReport, TaskResult
from hub.evals.runner import (
    EvalSettings,
    Hub,
    collect,
    drive,
    eval_config,
    implementer_mode,
    read_contract,
    require_new_workdir,
    role_models,
    run_tests,
    with_read_path,
)
from hub.state.machine import MERGED

log = get_logger(__name__)


@dataclass(frozen=True)
class HistorySettings:
    """What `hub eval --history` takes from a repository's history and how it runs the tests."""

    repo: Path  # the user's repository: only read, through a clone
    since: str | None = None
    limit: int | None = None
    paths: tuple[str, ...] = ()
    max_source_files: int = 3
    test_command: str | None = None  # None: pytest under the env's interpreter (history_env)
    name_files: bool = False  # the tasks name the commit's source files (--target/--source)
    python: str | None = None  # an interpreter that has the repository's dependencies: no venv made


def run_history(
    settings: EvalSettings, chosen: HistorySettings, progress: Callable[[str], None] = lambda _: None
) -> EvalReport:
    """Every verified commit of `chosen.repo` through the pipeline; the report of what became of each,
    with the commits that made no task. SuiteInvalid (exit 2) for a repository that is none, a history
    without a candidate or without a task, or an environment that cannot be made."""
    started = time.monotonic()
    source, python = check_inputs(settings, chosen)
    workdir = settings.workdir
    repo = workdir / "repo"
    clone(source, repo)
    walk = history.find_candidates(
        repo,
        since=chosen.since,
        limit=chosen.limit,
        paths=chosen.paths,
        max_source_files=chosen.max_source_files,
    )
    skipped = list(walk.skipped)
    if not walk.candidates:
        raise SuiteInvalid(f"{source}: no commit qualifies as a task ({walked(walk.walked, skipped)})")
    progress(f"{len(walk.candidates)} candidate commits of {walk.walked} walked; making the environment")
    python, read_path = environment(repo, workdir, python)
    tasks: list[HistoryTask] = []
    for candidate in walk.candidates:
        made = history.prepare_task(
            repo, candidate, workdir / "prepare", python=python, test_command=chosen.test_command
        )
        if isinstance(made, Skipped):
            skipped.append(made)
            progress(f"{candidate.sha[:10]} {candidate.subject}: no task, {made.reason}")
        else:
            tasks.append(made)
            progress(f"{candidate.sha[:10]} {candidate.subject}: a task ({made.seconds} s to verify)")
    if not tasks:
        raise SuiteInvalid(f"{source}: no candidate commit made a task ({walked(walk.walked, skipped)})")
    config = eval_config(settings)
    config = {**config, "sandbox": with_read_path(config.get("sandbox"), read_path)}
    (repo / "hub.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    hub = Hub(repo, workdir / "hub-next.log")
    hub.call("init")
    ids: dict[str, HistoryTask] = {}
    for task in tasks:
        try:
            task_id = hub.new(*new_args(task, repo, chosen.name_files))
        except ConfigError as exc:
            skipped.append(
                Skipped(task.sha, task.requirement.splitlines()[0], Reason.HUB_NEW_REFUSED, str(exc))
            )
            continue
        hub.call("setup-task", "--task", task_id, "--base", task.base_branch)
        ids[task_id] = task
    progress(f"{len(ids)} tasks in {repo}; running `hub next --until-idle`")
    phases = drive(hub, {task_id: task.id for task_id, task in ids.items()}, progress)
    results = [
        with_files(
            hub,
            task_id,
            task,
            collect(hub, task_id, task.id, base_check(repo, task), phases.get(task_id, 0.0)),
        )
        for task_id, task in ids.items()
    ]
    return EvalReport(
        suite=str(source),
        config=str(settings.config_file),
        models=role_models(config),
        seconds=round(time.monotonic() - started, 1),
        tasks=results,
        mode=implementer_mode(config),
        hidden_files=not chosen.name_files,
        history=True,
        skipped=skipped,
    )


def check_inputs(settings: EvalSettings, chosen: HistorySettings) -> tuple[Path, str | None]:
    """The repository (resolved) and the interpreter `--history` was given, or SuiteInvalid (exit 2)
    for a folder that is no repository, a workdir inside it or taken, or no such interpreter: what the
    person typed, checked before anything else (`hub eval` checks the model servers after it)."""
    source = chosen.repo.resolve()
    require_git_repo(source)
    if settings.workdir.resolve().is_relative_to(source):
        raise SuiteInvalid(
            f"{settings.workdir}: inside {source}; `hub eval --history` leaves the repository it reads "
            "untouched, so its --workdir must lie outside it"
        )
    require_new_workdir(settings.workdir)
    return source, interpreter(chosen.python)


def require_git_repo(path: Path) -> None:
    try:
        inside = history.git(path, "rev-parse", "--is-inside-work-tree").strip()
        history.git(path, "rev-parse", "--verify", "-q", "HEAD")
    except (GitError, OSError):
        inside = ""
    if inside != "true":
        raise SuiteInvalid(f"{path}: not a git repository with a commit to start from (`hub eval --history`)")


def clone(source: Path, repo: Path) -> None:
    """A clone of `source`'s current branch: the tasks' bases, branches and merges live there, never in
    the user's repository. An identity of its own: the hub's merges must not need the user's."""
    repo.parent.mkdir(parents=True, exist_ok=True)
    history.git(repo.parent, "clone", "-q", "--no-hardlinks", str(source), str(repo))
    history.git(repo, "config", "user.name", "hub eval")
    history.git(repo, "config", "user.email", "hub-eval@localhost")


def interpreter(python: str | None) -> str | None:
    """`--python` as a path the acceptance commands can run from any worktree; SuiteInvalid if there is
    no such program. Not resolved further: a venv's interpreter is a link whose target lacks the venv."""
    if python is None:
        return None
    found = shutil.which(python)
    if found is None:
        raise SuiteInvalid(f"--python {python}: no such interpreter")
    return str(Path(found).absolute())


def environment(repo: Path, workdir: Path, python: str | None) -> tuple[str, Path]:
    """The interpreter the tests run under and the folder the sandbox must read for it: the given one's
    environment, or a venv made once for the repository."""
    if python:
        return python, Path(python).parent.parent
    try:
        venv = make_env(repo, workdir)
    except ConfigError as exc:
        raise SuiteInvalid(
            f"{repo}: could not install its test environment into {workdir / 'venv'} ({describe(exc)})",
            hint="give an interpreter that has its dependencies with --python",
        ) from None
    return str(venv_python(venv)), venv


def new_args(task: HistoryTask, repo: Path, name_files: bool) -> list[str]:
    """`hub new`'s arguments for a history task: its message, its forbidden tests, its acceptance command,
    and its files named (`name_files`); without, it names no file and the implementer finds its own with
    the repository map."""
    args = ["--title", f"History {task.id}"]
    for paragraph in task.requirements(name_files):
        args += ["--requirement", paragraph]
    for test in task.tests:
        args += ["--forbidden-path", test]
    args += ["--acceptance-command", task.acceptance_command]
    if name_files:
        present = [p for p in task.source_files if exists_at(repo, task.base, p)]
        target = (present or list(task.source_files))[0]
        args += ["--target", target] + ([] if present else ["--new-file"])
        args += [arg for p in present if p != target for arg in ("--source", p)]
        args += [arg for p in task.source_files for arg in ("--allowed-path", p)]
    return args


def exists_at(repo: Path, commit: str, path: str) -> bool:
    try:
        history.git(repo, "cat-file", "-e", f"{commit}:{path}")
    except GitError:
        return False
    return True


def base_check(repo: Path, task: HistoryTask) -> Callable[[Path], bool]:
    """Whether the task's acceptance command passes: for a merged task on its base branch (checked out
    nowhere, so in a worktree made for the run), otherwise in the checkout given (the task's worktree)."""

    def check(root: Path) -> bool:
        if root != repo:
            return run_tests(task.acceptance_command, root)
        tree = repo.parent / "check" / task.sha[:10]
        history.git(repo, "worktree", "add", "-q", "--detach", "-f", str(tree), task.base_branch)
        try:
            return run_tests(task.acceptance_command, tree)
        finally:
            history.remove_worktree(repo, tree)

    return check


def with_files(hub: Hub, task_id: str, task: HistoryTask, result: TaskResult) -> TaskResult:
    """`result` with files found / needed: the files the task's change touched (merged: what its merge
    brought to the base; otherwise what its branch holds) against the commit's source files."""
    refs = read_contract(hub.repo, task_id).get("git") or {}
    base = refs.get("base_commit")
    head = task.base_branch if result.status == MERGED else refs.get("task_branch")
    if not (base and head):
        return result
    try:
        changed = history.git(hub.repo, "diff", "--name-only", "--no-renames", base, head).split()
    except (GitError, subprocess.TimeoutExpired):
        return result
    if not changed:
        return result
    found, needed = task.files_found(changed)
    return replace(result, files_found=found, files_needed=needed)


def walked(count: int, skipped: Sequence[Skipped]) -> str:
    """How many commits were walked and why they made no task, most common reason first."""
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s.reason] = reasons.get(s.reason, 0) + 1
    said = "; ".join(f"{n}: {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    return f"{count} commits walked" + (f"; {said}" if said else "")
