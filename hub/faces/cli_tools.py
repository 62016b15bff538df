"""`hub backlog`, `hub note` and `hub rules`: the planning and lint-rule verbs an agent also has over MCP;
and `hub notify-send`, the detached notifier a transition starts (hidden: not a person's command).

Registered on the main group by hub/faces/cli.py; every library import happens inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hub.faces.cli_common import State, emit, json_option, pass_state, read_input, task_option


@click.group()
def backlog() -> None:
    """Proposals queued for `hub next`, promoted one at a time when no task is active."""


@backlog.command("add")
@click.argument("content", required=False)
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A markdown proposal.",
)
@click.option("--priority", type=click.IntRange(0, 4), default=2, show_default=True, help="0 is most urgent.")
@click.option("--depends-on", "depends_on", multiple=True, help="A backlog task to merge first (repeat).")
@click.option("--id", "task_id", help="An id for the task (default B<n>).")
@json_option
@pass_state
def backlog_add(
    state: State,
    content: str | None,
    file: Path | None,
    priority: int,
    depends_on: tuple[str, ...],
    task_id: str | None,
    as_json: bool,
) -> None:
    """Queue a proposal: CONTENT (first line = title) or --file with '# Title' and '## Requirements'."""
    from hub.state.backlog import add_tasks

    if file:
        content = read_input(file)
    if not content:
        raise click.UsageError("give the proposal as CONTENT or --file")
    task: dict[str, Any] = {"content": content, "priority": priority, "depends_on": list(depends_on)}
    if task_id:
        task["id"] = task_id
    ctx = state.context()
    added = add_tasks(ctx.handoff, ctx.clock, [task])
    emit(added, as_json, "\n".join(f"added {e['id']} (priority {e['priority']})" for e in added))


@backlog.command("update")
@click.argument("task_id")
@click.option("--status", type=click.Choice(["proposed", "blocked", "dropped"]))
@click.option("--priority", type=click.IntRange(0, 4))
@click.option("--content")
@click.option("--depends-on", "depends_on", multiple=True, help="Replace the dependencies (repeat).")
@click.option("--no-depends", is_flag=True, help="Clear the dependencies.")
@json_option
@pass_state
def backlog_update(
    state: State,
    task_id: str,
    status: str | None,
    priority: int | None,
    content: str | None,
    depends_on: tuple[str, ...],
    no_depends: bool,
    as_json: bool,
) -> None:
    """Change a backlog task's status, priority, content or dependencies."""
    from hub.state.backlog import update_task

    changes: dict[str, Any] = {
        k: v for k, v in (("status", status), ("priority", priority), ("content", content)) if v is not None
    }
    if depends_on or no_depends:
        changes["depends_on"] = list(depends_on)
    ctx = state.context()
    entry = update_task(ctx.handoff, ctx.clock, task_id, changes)
    emit(entry, as_json, f"{entry['id']}: {entry['status']}, priority {entry['priority']}")


