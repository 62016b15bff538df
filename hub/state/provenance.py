"""One JSON record per model call, applied diff and command run: `_handoff/runs/<task_id>/NNN-<kind>.json`.

Values under keys that look like credentials are redacted before anything is written.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Required, TypedDict, cast

from hub.core.atomic import write_atomic
from hub.state.contract import iso
from hub.state.handoff import Handoff, number_of, reserve

SECRET_KEY = re.compile(r"(token|secret|key|password|passwd|authorization|credential)", re.IGNORECASE)
# Token counts and timings are numbers, not credentials: "token" in `first_token_seconds` is the
# first token of an answer. A number under such a key is kept; a string under it is still redacted.
NOT_SECRET = re.compile(
    r"^(prompt_tokens|completion_tokens|tokens_in|tokens_out|eval_count|max_tokens|num_tokens)$"
)
MEASURE = re.compile(r"tokens|_(seconds|ms|count|budget|timeout)$|^(num|max)_")
SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|xox[abp]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|Bearer\s+[A-Za-z0-9._-]{12,})"
)
REDACTED = "[REDACTED]"


def redact(value: Any, key: str = "") -> Any:
    """A copy of `value` with credential-looking keys' values and token-looking strings replaced."""
    if key and SECRET_KEY.search(key) and not _measure(key, value) and not isinstance(value, (dict, list)):
        return REDACTED if value not in (None, "") else value
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return SECRET_VALUE.sub(REDACTED, value)
    return value


def _measure(key: str, value: Any) -> bool:
    """A token count or timing: a number (never a string) under a key that names a measure."""
    if NOT_SECRET.match(key):
        return True
    return isinstance(value, int | float) and bool(MEASURE.search(key.lower()))


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
