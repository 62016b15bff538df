"""Atomic file writes: a temp file in the same folder, fsync, `os.replace`, then fsync the folder.

Readers see the old file or the new one, never half of either, whatever kills the writer.
(click's `_compat._AtomicFile` does the same; this adds the folder fsync that makes the rename durable.)
"""

from __future__ import annotations

import os
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data`. `mode`: give the file this mode (pass an existing file's to keep it);
    None lets the umask decide, as for any new file."""
    temp = path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp"
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