def render_backlog(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "the backlog is empty"
    lines = []
    for e in entries:
        title = e["content"].strip().splitlines()[0].lstrip("# ")[:70]
        deps = f"  after {', '.join(e['depends_on'])}" if e.get("depends_on") else ""
        task = f"  -> {e['task_id']}" if e.get("task_id") else ""
        lines.append(f"{e['id']:<6} p{e['priority']}  {e['status']:<11} {title}{deps}{task}")
    return "\n".join(lines)


@backlog.command("list")
@click.option("--status", type=click.Choice(["proposed", "in_progress", "merged", "blocked", "dropped"]))
@json_option
@pass_state
def backlog_list(state: State, status: str | None, as_json: bool) -> None:
    """List the backlog, open tasks first, most urgent first."""
    from hub.state.backlog import list_tasks

    ctx = state.context()
    entries = list_tasks(ctx.handoff, ctx.clock, status)
    emit(entries, as_json, render_backlog(entries))


@backlog.command("next")
@json_option
@pass_state
def backlog_next(state: State, as_json: bool) -> None:
    """Show the proposal `hub next` would promote (most urgent with its dependencies merged)."""
    from hub.phases.promote import next_proposal

    doc = next_proposal(state.context())
    text = render_backlog([doc["task"]]) if doc["task"] else f"nothing ready: {doc['why']}"
    if doc.get("blocked"):
        text += f"\n`hub next` blocks it: {doc['blocked']}"
    emit(doc, as_json, text)


@backlog.command("summary")
@click.argument("summary")
@json_option
@pass_state
def backlog_summary(state: State, summary: str, as_json: bool) -> None:
    """Record an iteration summary (what this iteration did)."""
    from hub.state.backlog import iteration_summary

    ctx = state.context()
    item = iteration_summary(ctx.handoff, ctx.clock, summary)
    emit(item, as_json, f"recorded {item['id']}")


@backlog.command("complete")
@json_option
@pass_state
def backlog_complete(state: State, as_json: bool) -> None:
    """End the session; refused (exit 3) while any backlog task is not merged or dropped."""
    from hub.state.backlog import session_complete

    ctx = state.context()
    session = session_complete(ctx.handoff, ctx.clock)
    emit(session, as_json, f"session complete: {session['merged']} merged, {session['dropped']} dropped")


@click.group()
def note() -> None:
    """Notes for the active task; the implementer reads them in its next prompt."""


@note.command("add")
@click.argument("content")
@click.option(
    "--type",
    "note_type",
    type=click.Choice(["learning", "stuck", "tip", "decision"]),
    default="tip",
    show_default=True,
)
@task_option
@json_option
@pass_state
def note_add(state: State, content: str, note_type: str, as_json: bool) -> None:
    """Attach a note to the active task (with none active, to every task)."""
    from hub.state.backlog import add_note

    ctx = state.context()
    item = add_note(ctx.handoff, ctx.clock, content, note_type)
    emit(item, as_json, f"{item['id']} ({item['type']}) for {item['task_id'] or 'every task'}")


@note.command("list")
@click.option("--type", "note_type", type=click.Choice(["learning", "stuck", "tip", "decision"]))
@click.option("--all", "all_tasks", is_flag=True, help="Every note, not only the active task's.")
@task_option
@json_option
@pass_state
def note_list(state: State, note_type: str | None, all_tasks: bool, as_json: bool) -> None:
    """List the notes of the active task (and those for every task)."""
    from hub.state.backlog import list_notes

    notes = list_notes(state.context().handoff, note_type, all_tasks)
    text = "\n".join(f"{n['id']:<5} {n['type']:<9} {n['content']}" for n in notes) or "no notes"
    emit(notes, as_json, text)


# --- ast-grep rules ------------------------------------------------------------------------------------


@click.group()
def rules() -> None:
    """The ast-grep rules the local review enforces: the repository's, the packaged ones, the catalog."""


def _catalog(state: State) -> Any:
    from hub.core.config import load_config
    from hub.review.catalog import load_catalog

    config = load_config(state.repo, state.handoff)
    return load_catalog(config.rules_catalog_url, config.handoff_dir / "cache")


@rules.command("init")
@pass_state
def rules_init(state: State) -> None:
    """Create sgconfig.yml and rules/ in the repository (needed before adding rules)."""
    from hub.review.rules import init_project

    click.echo(init_project(state.repo))


@rules.command("list")
@json_option
@pass_state
def rules_list(state: State, as_json: bool) -> None:
    """List the active rules: the repository's first, then the packaged ones it does not replace."""
    from hub.review.rules import list_rules

    found = list_rules(state.repo)
    text = "\n".join(
        f"{r.id:<30} {r.severity:<8} {r.language:<11} {r.source:<9} {', '.join(r.tags)}" for r in found
    )
    emit([r.as_dict() for r in found], as_json, text or "no rules")


@rules.command("add")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--id", "rule_id", help="The rule's id (default: the id in the YAML).")
@pass_state
def rules_add(state: State, file: Any, rule_id: str | None) -> None:
    """Add or replace a rule from a YAML FILE ('-' for stdin); it is validated before anything is written."""
    from hub.review.rules import add_or_update_rule, validate_rule

    text = file.read()
    click.echo(add_or_update_rule(state.repo, rule_id or str(validate_rule(text)["id"]), text, person=True))


@rules.command("remove")
@click.argument("rule_id")
@pass_state
def rules_remove(state: State, rule_id: str) -> None:
    """Delete one of the repository's rules."""
    from hub.review.rules import remove_rule

    click.echo(remove_rule(state.repo, rule_id))


@rules.command("scan")
@click.argument("paths", nargs=-1)
@click.option("--no-packaged", is_flag=True, help="Only the repository's own rules.")
@json_option
@pass_state
def rules_scan(state: State, paths: tuple[str, ...], no_packaged: bool, as_json: bool) -> None:
    """Scan PATHS (default: the whole repository) with the packaged and the repository's rules."""
    from hub.review.scan import is_blocking, scan_paths

    found = scan_paths(state.repo, list(paths) or None, include_packaged=not no_packaged)
    blocking = sum(is_blocking(f) for f in found)
    lines = [f"{f.file}:{f.line}:{f.column}: {f.severity} {f.rule_id}: {f.message}" for f in found]
    lines.append(f"{len(found)} finding(s), {blocking} blocking (error + security)")
    emit([dict(f.as_dict(), blocking=is_blocking(f)) for f in found], as_json, "\n".join(lines))


@rules.command("search")
@click.argument("query", required=False, default="")
@click.option("--language", help="Only rules for this language (aliases such as py, ts work).")
@click.option("--tag", "tags", multiple=True, help="Only rules with this tag (repeat: all must match).")
@json_option
@pass_state
def rules_search(
    state: State, query: str, language: str | None, tags: tuple[str, ...], as_json: bool
) -> None:
    """Search the community catalog (and the rules shipped active) by words, language and tags."""
    from hub.review.catalog import search_community_rules, search_packaged_rules

    found = search_community_rules(query, language, list(tags), catalog=_catalog(state))
    active = search_packaged_rules(query, language, list(tags))
    lines = [f"{e['id']:<32} {e['language']:<11} {e['severity']:<8} {e['message']}" for e in found]
    if active:
        lines.append("already active (shipped with agent-hub, nothing to import):")
        lines += [f"  {e['id']:<30} {e['language']:<11} {e['severity']:<8} {e['message']}" for e in active]
    emit(found + active, as_json, "\n".join(lines) or "no matching rules")


@rules.command("show")
@click.argument("rule_id")
@json_option
@pass_state
def rules_show(state: State, rule_id: str, as_json: bool) -> None:
    """Show a community catalog rule: what it catches and its YAML."""
    from hub.review.catalog import get_community_rule_details

    details = get_community_rule_details(rule_id, catalog=_catalog(state))
    text = f"# {details['id']} ({', '.join(details['tags'])})\n# {details['description']}\n{details['rule_yaml']}"
    emit(details, as_json, text.rstrip("\n"))


@rules.command("import")
@click.argument("rule_id")
@pass_state
def rules_import(state: State, rule_id: str) -> None:
    """Copy a community catalog rule into the repository's rules; the next scan uses it."""
    from hub.review.catalog import import_community_rule

    click.echo(import_community_rule(state.repo, rule_id, catalog=_catalog(state)))


@click.command("notify-send", hidden=True)
def notify_send() -> None:
    """Send one notification job read as JSON on stdin (started detached by a transition: issue 37)."""
    import json
    import sys

    from hub.core.errors import HubError
    from hub.phases.notify import deliver

    try:
        job = json.loads(sys.stdin.buffer.read())
        attempts = deliver(job)
    except (ValueError, KeyError, TypeError) as exc:
        raise HubError(
            f"notify-send: stdin holds no notification job ({type(exc).__name__}: {exc})",
            hint="a transition starts it with the job on stdin; to test notifications run `hub doctor --notify`",
        ) from None
    if attempts and not any(a.ok for a in attempts):
        sys.exit(1)
