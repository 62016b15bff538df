"""Atomic file writes: a temp file in the same folder, fsync, `os.replace`, then fsync the folder.

Readers see the old file or the new one, never half of either, whatever kills the writer.
(click's `_compat._AtomicFile` does the same; this adds the folder fsync that makes the rename durable.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# `.<name>.<pid>-<hex>.tmp` (write_bytes_atomic) or `.<name>.<pid>.tmp` (the lock's owner file).
_TEMP = re.compile(r"^\..+\.(\d+)(?:-[0-9a-f]+)?\.tmp$")


def write_bytes_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data`. `mode`: give the file this mode (pass an existing file's to keep it);
    None lets the umask decide, as for any new file."""
    # The writer's pid in the name: a temp file a SIGKILL left is known for one (`sweep_temps`).
    temp = path.parent / f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` as UTF-8 (newlines as given)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _fsync_dir(folder: Path) -> None:
    # The rename itself is durable only once the directory entry is flushed.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sweep_temps(folder: Path) -> list[Path]:
    """Remove the temp files that writers killed before their `os.replace` left in `folder` (the
    writer's process is gone); the ones removed."""
    removed = []
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.name.endswith(".tmp")]
    except OSError:
        return []
    for name in names:
        match = _TEMP.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        (folder / name).unlink(missing_ok=True)
        removed.append(folder / name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive, and not ours to judge
    return True
