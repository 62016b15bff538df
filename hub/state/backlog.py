"""The backlog (proposals queued for `hub next`) and notes for the implementer.

`_handoff/backlog.json` holds the queue, `_handoff/notes.json` the notes and iteration summaries; the
planning verbs of iteratr (task-add, task-update, task-list, task-next, note-add, note-list,
iteration-summary, session-complete) applied to contracts.

A backlog entry moves `proposed -> in_progress` when `hub next` promotes it to a contract (its `task_id`
is recorded), and `in_progress -> merged` once that contract is archived as merged; nobody has to tell
the backlog, it looks at `archive/<task_id>/TASK_CONTRACT.json` whenever it is read. A person or agent
may set `proposed`, `blocked` or `dropped`. Priority 0 is the most urgent, 4 the least (as in iteratr).

Writes take `.backlog.lock`, not the phase lock: a phase holds that for a whole model call, and an agent
planning the next tasks must not be refused for half an hour. Promotion still creates the contract
through `hub.phases.setup.create`, which takes the phase lock itself.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from hub.core.atomic import write_atomic
from hub.core.errors import ContractInvalid, LockBusy, WrongState
from hub.core.log import get_logger
from hub.state import new_task, store
from hub.state.contract import Contract, TaskFields, iso, parse_iso
from hub.state.handoff import Handoff
from hub.state.machine import MERGED

log = get_logger(__name__)

# What the verbs stamp their changes with (a phase context's `clock`).
Clock = Callable[[], datetime]

VERSION = 1
PRIORITIES = range(5)
DEFAULT_PRIORITY = 2
PROPOSED, IN_PROGRESS, MERGED_ENTRY, BLOCKED, DROPPED = (
    "proposed",
    "in_progress",
    "merged",
    "blocked",
    "dropped",
)
STATUSES = (PROPOSED, IN_PROGRESS, MERGED_ENTRY, BLOCKED, DROPPED)
SETTABLE = (PROPOSED, BLOCKED, DROPPED)  # in_progress and merged are the hub's to set
FINISHED = (MERGED_ENTRY, DROPPED)
NOTE_TYPES = ("learning", "stuck", "tip", "decision")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$")
LOCK_WAIT_SECONDS = 10.0
# A promotion marks its entry before creating the contract; an entry still unlinked this long after,
# with no contract to show for it, belongs to a promoter that died.
ORPHAN_AFTER = timedelta(seconds=60)


# --- files --------------------------------------------------------------------------------------------


def _lock_path(hand: Handoff) -> Path:
    return hand.dir / ".backlog.lock"


@contextmanager
def _locked(hand: Handoff) -> Iterator[None]:
    from filelock import FileLock, Timeout

    hand.ensure()
    lock = FileLock(str(_lock_path(hand)), timeout=LOCK_WAIT_SECONDS, is_singleton=False)
    try:
        lock.acquire()
    except Timeout:
        raise LockBusy(f"{hand.backlog.name} is being written by another process", hint="try again") from None
    try:
        yield
    finally:
        lock.release()


# The hint of a damaged backlog or notes file.
_MEND = "mend it, or move it aside: `hub next` sets a damaged backlog aside itself and starts it empty"


def _read(path: Path, key: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"version": VERSION, "next_seq": 1, key: []}
    except UnicodeDecodeError as exc:
        raise ContractInvalid(str(path), "$", f"not UTF-8 text (byte {exc.start})", hint=_MEND) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractInvalid(
            str(path), "$", f"not valid JSON: {exc.msg} at line {exc.lineno}", hint=_MEND
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise ContractInvalid(str(path), f"$.{key}", "expected an object with a list", hint=_MEND)
    doc.setdefault("next_seq", len(doc[key]) + 1)
    return doc


def _set_aside(path: Path, key: str, damage: ContractInvalid) -> dict[str, Any]:
    """A damaged file (empty, cut, not JSON) is moved aside, kept for a person, and the hub starts it
    afresh (issue 35: a 0-byte backlog.json made every `hub next` exit 1, stopping every task). Tasks
    already promoted live on in their contracts."""
    kept = path.with_name(f"{path.name}.damaged-{time.time_ns()}")
    os.replace(path, kept)
    log.warning("backlog.set_aside", file=str(path), problem=damage.problem, kept=str(kept), started="empty")
    return {"version": VERSION, "next_seq": 1, key: []}


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def _editing(hand: Handoff, path: Path, key: str, mend: bool = False) -> Iterator[dict[str, Any]]:
    """Read-modify-write under the backlog lock; the file is replaced only if the block finishes and
    changed something (an idle `hub next` must not touch the file a watcher is watching). `mend` (the
    promotion `hub next` runs): a damaged file is set aside, not refused."""
    with _locked(hand):
        try:
            doc = _read(path, key)
        except ContractInvalid as exc:
            if not mend:
                raise
            doc = _set_aside(path, key, exc)
        before = json.dumps(doc, sort_keys=True)
        yield doc
        if json.dumps(doc, sort_keys=True) != before or not path.exists():
            _write(path, doc)


# --- keeping statuses true ------------------------------------------------------------------------------


def _active(hand: Handoff) -> Contract | None:
    if not hand.contract.exists():
        return None
    return store.load(hand.contract)


def _live(hand: Handoff) -> list[Contract]:
    """Every task's contract in tasks/ (invalid ones skipped: a person deals with those)."""
    found = []
    for task_id in hand.task_ids():
        contract = _active_or_none(hand.for_task(task_id))
        if contract is not None:
            found.append(contract)
    return found


