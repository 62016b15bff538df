"""A word to the person when a task needs them (issue 37): hub.yaml `notify:` sends each `HubEvent`
(`hub.phases.events`) to apprise URLs and/or a command that reads it as JSON on stdin, like a git hook.

Where events come from: `Run.record`, the one place a phase records a transition, calls `on_transition`
(merged, halted, waiting for a person's verdict); the archiving of a merged task calls `after_archive`
(the backlog drained); `hub next` calls `sweep` for an event a killed run recorded but never sent.

Once each: an event is claimed before it is sent, by creating `.notified/<id>` in the task's folder (in
the handoff folder for the backlog's own) with O_EXCL, so a re-run of `hub next`, the sweep, or two
processes at once send it once.

Off the critical path: `emit` starts `hub notify-send` detached (`child.detach`) with the job on its stdin
and returns; that process redacts the event, sends it to each target within `notify.timeout`, retries a
failed target once, and logs every attempt to `_handoff/notify.log`. A thread in the hub's process
would have made the hub's own exit wait for a hanging target (or lose the event, as a daemon); the
detached process costs one fork and exec per event (bench/bench_notify.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from hub.core.config import Config
from hub.core.errors import ContractInvalid, HubError
from hub.core.log import get_logger
from hub.core.notify_config import CLAIMS, LOG_FILE, NotifyKind
from hub.phases.context import Context
from hub.phases.events import HubEvent, drained, event_for
from hub.repo import child
from hub.state import store
from hub.state.contract import Contract, iso

log = get_logger(__name__)

# A failed target is tried once more after this pause: a network blip or a busy service passes.
RETRY_PAUSE_SECONDS = 1.0
STDERR_TAIL = 500


class Job(TypedDict):
    """What `hub notify-send` reads on stdin: the event and where it goes."""

    event: HubEvent
    urls: list[str]
    command: list[str]
    timeout: float
    repo_root: str


class Attempt(NamedTuple):
    """One try at one target: which (never a URL, which may hold a token), the try's number, how it went."""

    target: str
    attempt: int
    ok: bool
    detail: str


# --- where events come from ------------------------------------------------------------------------------


def on_transition(ctx: Context, contract: Contract) -> None:
    """After a transition was saved (ctx bound to the task): send the event its new state stands for."""
    if not ctx.config.notify.configured:
        return
    event = event_for(ctx, contract)
    if event is not None:
        emit(ctx, event, ctx.handoff.task_dir)


def after_archive(ctx: Context) -> None:
    """After a merged task's folder was archived: the backlog drained when no task is left in flight and
    no proposal is ready."""
    if not ctx.config.notify.configured:
        return
    from hub.state.backlog import peek_next  # here, not at the top: only the last archive asks

    root = ctx.handoff_root
    try:
        if root.task_ids() or peek_next(root)[0] is not None:
            return
        archived = [path.name for path in root.archive.iterdir()]
    except (HubError, OSError, ValueError) as exc:
        # The merge and its archiving are done: a backlog that cannot be read costs this word only.
        log.warning("notify.drained_unknown", error=str(exc))
        return
    emit(ctx, drained(ctx, archived, iso(ctx.clock())), root.dir)


def sweep(ctx: Context) -> None:
    """The events of tasks whose transition was recorded by a run killed before it sent them (`hub
    next`, before it runs anything); an event already claimed is not sent again."""
    if not ctx.config.notify.configured:
        return
    for task_id in ctx.handoff_root.task_ids():
        bound = ctx.for_task(task_id)
        try:
            contract = store.load(bound.handoff.contract)
        except (ContractInvalid, OSError):
            continue  # archived meanwhile, or broken: `hub next` says which
        on_transition(bound, contract)


# --- sending, off the phase's path -------------------------------------------------------------------------


