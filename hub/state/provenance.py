"""One JSON record per model call, applied diff and command run: `_handoff/tasks/<task_id>/runs/NNN-<kind>.json`.

Values under keys that look like credentials, and token-looking strings, are redacted before anything is
written (`hub.core.redaction.redact_record`, here still `redact` with its marker `REDACTED`).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Required, TypedDict, cast

from hub.core.atomic import write_atomic
from hub.core.redaction import REDACTED as REDACTED
from hub.core.redaction import redact_record as redact
from hub.state.contract import iso
from hub.state.handoff import Handoff, number_of, reserve


def write_record(handoff: Handoff, task_id: str, kind: str, payload: dict[str, Any], now: datetime) -> Path:
    folder = handoff.runs(task_id)
    folder.mkdir(parents=True, exist_ok=True)
    path = reserve(folder, f"{kind}.json")
    record = redact(
        {"timestamp": iso(now), "at_ns": time.time_ns(), "kind": kind, "task_id": task_id, **payload}
    )
    write_atomic(path, json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")
    return path


class RunRecord(TypedDict, total=False):
    """A record as read back (`hub log --task`): the keys every record has and those the log shows;
    each kind adds its own (prompt, reply, tokens, ...)."""

    file: Required[str]  # its name in runs/<task_id>/
    kind: Required[str]
    timestamp: Required[str]
    at_ns: int
    task_id: str
    model: str
    role: str  # a model call's
    purpose: str  # what a model call was for ("implement", "reflection-1", ...)
    command: str
    path: str
    outcome: str
    content: Any  # a file set aside into the folder that is not a record of ours: its JSON


def read_records(handoff: Handoff, task_id: str) -> list[RunRecord]:
    """The task's records in NNN order. A judge report set aside into the folder is not a record of ours:
    it is listed with its kind from the file name and its time from the file."""
    records: list[RunRecord] = []
    folder = handoff.runs(task_id)
    numbered = [(number_of(p.name), p) for p in folder.glob("*.json")] if folder.is_dir() else []
    for _, path in sorted((n, p) for n, p in numbered if n is not None):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stat = path.stat()
            mtime = datetime.fromtimestamp(stat.st_mtime, UTC)
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "kind" not in data or "timestamp" not in data:
            data = {
                "kind": path.stem[4:],
                "timestamp": iso(mtime),
                "at_ns": stat.st_mtime_ns,
                "content": redact(data),
            }
        records.append(cast(RunRecord, {"file": path.name, **data}))
    return records