def _archived_status(hand: Handoff, task_id: str) -> str | None:
    path = hand.archive / task_id / "TASK_CONTRACT.json"
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("status"))
    except (OSError, ValueError, AttributeError):
        return None


def refresh(hand: Handoff, doc: dict[str, Any], now: datetime | None) -> bool:
    """Mark in_progress entries whose contract was merged; link or release half-promoted ones.

    `now` is None to skip releasing orphans (readers that will not write). Returns whether anything changed.
    """
    changed = False
    live: list[Contract] | None = None
    for entry in doc["tasks"]:
        if entry.get("status") != IN_PROGRESS:
            continue
        if live is None:
            live = _live(hand)
        task_id = entry.get("task_id")
        if task_id:
            merged = _archived_status(hand, task_id) == MERGED or any(
                c["task_id"] == task_id and c["status"] == MERGED for c in live
            )
            if merged:
                entry["status"] = MERGED_ENTRY
                changed = True
            continue
        # Promoted but not linked: the promoter died between marking the entry and creating the contract,
        # or between creating it and linking it.
        made = next((c for c in live if _made_from(c, entry)), None)
        if made is not None:
            entry["task_id"] = made["task_id"]
            changed = True
        elif now is not None and _older_than(entry.get("promoted_at"), now, ORPHAN_AFTER):
            entry["status"] = PROPOSED
            entry.pop("promoted_at", None)
            changed = True
    return changed


def _current(hand: Handoff, clock: Clock) -> dict[str, Any]:
    """The backlog with statuses brought up to date; saved when that changed something, so the file
    itself stays true for whoever reads it directly."""
    doc = _read(hand.backlog, "tasks")
    if refresh(hand, doc, None):
        with _editing(hand, hand.backlog, "tasks") as doc:
            refresh(hand, doc, clock())
    return doc


def _active_or_none(hand: Handoff) -> Contract | None:
    try:
        return _active(hand)
    except ContractInvalid:
        return None


def _made_from(contract: Contract, entry: dict[str, Any]) -> bool:
    promoted = entry.get("promoted_at")
    if not promoted:
        return False
    title = proposal_to_fields(entry["content"])["title"]
    created = contract["timestamps"]["created_at"]
    return bool(contract.get("title") == title and parse_iso(created) >= parse_iso(promoted))


def _older_than(stamp: str | None, now: datetime, age: timedelta) -> bool:
    if not stamp:
        return True
    try:
        return now - parse_iso(stamp) > age
    except ValueError:
        return True


# --- proposals -----------------------------------------------------------------------------------------


def proposal_to_fields(content: str) -> TaskFields:
    """The `hub new` fields for a proposal: a markdown proposal when it has a `# Title` and requirements,
    else the first line as the title and the whole text as the one requirement."""
    text = content.strip()
    if re.search(r"^#+\s", text, re.MULTILINE):
        try:
            fields = new_task.proposal_fields(text, "backlog proposal")
        except ContractInvalid as exc:
            if exc.json_path not in ("title", "requirements"):
                raise
        else:
            return cast(TaskFields, {k: v for k, v in fields.items() if v not in (None, [])})
    first = next((line for line in text.splitlines() if line.strip()), text)
    title = first.strip().lstrip("#").strip()[:120] or "task"
    plain: TaskFields = {"title": title, "requirements": [text]}
    # `Target: path` / `Source: a.py, b.py` lines count in plain text too: without a target a task
    # has no file the model may write, and its promotion is blocked.
    for line in text.splitlines():
        named = new_task.PROPOSAL_FIELD.match(line)
        if named and named.group(1).lower().startswith("target"):
            plain["target_file"] = named.group(2).strip().strip("`")
        elif named and named.group(1).lower().startswith("source"):
            plain["source_files"] = [v.strip().strip("`") for v in named.group(2).split(",") if v.strip()]
    return plain


