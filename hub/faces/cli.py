"""The `hub` command line: parse, call one function, print. Errors become exit codes in `main()` only.

Each command imports its phase inside its body (the phase commands are made from the phase table,
hub.phases.table, which names each phase's function by module path), and the group imports
configuration and logging only for the commands that use them, so `hub --help` loads little beyond
click and `hub status` only what status reads (tests/faces/test_cli.py holds both to none of the heavy
libraries and no phase module). The console entry point is `entry.main`: it runs a plain `hub status`
without importing click at all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from hub.core.errors import EXIT_ERROR, HubError
from hub.faces.cli_common import (
    CONTEXT_SETTINGS,
    State,
    emit,
    finish,
    json_option,
    pass_state,
    read_input,
    task_option,
)
from hub.faces.cli_eval import eval_
from hub.faces.cli_plain import LOG_FORMATS, LOG_LEVELS, aborted, echo, fail, status_text, warn_mistyped
from hub.faces.cli_tools import backlog, note, notify_send, rules
from hub.phases.table import PHASES, Phase, phase_function


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--repo", type=click.Path(file_okay=False, path_type=Path), help="Repository (default: the one around .)."
)
@click.option(
    "--handoff",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="HUB_HANDOFF_DIR",
    help="Handoff folder (default: <repo>/_handoff).",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="auto",
    envvar="HUB_LOG_FORMAT",
    help="Logs on stderr: console text, JSON lines, or auto (console on a terminal).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="INFO",
    envvar="HUB_LOG_LEVEL",
    help="DEBUG, INFO, WARNING or ERROR.",
)
@click.version_option(package_name="agent-hub", prog_name="hub")
@click.pass_context
def cli(ctx: click.Context, repo: Path | None, handoff: Path | None, log_format: str, log_level: str) -> None:
    """agent-hub: run coding tasks through local models, one restartable phase at a time."""
    ctx.obj = State(repo, handoff)
    if ctx.invoked_subcommand in (None, "status", "log"):
        # These never load structlog (their start-up is the point): the warning goes out plainly.
        warn_mistyped(os.environ)
        return
    from hub.core.config import mistyped_env
    from hub.core.log import configure, get_logger

    configure(log_format, log_level)
    for name, meant in mistyped_env(os.environ):
        get_logger(__name__).warning(
            "config.mistyped_env",
            variable=name,
            detail=f"agent-hub reads no {name}; did you mean {meant}?",
        )


# --- setting up ---------------------------------------------------------------------------------------


@cli.command()
@pass_state
def init(state: State) -> None:
    """Create _handoff/ and hub.yaml, and keep _handoff/ out of git."""
    from hub.phases.setup import init as run_init

    finish(run_init(state.context(ready=False)))


@cli.command()
@click.option("--title", help="One line saying what the task is.")
@click.option("--requirement", "requirements", multiple=True, help="A requirement (repeat).")
@click.option(
    "--target",
    help="The file the task changes (it must exist, unless --new-file). Without --target, --source and "
    "--allowed-path the implementer finds the files with the repository map.",
)
@click.option(
    "--new-file", "create_target", is_flag=True, help="The --target file is new: the task creates it."
)
@click.option("--source", "sources", multiple=True, help="A file the model should read (repeat).")
@click.option(
    "--acceptance-command", "commands", multiple=True, help="A shell command that must pass (repeat)."
)
@click.option(
    "--criterion", "criteria", multiple=True, help="An acceptance criterion for the judge (repeat)."
)
@click.option(
    "--allowed-path",
    "allowed",
    multiple=True,
    help="A path the model may write (repeat; default: target + sources).",
)
@click.option(
    "--forbidden-path", "forbidden", multiple=True, help="A path the model must never write (repeat)."
)
@click.option("--complexity", type=click.Choice(["trivial", "minor", "major", "critical"]), default=None)
@click.option(
    "--max-diff-lines", type=click.IntRange(min=1), help="Refuse edits changing more lines than this."
)
@click.option(
    "--from-proposal",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A markdown proposal: '# Title', a '## Requirements' list, 'Target: path'.",
)
@json_option
@pass_state
def new(
    state: State,
    title: str | None,
    requirements: tuple[str, ...],
    target: str | None,
    create_target: bool,
    sources: tuple[str, ...],
    commands: tuple[str, ...],
    criteria: tuple[str, ...],
    allowed: tuple[str, ...],
    forbidden: tuple[str, ...],
    complexity: str | None,
    max_diff_lines: int | None,
    from_proposal: Path | None,
    as_json: bool,
) -> None:
    """Write a new task's contract in _handoff/tasks/<task_id>/ and print its id (other tasks may be active)."""
    from hub.phases.setup import create, missing_task_field, task_fields

    fields = task_fields(
        read_input(from_proposal) if from_proposal else None,
        str(from_proposal),
        title=title,
        target_file=target,
        complexity=complexity,
        requirements=list(requirements),
        source_files=list(sources),
        acceptance_commands=list(commands),
        acceptance_criteria=list(criteria),
        allowed_paths=list(allowed),
        forbidden_paths=list(forbidden),
        max_diff_lines=max_diff_lines,
    )
    missing = missing_task_field(fields)
    if missing:
        raise click.UsageError(missing)
    finish(create(state.context(), fields, create_target), as_json)


