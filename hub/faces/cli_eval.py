"""`hub eval`: run a suite of exercises through the whole pipeline and report what became of each.

Registered on the main group by hub/faces/cli.py; the command imports hub.evals when it runs, so
`hub --help` does not.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from hub.core.errors import SuiteInvalid
from hub.faces.cli_common import emit, json_option


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
    help="--history: an interpreter with the repository's dependencies and pytest (default: a new venv).",
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
    through every phase and report the results."""
    import json  # here, not at the top: `hub --help` imports this module and needs no json

    from hub.evals.runner import EvalSettings, run_eval
    from hub.evals.suite import load_suite

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
    started = time.monotonic()

    def progress(line: str) -> None:
        click.echo(f"[{time.monotonic() - started:7.1f}s] {line}", err=True)

    if history_repo is not None:
        from hub.evals.history_run import HistorySettings, run_history

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
        report = run_history(settings, chosen, progress)
    else:
        report = run_eval(exercises, settings, progress)
    folder.mkdir(parents=True, exist_ok=True)
    doc = report.to_json()
    (folder / "report.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(report.to_markdown(), encoding="utf-8")
    progress(f"report: {folder / 'report.md'}")
    emit(doc, as_json, report.to_markdown())
