"""What the `hub` commands share that needs no click: the group's `State`, status's text, one plain
echo, and the mapping of errors to exit codes. The click CLI (`cli`) and the console entry point's
plain `hub status` (`entry`) both run them, so the two ways cannot drift apart.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.errors import EXIT_ERROR, EXIT_INTERRUPTED, HubError, describe, exit_code_for

if TYPE_CHECKING:
    from hub.phases.status import StatusDoc, TaskView

LOG_FORMATS = ("auto", "console", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ABORTED = (
    "aborted. Nothing is lost: the next `hub next` recovers a phase this left half done (its "
    "work kept, the phase run again); `hub status` shows each task."
)


def find_repo_root(start: Path) -> Path:
    """The nearest folder holding `.git`, walking up from `start` (or `start` itself); from inside a
    task's worktree (a path the hub prints), the user's checkout the task belongs to."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_file():
            return task_checkout(folder, dot) or folder
        if dot.exists():
            return folder
    return start


def task_checkout(worktree: Path, dot: Path) -> Path | None:
    """The checkout whose `_handoff/` holds the task a linked worktree is named after, if it is one:
    its `.git` file points at `<checkout>/.git/worktrees/<name>`."""
    try:
        pointer = dot.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not pointer.startswith("gitdir:"):
        return None
    gitdir = (worktree / pointer.removeprefix("gitdir:").strip()).resolve()
    common = gitdir.parent.parent
    if gitdir.parent.name != "worktrees" or common.name != ".git":
        return None
    checkout = common.parent
    handoff = checkout / "_handoff"
    if (handoff / "tasks" / worktree.name).is_dir() or (handoff / "archive" / worktree.name).is_dir():
        return checkout
    return None


class State:
    """What the group's options resolve to; commands build phase contexts from it."""

    def __init__(self, repo: Path | None, handoff: Path | None) -> None:
        self.repo = (repo or find_repo_root(Path.cwd())).resolve()
        self.handoff = handoff.resolve() if handoff else None
        self.task_id: str | None = None

    def context(self, ready: bool = True) -> Any:
        """A phase context: hub.yaml checked and, with `ready`, the repository initialised (or exit 1
        saying what to run, before anything is written)."""
        # Here, not at the top: `hub --help` needs none of them.
        from hub.core.config import load_config
        from hub.phases.context import Context

        config = load_config(self.repo, self.handoff)
        if ready:
            from hub.repo.workspace import require_ready

            require_ready(config)
        return Context(config, task_id=self.task_id)


def echo(text: str, err: bool = False) -> None:
    """click.echo's output for `text`: written as is when it is ASCII with no escape sequence (click
    would change nothing), through click otherwise (it strips colour codes off a terminal and copes
    with a stream that cannot encode the text)."""
    if not text.isascii() or "\x1b" in text:
        import click

        click.echo(text, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def to_json(payload: Any) -> str:
    """The one JSON document a `--json` command prints."""
    import json  # here, not at the top: `hub --help` prints none (a `hub status` has read a contract)

    return json.dumps(payload, indent=2, ensure_ascii=False, default=str)


def warn_mistyped(env: Mapping[str, str]) -> None:
    """The plain warning (no structlog) for each HUB_* variable a typo away from one the hub reads."""
    from hub.core.config import mistyped_env

    for name, meant in mistyped_env(env):
        echo(f"hub: warning: agent-hub reads no {name}; did you mean {meant}?", err=True)


def fail(exc: HubError | OSError) -> None:
    """Exit with the code of a HubError, or 1 for the machine's own limits (a full disk, a read-only
    folder, no git), the message (and hint) on one line on stderr, no traceback."""
    if isinstance(exc, HubError):
        echo(f"hub: {describe(exc)}", err=True)
        sys.exit(exit_code_for(exc))
    from hub.core.host_limits import explain  # here, not at the top: a `hub status` that works needs none

    echo(f"hub: {explain(exc)}", err=True)
    sys.exit(EXIT_ERROR)


def aborted() -> None:
    """A Ctrl-C (or EOF at a prompt): 130, the shell's code for a command SIGINT ended, as README says."""
    echo(ABORTED, err=True)
    sys.exit(EXIT_INTERRUPTED)


# --- hub status ---------------------------------------------------------------------------------------


def status_text(state: State, as_json: bool) -> str:
    """What `hub status` prints: the tasks, their states, leases, breakers, costs and what runs next."""
    from hub.phases.status import status as read

    doc = read(state.context())
    return to_json(doc) if as_json else render_status(doc)


def render_status(doc: StatusDoc) -> str:
    if not doc["tasks"]:
        return f"no active task in {doc['handoff']}; next: {doc['next']}"
    return "\n\n".join(_render_task(task) for task in doc["tasks"])


def _render_task(doc: TaskView) -> str:
    lines = [
        f"task     {doc['task_id']}  {doc['title']}",
        f"state    {doc['status']}  ({doc['status_reason']})  attempt {doc['attempt']}",
        f"branch   {doc['branch'] or '(not set up)'}"
        + (f"  in {doc['worktree']}" if doc["worktree"] else ""),
    ]
    if doc["running"]:
        r = doc["running"]
        lines.append(f"running  {r.get('phase')} (pid {r.get('pid')}, since {r.get('since')})")
    if doc["call"]:
        from hub.phases.live import call_line

        lines.append(f"calling  {call_line(doc['call'])}")
    w = doc["server_wait"]
    if w:
        lines.append(
            f"WAITING  for the model server since {w.get('since')} ({w.get('waited_seconds')} s of "
            f"{w.get('limit_minutes')} min, {w.get('attempts')} tries): {w.get('error')}"
        )
    if doc["lease"]:
        lease = f"lease    {doc['lease'].get('held_by')} until {doc['lease'].get('expires_at')}"
        if doc["lease_stale"]:
            lease += "  STALE: that process is gone; the next `hub next` recovers the task"
        lines.append(lease)
    breaker = doc["breaker"] or {}
    if breaker.get("status") == "tripped":
        lines.append(f"breaker  TRIPPED {breaker.get('trigger')}: {breaker.get('reason')}")
    for role, cost in doc["cost"].items():
        lines.append(
            f"cost     {role}: {cost.get('tokens_in', 0)} in / {cost.get('tokens_out', 0)} out tokens, "
            f"{cost.get('seconds', 0)} s, {cost.get('calls', 0)} calls"
        )
    for entry in doc["last_transitions"]:
        lines.append(f"  {entry['timestamp']}  {entry['from']} -[{entry['event']}]-> {entry['to']}")
    if doc["halt_file"]:
        lines.append(f"HALTED   read {doc['halt_file']}")
    for target, why in (doc.get("resume_targets") or {}).items():
        lines.append(f"resume   --to {target}: {why}")
    if doc["stall_report"]:
        lines.append(f"STALLED  read {doc['stall_report']}")
    if doc["needs_person"]:
        lines.append(f"NEEDS YOU  {doc['needs_person']}")
    nxt = doc["next"]
    # --task always: with several tasks in flight the bare command exits 2 (which one?).
    shown = f"hub {nxt['phase']} --task {doc['task_id']}" if nxt["phase"] else "-"
    lines.append(f"next     {shown}  ({nxt['why']})")
    return "\n".join(lines)