# --- the phases -----------------------------------------------------------------------------------------


# Each phase of the table (hub.phases.table) is a command of its own: `hub <phase> [--task] [--json]`
# and the options its row names; its help line is the row's.
def phase_command(phase: Phase) -> click.Command:
    """The `hub` command that runs `phase` (the table's row), its module imported when it runs."""

    def run(state: State, as_json: bool, **options: Any) -> None:
        finish(phase_function(phase.name)(state.context(), **options), as_json)

    command = pass_state(run)
    for option in (json_option, task_option):
        command = option(command)
    for flag, keyword, text in reversed(phase.options):
        command = click.option(flag, keyword, help=text)(command)
    return cli.command(phase.name, help=phase.help)(command)


for _phase in PHASES:
    if _phase.command:
        phase_command(_phase)


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@task_option
@json_option
@pass_state
def rebut(state: State, file: Path, as_json: bool) -> None:
    """Disagree with a FAIL verdict: FILE goes to the judge as REBUTTAL.md."""
    from hub.phases.judge import rebut as run

    finish(run(state.context(), read_input(file)), as_json)


@cli.command()
@click.option("--to", "to_state", required=True, help="The state the task goes to, e.g. pending_implementer.")
@click.option("--note", help="What you changed; the implementer sees it in its next prompt.")
@task_option
@json_option
@pass_state
def resume(state: State, to_state: str, note: str | None, as_json: bool) -> None:
    """Clear a halt (erik_consultation) and move the task to a state you name."""
    from hub.phases.finalize import resume as run

    finish(run(state.context(), to_state, note), as_json)


@cli.command("next")
@click.option(
    "--until-idle",
    is_flag=True,
    help="Go on while phases move tasks on (a task to merged in one run when its judge is a command).",
)
@click.option("--stop-on-eof", is_flag=True, hidden=True, help="Start no new round once stdin is closed.")
@task_option
@json_option
@pass_state
def next_(state: State, as_json: bool, until_idle: bool, stop_on_eof: bool) -> None:
    """Run the due phase of every task, several at once (for cron); exit with the most severe code."""
    from hub.phases.next import run_next, run_until_idle
    from hub.workers.pool import WorkerPool

    if stop_on_eof:
        import signal

        # Run by `hub watch`, whose SIGINT is how it interrupts us (after its grace): take it even when
        # started with SIGINT ignored, as a watcher run in the background by a script passes on.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The phases this process runs share their MCP worker servers: each is spawned once, not per phase.
    pool = WorkerPool()
    ctx = state.context().replace(workers=pool)
    try:
        if not until_idle:
            outcome = run_next(ctx)
        else:
            outcome = run_until_idle(ctx, _stdin_open) if stop_on_eof else run_until_idle(ctx)
    finally:
        pool.close()
    finish(outcome, as_json)