def claim(folder: Path, event_id: str) -> bool:
    """True the first time `event_id` is claimed in `folder`, across processes (O_EXCL)."""
    marks = folder / CLAIMS
    try:
        marks.mkdir(exist_ok=True)
        os.close(os.open(marks / event_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def emit(ctx: Context, event: HubEvent, folder: Path) -> bool:
    """Claim `event` in `folder` and start its sending, detached; True when it was started. Never raises:
    a notifier that cannot start is logged, and the phase goes on."""
    settings = ctx.config.notify
    if event["kind"] not in settings.events:
        return False
    try:
        if not claim(folder, event["id"]):
            return False
        job = make_job(ctx.config, event)
        argv = [sys.executable, "-m", "hub", "notify-send"]
        env = {**os.environ, "HUB_LOG_FORMAT": "json"}
        pid = child.detach(argv, json.dumps(job).encode("utf-8"), ctx.handoff_root.dir / LOG_FILE, env)
    except (OSError, ValueError) as exc:
        log.warning("notify.not_started", notification=event["id"], task=event["task_id"], error=str(exc))
        return False
    log.debug("notify.started", notification=event["id"], task=event["task_id"], pid=pid)
    return True


def make_job(config: Config, event: HubEvent) -> Job:
    settings = config.notify
    return {
        "event": event,
        "urls": list(settings.urls),
        "command": list(settings.command),
        "timeout": settings.timeout,
        "repo_root": str(config.repo_root),
    }


def sample_event(ctx: Context) -> HubEvent:
    """`hub doctor --notify`'s event: says where it came from, asks for nothing."""
    return {
        "kind": NotifyKind.TEST,
        "id": "test",
        "task_id": None,
        "title": "",
        "what": f"a test notification from agent-hub in {ctx.repo_root}",
        "next": "nothing: this is what a notification looks like",
        "state": None,
        "at": iso(ctx.clock()),
        "handoff": str(ctx.handoff_root.dir),
    }


# --- in `hub notify-send` ----------------------------------------------------------------------------


def deliver(job: Job, pause: float = RETRY_PAUSE_SECONDS) -> list[Attempt]:
    """Send the job's event to each target (the command, then each URL), each try within the job's
    timeout, a failed target tried once more; every try logged. The event is redacted first."""
    event = redacted(job["event"], Path(job["repo_root"]))
    timeout = float(job["timeout"])
    targets: list[tuple[str, list[str] | None, str | None]] = []
    if job["command"]:
        targets.append((f"command {Path(job['command'][0]).name}", job["command"], None))
    targets += [(f"apprise {url.split('://', 1)[0]}://", None, url) for url in job["urls"]]
    attempts: list[Attempt] = []
    for label, argv, url in targets:
        for number in (1, 2):
            if argv is not None:
                ok, detail = _run_command(argv, event, timeout)
            else:
                ok, detail = _send_url(str(url), event, timeout)
            attempts.append(Attempt(label, number, ok, detail))
            said = log.info if ok else log.warning
            said(
                "notify.sent" if ok else "notify.failed",
                notification=event["id"],
                target=label,
                attempt=number,
                detail=detail,
            )
            if ok:
                break
            if number == 1:
                time.sleep(pause)
        else:
            log.warning("notify.gave_up", notification=event["id"], target=label, attempts=2)
    return attempts


def redacted(event: HubEvent, repo_root: Path) -> HubEvent:
    """The event as every record is redacted (credential keys, token shapes), and the user's own secrets
    (their .env values, credential-named variables, git credentials, key blocks) out of every text."""
    from hub.core.redaction import redact_record, redactor

    secrets = redactor(folders=[repo_root, Path.home()])
    clean: dict[str, Any] = redact_record(dict(event))
    return {  # type: ignore[return-value]
        key: secrets.redact_known(value) if isinstance(value, str) else value for key, value in clean.items()
    }


def _run_command(argv: list[str], event: HubEvent, timeout: float) -> tuple[bool, str]:
    """The command with the event as JSON on stdin, ended (its whole group) at `timeout`."""
    try:
        proc = child.Child(argv, stdin=child.PIPE, stdout=child.DEVNULL, stderr=child.PIPE)
        with proc, proc.clock(timeout):
            _, err = proc.proc.communicate(json.dumps(event).encode("utf-8"))
    except OSError as exc:
        return False, f"could not start {argv[0]}: {exc.strerror or exc}"
    if proc.timed_out:
        return False, f"no exit within {timeout:g} s: ended"
    said = (err or b"").decode("utf-8", "replace").strip()[-STDERR_TAIL:]
    if proc.proc.returncode != 0:
        return False, f"exit {proc.proc.returncode}" + (f": {said}" if said else "")
    return True, "exit 0"


def _send_url(url: str, event: HubEvent, timeout: float) -> tuple[bool, str]:
    """The event through apprise to one URL, waited for at most `timeout` (a hung send is left behind in
    its daemon thread: this process exits once every target had its tries)."""
    import apprise  # here, not at the top: only a configured URL needs it (~0.2 s)

    box = apprise.Apprise()
    if not box.add(url):
        return False, "apprise cannot read this URL (see https://github.com/caronc/apprise/wiki)"
    said: list[bool] = []
    title = f"hub: {event['what']}"[:250]
    body = f"{event['what']}\n\nNext: {event['next']}"
    sender = threading.Thread(
        target=lambda: said.append(bool(box.notify(body=body, title=title))), daemon=True
    )
    sender.start()
    sender.join(timeout)
    if sender.is_alive():
        return False, f"no answer within {timeout:g} s"
    if not said or not said[0]:
        return False, "apprise reported a failure (its reason is logged above)"
    return True, "sent"
