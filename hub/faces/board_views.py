"""What the board shows, read with the functions `hub status`, `hub log --task`, `hub backlog list` and
`hub eval` use: the index of tasks, a task's page, and the eval reports. Nothing here writes.

Each live view returns `(key, parts)`: the page swaps in each part's HTML as it changes, and loads itself
again when the key does (a transition: the diff, the halt file and the actions may all have changed).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.errors import ContractInvalid, HubError, describe
from hub.faces.board_html import Links, bar_chart, diff, e, markdown, pre, split_chart, state_badge, table
from hub.phases.halts import note_needed
from hub.phases.status import idle_next, log_entries, task_view
from hub.state import handoff, store
from hub.state.machine import ERIK_CONSULTATION, JUDGE_REVIEW_IN_PROGRESS, PENDING_JUDGE_REVIEW

if TYPE_CHECKING:
    from hub.phases.context import Context
    from hub.phases.status import TaskView
    from hub.state.contract import Contract

JUDGING = (PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS)
# Finished tasks listed under the ones in flight, newest first.
ARCHIVED_SHOWN = 20


def _call(view: TaskView) -> str:
    if not view["call"]:
        return ""
    from hub.phases.live import call_line

    return e(call_line(view["call"]))


# Contracts as last read, by path, with the file's identity then: the page asks twice a second, and a
# contract is replaced (a new inode) whenever it changes, so one unchanged is not parsed and checked again.
_READ: dict[Path, tuple[tuple[int, int, int], Contract]] = {}
_READ_LOCK = threading.Lock()


def load_contract(path: Path) -> Contract:
    """`store.load`, once per version of the file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return store.load(path)  # its own error, naming the file
    identity = (st.st_ino, st.st_mtime_ns, st.st_size)
    with _READ_LOCK:
        known = _READ.get(path)
    if known and known[0] == identity:
        return known[1]
    contract = store.load(path)
    with _READ_LOCK:
        _READ[path] = (identity, contract)
    return contract


def _in_flight(ctx: Context) -> list[tuple[Contract, TaskView]]:
    """Every task in flight, each contract read once: `hub status`'s `task_view` of it, and the contract
    for what the view leaves out (the model). A task archived while being listed is left out."""
    found = []
    for task_id in ctx.handoff_root.task_ids():
        bound = ctx.for_task(task_id)
        try:
            contract = load_contract(bound.handoff.contract)
        except ContractInvalid:
            if bound.handoff.contract.exists():
                raise
            continue
        found.append((contract, task_view(bound, contract)))
    return found


def _need(view: TaskView) -> str:
    """What the task needs from a person, short (the whole sentence, with its paths, on hover)."""
    said = view["needs_person"]
    if not said:
        return ""
    short = said
    if view["status"] == ERIK_CONSULTATION:
        short = "halted: read the halt, resume it"
    elif view["status"] in JUDGING:
        short = "your verdict"
    return f'<span class="need" title="{e(said)}">{e(short)}</span>'


def index_live(ctx: Context, links: Links) -> tuple[str, dict[str, str]]:
    """Every task in flight (as `hub status` reads it), the backlog, and the last finished tasks."""
    tasks = _in_flight(ctx)
    rows = []
    for contract, view in tasks:
        last = view["last_transitions"][-1]["timestamp"] if view["last_transitions"] else ""
        need = _need(view)
        running = view["running"]
        rows.append(
            [
                f'<a href="{links("/task/" + view["task_id"])}">{e(view["task_id"])}</a>',
                e(view["title"]),
                state_badge(view["status"]) + f'<div class="muted">{e(view["status_reason"] or "")}</div>',
                e(view["attempt"]),
                e(contract["roles"].get("implementer", "")),
                e(last),
                (f"{e(running.get('phase'))} " if running else "") + _call(view),
                need or e(view["next"]["why"]),
            ]
        )
    html = "<h2>Tasks</h2>" + table(
        ["task", "title", "state", "attempt", "model", "last change", "running", "next"],
        rows,
        empty="" if tasks else f"no task in flight; next: {idle_next(ctx)}",
    )
    html += _backlog(ctx) + _archived(ctx, links)
    return "index", {"tasks": html}