def _stdin_open() -> bool:
    """False once stdin has reached its end: `hub watch` closes it to say "start nothing new"."""
    import select

    try:
        readable, _, _ = select.select([sys.stdin], [], [], 0)
        return not readable or bool(os.read(sys.stdin.fileno(), 4096))
    except (OSError, ValueError):
        return False


# --- reading state ---------------------------------------------------------------------------------------


@cli.command()
@task_option
@json_option
@pass_state
def status(state: State, as_json: bool) -> None:
    """Show the task, its state, lease, breaker, cost, last transitions and what runs next."""
    # `hub status` without a group option never comes here: entry.main runs it without click.
    echo(status_text(state, as_json))


@cli.command()
@click.option("--task", "task_id", help="Only this task, with its model calls, diffs and commands.")
@json_option
@pass_state
def log(state: State, task_id: str | None, as_json: bool) -> None:
    """Show the transition log (and, with --task, every model call and command in order)."""
    from hub.phases.status import log_entries

    entries = log_entries(state.context(), task_id)
    if as_json:
        emit(entries, True)
        return
    if not entries:
        # A mistyped --task id would otherwise print nothing at all.
        whole = "; `hub log` lists every task's transitions"
        click.echo(f"nothing logged for task {task_id}{whole}" if task_id else "nothing logged yet")
    for e in entries:
        if e["kind"] == "transition":
            click.echo(
                f"{e['timestamp']}  {e['task_id']}  {e['old_status']} -[{e['event']}]-> {e['new_status']}"
                f"  ({_one_line(e.get('status_reason'))})"
            )
        elif "what" in e:
            click.echo(
                f"{e['timestamp']}  {e['file']}  {e.get('role', '')} {e['what']}: {e.get('model', '')}"
                f"  {_one_line(e.get('outcome', ''))}"
            )
        else:
            detail = e.get("model") or e.get("command") or e.get("path") or ""
            click.echo(
                f"{e['timestamp']}  {e['file']}  {_one_line(detail)}  {_one_line(e.get('outcome', ''))}"
            )


def _one_line(text: object) -> str:
    """One entry, one line: a reason holding command output (cut at 500 characters, maybe mid-line) or a
    multi-line command would otherwise run into the next entry."""
    return " | ".join(line.strip() for line in str(text).splitlines() if line.strip())


# --- models and workers --------------------------------------------------------------------------------


@cli.group()
def worker() -> None:
    """The worker MCP server in front of Ollama."""