def _check_content(content: Any, where: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise ContractInvalid("backlog", f"{where}.content", "expected a non-empty string")
    proposal_to_fields(content)
    return content.strip()


def _check_priority(priority: Any, where: str) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise ContractInvalid("backlog", f"{where}.priority", "expected an integer from 0 (most urgent) to 4")
    return priority


def _check_depends(depends: Any, known: set[str], where: str) -> list[str]:
    if depends is None:
        return []
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise ContractInvalid("backlog", f"{where}.depends_on", "expected a list of backlog task ids")
    for dep in depends:
        if dep not in known:
            raise ContractInvalid(
                "backlog",
                f"{where}.depends_on",
                f"no backlog task '{dep}' (a task may depend only on "
                "tasks already in the backlog or earlier in the same call)",
            )
    return list(dict.fromkeys(depends))


def _find(doc: dict[str, Any], task_id: str, file: str) -> dict[str, Any]:
    for entry in doc["tasks"]:
        if entry["id"] == task_id:
            return entry
    raise ContractInvalid(
        file, "id", f"no backlog task '{task_id}'", hint="see `hub backlog list`, or task_list over MCP"
    )


def _depends_on(doc: dict[str, Any], start: str, target: str) -> bool:
    """Whether `start` depends (transitively) on `target`."""
    by_id = {e["id"]: e for e in doc["tasks"]}
    seen: set[str] = set()
    stack = [start]
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current in seen:
            continue
        seen.add(current)
        stack.extend(by_id.get(current, {}).get("depends_on", []))
    return False


# --- the verbs -----------------------------------------------------------------------------------------


def add_tasks(hand: Handoff, clock: Clock, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """task-add: queue proposals `{content, priority 0-4, depends_on?, id?}`; all or none are added."""
    if not isinstance(tasks, list) or not tasks:
        raise ContractInvalid("backlog", "tasks", "expected a non-empty list of tasks")
    now = iso(clock())
    with _editing(hand, hand.backlog, "tasks") as doc:
        refresh(hand, doc, clock())
        known = {e["id"] for e in doc["tasks"]}
        added: list[dict[str, Any]] = []
        for i, raw in enumerate(tasks):
            where = f"tasks[{i}]"
            if not isinstance(raw, dict):
                raise ContractInvalid("backlog", where, "expected an object {content, priority, depends_on?}")
            task_id = raw.get("id")
            if task_id is None:
                task_id = f"B{doc['next_seq']}"
                while task_id in known:
                    doc["next_seq"] += 1
                    task_id = f"B{doc['next_seq']}"
            elif not isinstance(task_id, str) or not ID_RE.match(task_id) or task_id in known:
                raise ContractInvalid("backlog", f"{where}.id", f"'{task_id}' is taken or not a simple name")
            entry = {
                "id": task_id,
                "content": _check_content(raw.get("content"), where),
                "priority": _check_priority(raw.get("priority", DEFAULT_PRIORITY), where),
                "depends_on": _check_depends(raw.get("depends_on"), known, where),
                "status": PROPOSED,
                "task_id": None,
                "created_at": now,
                "updated_at": now,
            }
            doc["tasks"].append(entry)
            doc["next_seq"] += 1
            known.add(task_id)
            added.append(entry)
    log.debug("backlog.add", ids=[e["id"] for e in added])
    return added


def update_task(hand: Handoff, clock: Clock, task_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """task-update: change a task's content, priority, depends_on, or status (proposed|blocked|dropped)."""
    unknown = set(changes) - {"content", "priority", "depends_on", "status"}
    if unknown:
        raise ContractInvalid(
            "backlog", sorted(unknown)[0], "can change only content, priority, depends_on, status"
        )
    with _editing(hand, hand.backlog, "tasks") as doc:
        refresh(hand, doc, clock())
        entry = _find(doc, task_id, "backlog")
        where = task_id
        if "status" in changes and changes["status"] != entry["status"]:
            status = changes["status"]
            if status not in SETTABLE:
                raise ContractInvalid(
                    "backlog",
                    f"{where}.status",
                    f"can be set to {', '.join(SETTABLE)}; the hub sets the rest",
                )
            if entry["status"] == IN_PROGRESS and (
                entry.get("task_id") is None or entry["task_id"] in hand.task_ids()
            ):
                raise WrongState(
                    f"backlog task {task_id} is the active task {entry.get('task_id')}",
                    hint="finish it, or halt it and move its TASK_CONTRACT.json to archive/, before changing "
                    "its status",
                )
            if entry["status"] == MERGED_ENTRY:
                raise WrongState(f"backlog task {task_id} is merged already")
            entry["status"] = status
        if "content" in changes:
            if entry["status"] not in (PROPOSED, BLOCKED):
                raise WrongState(
                    f"backlog task {task_id} is {entry['status']}: its content can no longer change"
                )
            entry["content"] = _check_content(changes["content"], where)
        if "priority" in changes:
            entry["priority"] = _check_priority(changes["priority"], where)
        if "depends_on" in changes:
            known = {e["id"] for e in doc["tasks"]} - {task_id}
            deps = _check_depends(changes["depends_on"], known, where)
            for dep in deps:
                if _depends_on(doc, dep, task_id):
                    raise ContractInvalid(
                        "backlog", f"{where}.depends_on", f"{dep} depends on {task_id}: a cycle"
                    )
            entry["depends_on"] = deps
        entry["updated_at"] = iso(clock())
    return entry


def list_tasks(hand: Handoff, clock: Clock, status: str | None = None) -> list[dict[str, Any]]:
    """task-list: every backlog entry (or those with `status`), most urgent first, then in order added."""
    if status is not None and status not in STATUSES:
        raise ContractInvalid("backlog", "status", f"expected one of {', '.join(STATUSES)}")
    doc = _current(hand, clock)
    entries = [e for e in doc["tasks"] if status is None or e["status"] == status]
    order = {e["id"]: i for i, e in enumerate(doc["tasks"])}
    return sorted(entries, key=lambda e: (e["status"] in FINISHED, e["priority"], order[e["id"]]))


def pick_next(doc: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The most urgent proposal whose dependencies are all merged, and why (pure)."""
    by_id = {e["id"]: e for e in doc["tasks"]}
    proposals = [e for e in doc["tasks"] if e["status"] == PROPOSED]
    if not proposals:
        return None, "no proposals in the backlog"
    ready: list[tuple[int, int, dict[str, Any]]] = []
    waiting: list[str] = []
    for seq, entry in enumerate(doc["tasks"]):
        if entry["status"] != PROPOSED:
            continue
        pending = [d for d in entry.get("depends_on", []) if by_id.get(d, {}).get("status") != MERGED_ENTRY]
        if pending:
            waiting.append(
                f"{entry['id']} waits on "
                + ", ".join(f"{d} ({by_id.get(d, {}).get('status', 'missing')})" for d in pending)
            )
        else:
            ready.append((entry["priority"], seq, entry))
    if not ready:
        return None, "; ".join(waiting)
    entry = min(ready, key=lambda item: (item[0], item[1]))[2]
    return entry, f"priority {entry['priority']}, dependencies merged"


def peek_next(hand: Handoff) -> tuple[dict[str, Any] | None, str]:
    """What `hub next` would promote, without writing anything (for `hub status`)."""
    try:
        doc = _read(hand.backlog, "tasks")
    except ContractInvalid as exc:
        return None, f"{exc.file} is damaged ({exc.problem}); the next `hub next` sets it aside"
    refresh(hand, doc, None)
    return pick_next(doc)


def next_task(hand: Handoff, clock: Clock) -> dict[str, Any]:
    """task-next: `{task, why}`, the proposal `hub next` would promote (task is None when nothing is ready)."""
    entry, why = pick_next(_current(hand, clock))
    return {"task": entry, "why": why}


def claim_next(
    hand: Handoff, clock: Clock, free_slots: Callable[[], tuple[int, list[str]]]
) -> tuple[dict[str, Any] | None, TaskFields, str]:
    """The next ready proposal, marked in progress (no task id yet), with its `hub new` fields; or None
    and why nothing is ready. Used by the promote phase (phases/promote.py), which says how many task
    slots are free (counted under the backlog lock, so two promoters cannot both take the last one)."""
    fields: TaskFields = {}
    with _editing(hand, hand.backlog, "tasks", mend=True) as doc:
        refresh(hand, doc, clock())
        entry: dict[str, Any] | None = None
        free, busy = free_slots()
        if free > 0:
            entry, why = pick_next(doc)
        else:
            why = f"every task slot is taken ({', '.join(busy)}; limits.parallel_tasks)"
        if entry is not None:
            fields = proposal_to_fields(entry["content"])
            fields.setdefault("complexity", "minor")
            entry.update(status=IN_PROGRESS, task_id=None, promoted_at=iso(clock()))
    return entry, fields, why


def settle_claim(
    hand: Handoff, clock: Clock, backlog_id: str, task_id: str | None, blocked: str | None = None
) -> None:
    """After claim_next: the task it became, or (task_id None: creating it failed) back to proposed, or
    to blocked with the reason when the proposal itself cannot become a task as written."""
    with _editing(hand, hand.backlog, "tasks") as doc:
        again = _find(doc, backlog_id, str(hand.backlog))
        if task_id is not None:
            again.update(status=IN_PROGRESS, task_id=task_id, updated_at=iso(clock()))
        elif again["status"] == IN_PROGRESS and again.get("task_id") is None:
            again["status"] = BLOCKED if blocked else PROPOSED
            again.pop("promoted_at", None)
            if blocked:
                again.update(blocked_reason=blocked, updated_at=iso(clock()))


# --- notes ---------------------------------------------------------------------------------------------


def _active_task_id(hand: Handoff) -> str | None:
    active = _active_or_none(hand)
    return None if active is None or active["status"] == MERGED else str(active["task_id"])


def add_note(hand: Handoff, clock: Clock, content: str, note_type: str) -> dict[str, Any]:
    """note-add: a note for the active task (or, with none active, for every task); the implementer reads it."""
    if note_type not in NOTE_TYPES:
        raise ContractInvalid("notes", "type", f"expected one of {', '.join(NOTE_TYPES)}")
    if not isinstance(content, str) or not content.strip():
        raise ContractInvalid("notes", "content", "expected a non-empty string")
    task_id = _active_task_id(hand)
    with _editing(hand, hand.notes, "notes") as doc:
        note = {
            "id": f"N{doc['next_seq']}",
            "task_id": task_id,
            "type": note_type,
            "content": content.strip(),
            "created_at": iso(clock()),
        }
        doc["next_seq"] += 1
        doc["notes"].append(note)
    return note


def list_notes(hand: Handoff, note_type: str | None = None, every_task: bool = False) -> list[dict[str, Any]]:
    """note-list: the active task's notes and those for every task (or all notes), oldest first."""
    if note_type is not None and note_type not in NOTE_TYPES:
        raise ContractInvalid("notes", "type", f"expected one of {', '.join(NOTE_TYPES)}")
    notes = _read(hand.notes, "notes")["notes"]
    task_id = _active_task_id(hand)
    return [
        n
        for n in notes
        if (note_type is None or n.get("type") == note_type)
        and (every_task or n.get("task_id") in (None, task_id))
    ]


def notes_for_prompt(handoff: Handoff, task_id: str) -> list[dict[str, Any]]:
    """The notes the implementer prompt shows for `task_id`: its own and those meant for every task."""
    try:
        notes = _read(handoff.notes, "notes")["notes"]
    except ContractInvalid as exc:
        log.warning("notes.unreadable", error=str(exc))
        return []
    return [
        {"type": n.get("type", "note"), "content": n.get("content", ""), "created_at": n.get("created_at")}
        for n in notes
        if n.get("task_id") in (None, task_id)
    ]


def iteration_summary(hand: Handoff, clock: Clock, summary: str) -> dict[str, Any]:
    """iteration-summary: record what this iteration did (kept in notes.json, not sent to the model)."""
    if not isinstance(summary, str) or not summary.strip():
        raise ContractInvalid("notes", "summary", "expected a non-empty string")
    task_id = _active_task_id(hand)
    with _editing(hand, hand.notes, "notes") as doc:
        summaries = doc.setdefault("summaries", [])
        item = {
            "id": f"S{len(summaries) + 1}",
            "task_id": task_id,
            "summary": summary.strip(),
            "created_at": iso(clock()),
        }
        summaries.append(item)
    return item


def session_complete(hand: Handoff, clock: Clock) -> dict[str, Any]:
    """session-complete: refused while any backlog task is not merged or dropped, or a task is active."""
    with _editing(hand, hand.backlog, "tasks") as doc:
        refresh(hand, doc, clock())
        open_entries = [e for e in doc["tasks"] if e["status"] not in FINISHED]
        if open_entries:
            shown = ", ".join(f"{e['id']} ({e['status']})" for e in open_entries[:10])
            raise WrongState(
                f"{len(open_entries)} backlog tasks are not merged or dropped: {shown}",
                hint="finish them or drop them with task_update",
            )
        active = [c["task_id"] for c in _live(hand) if c["status"] != MERGED]
        if active:
            raise WrongState(
                f"task {', '.join(active)} is still active", hint="finish it first (see hub_status)"
            )
        counts = {s: sum(1 for e in doc["tasks"] if e["status"] == s) for s in FINISHED}
        doc["session"] = {"completed_at": iso(clock()), **counts}
    return doc["session"]