def _backlog(ctx: Context) -> str:
    from hub.state.backlog import list_tasks

    try:
        entries = list_tasks(ctx.handoff_root, ctx.clock)
    except HubError as exc:
        return f'<h2>Backlog</h2><p class="error">{e(describe(exc))}</p>'
    rows = [
        [
            e(entry.get("id")),
            e(entry.get("status")),
            e(entry.get("priority")),
            e(str(entry.get("content", "")).splitlines()[0] if entry.get("content") else ""),
        ]
        for entry in entries
    ]
    return "<h2>Backlog</h2>" + table(
        ["id", "status", "priority", "proposal"], rows, empty="the backlog is empty"
    )


def _archived(ctx: Context, links: Links) -> str:
    folder = ctx.handoff_root.archive
    try:
        found = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    except OSError:
        found = []
    rows = []
    for path in found[:ARCHIVED_SHOWN]:
        try:
            contract = load_contract(path / "TASK_CONTRACT.json")
        except (OSError, ContractInvalid):
            continue
        rows.append(
            [
                f'<a href="{links("/task/" + path.name)}">{e(path.name)}</a>',
                e(contract.get("title", "")),
                state_badge(contract["status"]),
                e(contract["attempt"]),
                e(contract["timestamps"].get("updated_at", "")),
            ]
        )
    return "<h2>Finished</h2>" + table(["task", "title", "state", "attempt", "updated"], rows)


# --- a task's page ---------------------------------------------------------------------------------------


def find_task(ctx: Context, task_id: str) -> tuple[Contract, bool]:
    """The task's contract and whether it is in flight (False: archived). ContractInvalid if neither."""
    handoff.check_task_id(task_id)
    live = ctx.for_task(task_id).handoff
    if live.contract.exists():
        return load_contract(live.contract), True
    archived = ctx.handoff_root.archive / task_id / "TASK_CONTRACT.json"
    if archived.exists():
        return load_contract(archived), False
    raise ContractInvalid("task_id", "$", f"no task {task_id} in flight or in the archive")


def task_key(contract: Contract, in_flight: bool) -> str:
    return f"{contract['status']}:{len(contract['history'])}:{int(in_flight)}"


def task_live(ctx: Context, task_id: str) -> tuple[str, dict[str, str]]:
    """The task's state and what runs now; its log (`hub log --task`)."""
    contract, in_flight = find_task(ctx, task_id)
    parts = [
        f"<p>{state_badge(contract['status'])} attempt {e(contract['attempt'])} · "
        f'<span class="muted">{e(contract.get("status_reason") or "")}</span></p>'
    ]
    if in_flight:
        view = task_view(ctx.for_task(task_id), contract)
        if view["running"]:
            parts.append(f"<p>running <b>{e(view['running'].get('phase'))}</b> {_call(view)}</p>")
        if view["needs_person"]:
            parts.append(f'<p class="need">needs you: {e(view["needs_person"])}</p>')
        parts.append(
            f'<p class="muted">next: {e(view["next"]["phase"] or "-")} ({e(view["next"]["why"])})</p>'
        )
    log = "<h3>Transitions and model calls</h3>" + _log(ctx, task_id)
    return task_key(contract, in_flight), {"state": "".join(parts), "log": log}


def _log(ctx: Context, task_id: str) -> str:
    rows = []
    for entry in log_entries(ctx, task_id):
        if entry["kind"] == "transition":
            what = (
                f"{e(entry.get('old_status'))} -[{e(entry.get('event'))}]-> {e(entry.get('new_status'))}"
                f' <span class="muted">{e(entry.get("status_reason") or "")}</span>'
            )
        else:
            detail = entry.get("model") or entry.get("command") or entry.get("path") or ""
            what = f"{e(entry.get('file', ''))} {e(detail)} {e(entry.get('outcome', ''))}"
        rows.append([e(entry["timestamp"]), e(entry["kind"]), what])
    return table(["time", "kind", "what"], rows, empty="nothing logged yet")


