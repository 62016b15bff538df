"""The machine's own limits as a person reads them: a full disk (how much is free, and where), a
read-only or unwritable folder, a missing git. One line naming the file and what to do, for the CLI's
last word on an OSError and for a halt's reason."""

from __future__ import annotations

import errno
from pathlib import Path

_FULL = {errno.ENOSPC, errno.EDQUOT}


def _existing(path: Path) -> Path:
    """The path itself, or its nearest folder that exists (what a disk's free space is asked of)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def free_space(where: Path) -> str:
    """ "N MB free on the file system holding WHERE": the figure a person needs to act on a full disk."""
    import shutil  # here, not at the top: only a full disk asks (hub status imports this module)

    try:
        free = shutil.disk_usage(_existing(where)).free
    except OSError:
        return f"free space on the file system holding {where} unknown"
    return f"{free / 1_000_000:.1f} MB free on the file system holding {where}"


def is_full_disk(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _FULL


def explain(exc: OSError) -> str:
    """One line: what failed, on which file, and what to do."""
    where = Path(str(exc.filename)) if exc.filename else None
    if exc.errno in _FULL:
        place = where or Path.cwd()
        return (
            f"no space left on the device writing {place} ({free_space(place)}): free some space there, "
            "then run the command again (nothing was lost)"
        )
    if exc.errno == errno.EROFS:
        return f"{where} is on a read-only file system: make it writable (or work elsewhere), then run again"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"{where} is not writable by this user (permission denied): fix its owner or mode, then run again"
        )
    if isinstance(exc, FileNotFoundError) and exc.filename == "git":
        return "git is not installed or not on PATH: install git (2.38 or later), then run the command again"
    return f"{exc.strerror or exc}: {where}" if where else str(exc)
