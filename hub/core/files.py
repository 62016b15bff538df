"""Reading a file the model's code may have shaped: never through a link, never more than a cap.

Sandboxed code writes the worktree: a `src/app.py` it replaced by a link to a 1 GiB file (or to
`/dev/zero`) was read whole by the hub (issue 28). `read_capped` opens with O_NOFOLLOW, takes only a
regular file, and reads at most `limit` bytes.

O_NOFOLLOW guards the last component only: a folder the code replaced by a link (`src -> ~`) still led
`src/.bash_history` out of the worktree (issue 38). Given the `root` the path must stay in, every
component below it is opened in turn, relative to the one before and without following a link, so no
link anywhere under the root is ever followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# More than any file the hub shows a model or scans (a prompt's file is cut at 60,000 characters, a
# reply at limits.max_reply_chars), far less than what would hold the hub.
DEFAULT_LIMIT = 8 * 1024 * 1024


FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
FOLDER_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def open_under(root: Path, path: Path) -> int:
    """A read-only descriptor of `path` (inside `root`), no link followed at any component below `root`
    (the root itself is the caller's, resolved as given). OSError when a component is a link (ELOOP or
    ENOTDIR), missing, or `path` lies outside `root`."""
    rel = Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root)))
    parts = rel.parts
    if not parts or parts[0] == ".." or rel.is_absolute():
        raise OSError(f"{path} is not inside {root}")
    fd = os.open(root, FOLDER_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            below = os.open(part, FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
        return os.open(parts[-1], FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def is_linked(root: Path, rel: str) -> bool:
    """Whether `rel` under `root`, or a folder on the way to it, is a link (what exists of it)."""
    current = root
    for part in Path(rel).parts:
        current = current / part
        if current.is_symlink():
            return True
        if not current.exists():
            return False
    return False


def read_capped(
    path: Path, limit: int = DEFAULT_LIMIT, root: Path | None = None
) -> tuple[bytes, bool] | None:
    """(the first `limit` bytes, whether there was more) of the regular file at `path`; None when it is
    a link, not a regular file, or cannot be opened. Given `root`, None too when any folder between the
    root and the file is a link."""
    try:
        fd = open_under(root, path) if root is not None else os.open(path, FILE_FLAGS)
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


def read_text_capped(path: Path, limit: int = DEFAULT_LIMIT, root: Path | None = None) -> str | None:
    """`read_capped` as text (invalid UTF-8 replaced), or None."""
    found = read_capped(path, limit, root)
    return None if found is None else found[0].decode("utf-8", errors="replace")
