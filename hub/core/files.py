"""Reading a file the model's code may have shaped: never through a link, never more than a cap.

Sandboxed code writes the worktree: a `src/app.py` it replaced by a link to a 1 GiB file (or to
`/dev/zero`) was read whole by the hub (issue 28). `read_capped` opens with O_NOFOLLOW, takes only a
regular file, and reads at most `limit` bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# More than any file the hub shows a model or scans (a prompt's file is cut at 60,000 characters, a
# reply at limits.max_reply_chars), far less than what would hold the hub.
DEFAULT_LIMIT = 8 * 1024 * 1024


def read_capped(path: Path, limit: int = DEFAULT_LIMIT) -> tuple[bytes, bool] | None:
    """(the first `limit` bytes, whether there was more) of the regular file at `path`; None when it is
    a link, not a regular file, or cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(limit + 1)
        except OSError:
            return None
    return data[:limit], len(data) > limit


def read_text_capped(path: Path, limit: int = DEFAULT_LIMIT) -> str | None:
    """`read_capped` as text (invalid UTF-8 replaced), or None."""
    found = read_capped(path, limit)
    return None if found is None else found[0].decode("utf-8", errors="replace")
