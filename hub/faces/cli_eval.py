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
@click.argument("suite", type=click.Path(path_type=Path))
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
    suite: Path,
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
    """Run a suite of exercises (exercism's practice layout) through every phase and report the results."""
    import json  # here, not at the top: `hub --help` imports this module and needs no json

    from hub.evals.runner import EvalSettings, run_eval
    from hub.evals.suite import load_suite

    exercises = load_suite(suite, only, letters)
    if not config_file.is_file():
        raise SuiteInvalid(f"{config_file}: no such configuration file to evaluate (--config)")
    folder = (workdir or default_workdir()).resolve()
    settings = EvalSettings(
        config_file.resolve(), folder, judge=judge, parallel_tasks=jobs, mode=mode, hide_files=hide_files
    )
    started = time.monotonic()

    def progress(line: str) -> None:
        click.echo(f"[{time.monotonic() - started:7.1f}s] {line}", err=True)

    report = run_eval(exercises, settings, progress)
    folder.mkdir(parents=True, exist_ok=True)
    doc = report.to_json()
    (folder / "report.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(report.to_markdown(), encoding="utf-8")
    progress(f"report: {folder / 'report.md'}")
    emit(doc, as_json, report.to_markdown())
