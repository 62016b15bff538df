"""`hub eval`: run a suite of exercises through the whole pipeline and report what became of each.

Registered on the main group by hub/faces/cli.py; the command imports hub.evals when it runs, so
`hub --help` does not.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hub.core.errors import SuiteInvalid
from hub.faces.cli_common import emit, json_option

if TYPE_CHECKING:
    from hub.evals.runner import EvalSettings


def default_workdir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agent-hub" / "eval" / time.strftime("%Y%m%d-%H%M%S")


@click.command("eval")
@click.argument("suite", type=click.Path(path_type=Path), required=False)
@click.option(
    "--history",
    "history_repo",
    type=click.Path(path_type=Path),
    help="Tasks from this git repository's own commits instead of a suite (its clone; yours is only read).",
)
@click.option("--since", help="--history: commits since this date (as `git log --since` takes it).")
@click.option("--limit", type=click.IntRange(min=1), help="--history: at most this many candidate commits.")
@click.option("--paths", "paths", multiple=True, help="--history: only commits touching this path (repeat).")
@click.option(
    "--max-source-files",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="--history: a commit changing more source files is no task.",
)
@click.option(
    "--test-command",
    help="--history: the test command, run at the root with the test files appended (default: pytest).",
)
@click.option("--name-files", is_flag=True, help="--history: the tasks name the files the commit changed.")
@click.option(
    "--python",
    "python",
    help="The interpreter the tests run with; it needs pytest (default: the hub's own, which has it "
    "with `pipx install 'agent-hub[eval]'`). --history: one with the repository's dependencies "
    "and pytest (default: a new venv).",
)
@click.option("--only", "only", multiple=True, help="Run this exercise only (repeat).")
@click.option(
    "--letters",
    metavar="A-Z",
    help="Only exercises whose names start with a letter in this range (e.g. a-o).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("hub.yaml"),
    show_default=True,
    help="The hub.yaml to evaluate: models, backends, num_ctx, clocks.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A new folder for the eval repository and the report (default: ~/.cache/agent-hub/eval/<time>).",
)
@click.option(
    "--judge",
    type=click.Choice(["approve", "config"]),
    default="approve",
    show_default=True,
    help="approve: a judge that passes what reaches it (the tests are checked afterwards); config: hub.yaml's judge.",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Tasks in flight at once (limits.parallel_tasks).")
@click.option(
    "--mode",
    type=click.Choice(["edit", "agent"]),
    help="The implementer's mode for this run (roles.implementer.mode; default: the configuration's).",
)
@click.option(
    "--hide-files",
    is_flag=True,
    help="Tasks name only the exercise's folder, never its files: the model must find the file (agent mode).",
)
@json_option
def eval_(
    suite: Path | None,
    history_repo: Path | None,
    since: str | None,
    limit: int | None,
    paths: tuple[str, ...],
    max_source_files: int,
    test_command: str | None,
    name_files: bool,
    python: str | None,
    only: tuple[str, ...],
    letters: str | None,
    config_file: Path,
    workdir: Path | None,
    judge: str,
    jobs: int | None,
    mode: str | None,
    hide_files: bool,
    as_json: bool,
) -> None:
    """Run a suite of exercises (exercism's practice layout), or a repository's commits (--history),
    through every phase and report the results.

    Before the first task it checks that the roles' model servers answer and have their models (as
    `hub doctor` does) and that the tests' interpreter can import pytest; if not, it says what is
    missing and how to get it, exits 2 and creates nothing. pytest comes with the hub's eval needs
    (`pipx install 'agent-hub[eval]'`, or `pipx inject agent-hub pytest`), or --python names another
    interpreter."""
    import json  # here, not at the top: `hub --help` imports this module and needs no json
    from dataclasses import replace

    from hub.evals.history_run import interpreter
    from hub.evals.runner import EvalSettings, run_eval
    from hub.evals.suite import load_suite
    from hub.phases.live import watch_calls

    if (suite is None) == (history_repo is None):
        raise click.UsageError("give a SUITE folder or --history REPO, one of the two")
    if history_repo is not None and (only or letters or hide_files):
        raise click.UsageError("--only, --letters and --hide-files choose exercises of a suite, not commits")
    exercises = load_suite(suite, only, letters) if suite is not None else []
    if not config_file.is_file():
        raise SuiteInvalid(f"{config_file}: no such configuration file to evaluate (--config)")
    folder = (workdir or default_workdir()).resolve()
    settings = EvalSettings(
        config_file.resolve(), folder, judge=judge, parallel_tasks=jobs, mode=mode, hide_files=hide_files
    )
    if history_repo is None and python is not None:
        settings = replace(settings, python=interpreter(python) or python)
    if history_repo is not None:
        from hub.evals.history_run import HistorySettings, check_inputs, run_history

        chosen = HistorySettings(
            history_repo,
            since=since,
            limit=limit,
            paths=paths,
            max_source_files=max_source_files,
            test_command=test_command,
            name_files=name_files,
            python=python,
        )
        check_inputs(settings, chosen)  # a mistyped path is named before any server is asked
    preflight(settings, test_runner=history_repo is None)
    started = time.monotonic()

    def progress(line: str) -> None:
        click.echo(f"[{time.monotonic() - started:7.1f}s] {line}", err=True)

    if history_repo is not None:
        with watch_calls(folder / "repo" / "_handoff" / "tasks"):
            report = run_history(settings, chosen, progress)
    else:
        with watch_calls(folder / "repo" / "_handoff" / "tasks"):
            report = run_eval(exercises, settings, progress)
    folder.mkdir(parents=True, exist_ok=True)
    doc = report.to_json()
    (folder / "report.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(report.to_markdown(), encoding="utf-8")
    progress(f"report: {folder / 'report.md'}")
    emit(doc, as_json, report.to_markdown())


def preflight(settings: EvalSettings, test_runner: bool) -> None:
    """What `hub eval` needs before its first task: the roles' model servers answering with their
    models (`hub doctor`'s checks) and, for a suite, an interpreter for the tests that has pytest.
    SuiteInvalid (exit 2) naming each gap and its fix, before anything is created."""
    from hub.core.config import config_from_raw
    from hub.evals.runner import eval_config
    from hub.faces.doctor import check_model_servers, check_test_runner

    config = config_from_raw(eval_config(settings), settings.config_file)
    checks = check_model_servers(config) + ([check_test_runner(settings.python)] if test_runner else [])
    failed = [c for c in checks if not c.ok]
    if failed:
        raise SuiteInvalid(
            "hub eval cannot start, nothing was created: "
            + "; ".join(f"{c.name}: {c.detail}" for c in failed),
            hint="; ".join(dict.fromkeys(c.hint for c in failed if c.hint)),
        )