@worker.command("serve")
@click.option("--transport", type=click.Choice(["stdio", "http", "sse"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (http, sse).")
@click.option("--port", type=int, default=8765, show_default=True, help="Port to bind (http: endpoint /mcp).")
def worker_serve(transport: str, host: str, port: int) -> None:
    """Serve ollama_run, ollama_list_models and ollama_chat over MCP, for the Ollama at OLLAMA_HOST."""
    from hub.workers.worker_server import serve

    serve(transport, host, port)


@cli.command()
@click.option(
    "--role", type=click.Choice(["implementer", "local_reviewer", "judge"]), help="Only this role's worker."
)
@json_option
@pass_state
def models(state: State, role: str | None, as_json: bool) -> None:
    """List the models each configured worker sees (* marks the ones the roles use)."""
    from hub.core.config import load_config
    from hub.faces.doctor import list_worker_models, render_models

    groups = list_worker_models(load_config(state.repo, state.handoff), role)
    emit([g.to_dict() for g in groups], as_json, render_models(groups))
    if not all(g.reached for g in groups):
        sys.exit(EXIT_ERROR)


@cli.command()
@click.option("--notify", is_flag=True, help="Only send a test notification to each `notify:` target.")
@json_option
@pass_state
def doctor(state: State, notify: bool, as_json: bool) -> None:
    """Check hub.yaml, the repository, git, ast-grep, Ollama, the worker servers and the models, with a fix
    for each failure."""
    from hub.faces.doctor import check_notify, diagnose, render_checks

    checks = check_notify(state.context(ready=False)) if notify else diagnose(state.repo, state.handoff)
    ok = all(c.ok for c in checks)
    emit({"ok": ok, "checks": [c.to_dict() for c in checks]}, as_json, render_checks(checks))
    if not ok:
        sys.exit(EXIT_ERROR)


# --- the MCP server, the backlog, unattended running ------------------------------------------------


@cli.group()
def mcp() -> None:
    """The hub's own MCP server, for a managing agent (pipeline, rules, backlog and notes tools)."""


@mcp.command("serve")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (http).")
@click.option("--port", type=int, default=8766, show_default=True, help="Port to bind (http: endpoint /mcp).")
@click.option("--token", envvar="HUB_MCP_TOKEN", help="Require 'Authorization: Bearer TOKEN' (http).")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Close an HTTP connection that sends no complete request for this long (seconds).",
)
@click.option(
    "--max-per-client",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="HTTP connections open from one address; past it the oldest idle one is closed.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    help="HTTP connections open in all (default: 1024, or less to keep an eighth of `ulimit -n` free).",
)
@pass_state
def mcp_serve(
    state: State,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    idle_timeout: float,
    max_per_client: int,
    max_connections: int | None,
) -> None:
    """Serve the hub's tools over MCP: stdio for a client that spawns it, or streamable HTTP at /mcp."""
    from hub.faces.mcp_server import serve

    state.context()  # refuse to serve a repository the tools could not work in
    serve(
        state.repo, state.handoff, transport, host, port, token, idle_timeout, max_per_client, max_connections
    )


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8767, show_default=True, help="Port (0: any free one)."
)
@click.option("--token", envvar="HUB_BOARD_TOKEN", help="The token the URL carries (default: a random one).")
@click.option(
    "--eval-dir",
    "eval_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A `hub eval` workdir, or a folder of them (repeat; default: ~/.cache/agent-hub/eval).",
)
@pass_state
def board(state: State, host: str, port: int, token: str | None, eval_dirs: tuple[Path, ...]) -> None:
    """Serve a live web page of the tasks, their diffs, halts and verdicts, and the eval reports."""
    from hub.faces.board import make_server, serve
    from hub.faces.cli_eval import default_workdir

    folders = list(eval_dirs) or [default_workdir().parent]
    server, url = make_server(state.context(), host, port, token, folders)
    # The URL holds the token: stdout, for the person (or the script) that started the board.
    click.echo(f"board: {url}")
    serve(server)


@cli.command()
@click.option("--poll", is_flag=True, help="Poll the folder instead of using file-system events.")
@click.option(
    "--interval", type=float, default=30.0, show_default=True, help="Re-check at least this often (seconds)."
)
@click.option(
    "--grace",
    type=float,
    default=10.0,
    show_default=True,
    help="On SIGINT/SIGTERM, let a running phase finish for this long before interrupting it.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Phases of different tasks at once (default: limits.parallel_tasks in hub.yaml).",
)
@pass_state
def watch(state: State, poll: bool, interval: float, grace: float, jobs: int | None) -> None:
    """Run whatever phase is due whenever _handoff/ changes, until SIGINT or SIGTERM."""
    from hub.faces.watch import watch as run_watch

    state.context()  # a bad hub.yaml or an uninitialised repository: say so now, not in every child
    root = click.get_current_context().find_root().params
    level = "DEBUG" if str(root.get("log_level", "")).upper() == "DEBUG" else "WARNING"
    run_watch(
        state.repo,
        state.handoff,
        poll=poll,
        interval=interval,
        grace=grace,
        child_log_level=level,
        child_log_format=root.get("log_format"),
        jobs=jobs,
    )


for group in (backlog, note, rules, eval_, notify_send):
    cli.add_command(group)


# --- entry point ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Run the click CLI; map every HubError to its exit code with the message (and hint) on stderr.
    The console entry point is entry.main, which comes here for all but a plain `hub status`."""
    try:
        cli.main(args=argv, prog_name="hub", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        aborted()
    except (HubError, OSError) as exc:
        # OSError: the machine's own limits (a full disk, a read-only folder, no git).
        fail(exc)
    sys.exit(0)