def task_static(ctx: Context, task_id: str, links: Links) -> str:
    """What changes only with a transition: the requirement, the diff, findings, acceptance output,
    the halt and stall reports and the actions a person can take."""
    contract, in_flight = find_task(ctx, task_id)
    hand = ctx.for_task(task_id).handoff if in_flight else None
    spec = contract["specification"]
    parts = [f"<h2>{e(contract.get('title', task_id))}</h2><h3>Requirement</h3><ul>"]
    parts += [f"<li>{e(r)}</li>" for r in spec.get("requirements", [])]
    parts.append("</ul>")
    if spec.get("target_file"):
        parts.append(f"<p><b>Target:</b> {e(spec.get('target_file'))}</p>")
    criteria = spec.get("acceptance_criteria") or []
    parts += [f"<p><b>Criterion:</b> {e(c)}</p>" for c in criteria]
    if hand is not None:
        parts.append(_actions(ctx, contract, hand, links))
    parts.append("<h3>Diff under review</h3>" + diff(_diff_text(ctx, contract)))
    parts.append(_findings(contract))
    parts.append(_acceptance(ctx, task_id))
    if hand is not None and contract["status"] in JUDGING:
        request = hand.review_request if hand.review_request.exists() else hand.review_in_progress
        if request.exists():
            text = request.read_text(encoding="utf-8", errors="replace")
            parts.append(f"<details><summary>{e(request.name)}</summary>{markdown(text)}</details>")
    return "".join(parts)


def _diff_text(ctx: Context, contract: Contract) -> str:
    git = contract["git"]
    base, branch = git.get("base_commit"), git.get("task_branch")
    if not base or not branch:
        return ""
    from hub.repo import gitops

    try:
        return gitops.diff_text(gitops.open_repo(ctx.repo_root), base, branch)
    except (HubError, OSError):
        return ""  # the branch is gone (merged and cleaned up): the log keeps its diffs


def _findings(contract: Contract) -> str:
    data = contract["handoff_data"]
    rows = [
        [e(i.get("id", "")), e(i.get("severity", "")), e(i.get("file", "")), e(i.get("description", ""))]
        for i in data.get("local_review_issues", [])
    ]
    passed = data.get("local_review_passed")
    said = "" if passed is None else f"<p>local review {'passed' if passed else 'did not pass'}</p>"
    html = (
        "<h3>Local review</h3>"
        + said
        + table(["id", "severity", "file", "finding"], rows, empty="no findings")
    )
    verdict = data.get("judge_verdict")
    if verdict:
        issues = [
            [e(i.get("id", "")), e(i.get("description", ""))] for i in data.get("judge_blocking_issues", [])
        ]
        html += f"<h3>Judge: {e(verdict)}</h3>" + table(
            ["id", "blocking issue"], issues, empty="no blocking issue"
        )
    return html


def _acceptance(ctx: Context, task_id: str) -> str:
    from hub.state.provenance import read_records

    hand = ctx.for_task(task_id).handoff
    parts = []
    for record in read_records(hand, task_id):
        if record["kind"] != "command":
            continue
        full: dict[str, Any] = dict(record)
        output = (str(full.get("stdout") or "") + str(full.get("stderr") or "")).strip()
        parts.append(
            f"<p><code>{e(full.get('command'))}</code> exit {e(full.get('exit_code'))} "
            f"({e(full.get('outcome', ''))})</p>" + pre(output or "(no output)")
        )
    return "<h3>Acceptance commands</h3>" + ("".join(parts) or '<p class="muted">none run yet</p>')


