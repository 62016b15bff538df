"""A contract's file: `load` and `save`, the only functions that read or write one.

`save` is atomic (temp file in the same folder, fsync, `os.replace`) so a crash never leaves half a
contract; both validate (`hub.state.schema.validate`), so a bad contract is never read in or written out.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.atomic import write_atomic
from hub.core.errors import ContractInvalid
from hub.state.contract import iso
from hub.state.schema import validate

if TYPE_CHECKING:
    from hub.state.contract import Contract


def load(path: Path) -> Contract:
    """Read and validate a contract; ContractInvalid names the file and the first bad field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractInvalid(str(path), "$", "no such file") from None
    except UnicodeDecodeError as exc:
        raise ContractInvalid(str(path), "$", f"not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractInvalid(
            str(path), "$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return validate(data, str(path))


def save(path: Path, contract: Contract, now: datetime) -> Contract:
    """Validate, stamp `updated_at`, and atomically replace the file. Returns the saved contract."""
    contract["timestamps"]["updated_at"] = iso(now)
    validate(contract, str(path))
    write_atomic(path, json.dumps(contract, indent=2, ensure_ascii=False) + "\n")
    _remove_stale_temps(path, now)
    return contract


STALE_TEMP_SECONDS = 60


def _remove_stale_temps(path: Path, now: datetime) -> None:
    # A save killed between mkstemp and os.replace leaves its temp file behind. Old ones only:
    # a younger one may belong to a writer that is still running.
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if now.timestamp() - temp.stat().st_mtime > STALE_TEMP_SECONDS:
                temp.unlink()
        except OSError:
            continue