def _actions(ctx: Context, contract: Contract, hand: handoff.Handoff, links: Links) -> str:
    parts = []
    task_id = contract["task_id"]
    if hand.halt_report.exists():
        parts.append(
            "<h3>Halted</h3>" + markdown(hand.halt_report.read_text(encoding="utf-8", errors="replace"))
        )
    if hand.stall_report.exists():
        parts.append(
            "<h3>Stalled</h3>" + markdown(hand.stall_report.read_text(encoding="utf-8", errors="replace"))
        )
    if contract["status"] == ERIK_CONSULTATION:
        from hub.phases.halts import resume_targets

        trigger = str(contract.get("breaker", {}).get("trigger") or "")
        for target, why in resume_targets(contract).items():
            needed = note_needed(trigger, target)
            parts.append(
                f'<form class="action" method="post" action="{links("/task/" + task_id + "/resume")}">'
                f'<input type="hidden" name="to" value="{e(target)}"><p><b>resume to {e(target)}</b>: {e(why)}</p>'
                f"<label>note for the implementer{' (required)' if needed else ''}"
                f'<textarea name="note"{" required" if needed else ""}></textarea></label>'
                f'<button type="submit" name="go" value="resume-{e(target)}">Resume to {e(target)}</button></form>'
            )
    if contract["status"] in JUDGING and (hand.review_request.exists() or hand.review_in_progress.exists()):
        parts.append(
            "<h3>Your verdict</h3>"
            f'<form class="action" method="post" action="{links("/task/" + task_id + "/verdict")}">'
            "<p>Written as JUDGE_REPORT.json and applied by `hub report-judge`; the review request is below "
            "the diff.</p>"
            '<label>summary<textarea name="summary"></textarea></label>'
            '<label>blocking issues, one a line (what a FAIL asks the implementer to fix)<textarea name="blocking">'
            "</textarea></label>"
            '<button type="submit" name="verdict" value="PASS">PASS</button> '
            '<button type="submit" name="verdict" value="FAIL">FAIL</button></form>'
        )
    return "".join(parts)


# --- eval reports -------------------------------------------------------------------------------------


def eval_reports(folders: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """(run name, report.json) for every `hub eval` workdir under `folders` (or that is one), oldest first."""
    found: dict[Path, None] = {}
    for folder in folders:
        for path in (folder / "report.json", *sorted(folder.glob("*/report.json"))):
            if path.is_file():
                found[path.resolve()] = None
    reports = []
    for path in sorted(found, key=lambda p: p.stat().st_mtime_ns):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("totals"), dict):
            reports.append((path.parent.name, doc))
    return reports


def evals_html(folders: list[Path]) -> str:
    reports = eval_reports(folders)
    if not reports:
        where = ", ".join(str(f) for f in folders)
        return f'<h2>Evals</h2><p class="muted">no `hub eval` report.json under {e(where)}</p>'
    rows, solved, times = [], [], []
    for run, doc in reports:
        totals, models = doc["totals"], doc.get("models") or {}
        model = str(models.get("implementer", "?"))
        label = f"{model} · {run}"
        rows.append(
            [
                e(run),
                e(doc.get("suite", "")),
                e(model),
                e(doc.get("mode", "")),
                f"{e(totals.get('solved', 0))} / {e(totals.get('tasks', 0))}",
                e(totals.get("halted", 0)),
                e(totals.get("model_seconds", 0)),
                e(totals.get("hub_seconds", 0)),
            ]
        )
        solved.append((label, float(totals.get("solved", 0)), float(totals.get("tasks", 0))))
        times.append((label, float(totals.get("model_seconds", 0)), float(totals.get("hub_seconds", 0))))
    return (
        "<h2>Evals</h2>"
        + table(["run", "suite", "implementer", "mode", "solved", "halted", "model s", "hub s"], rows)
        + bar_chart("solved per model and run", solved)
        + "<br>"
        + split_chart("model time against hub time", times)
    )
