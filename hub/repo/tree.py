"""Removing what a command left in a work tree, on the file system alone (no git): shared by the
clean-up after acceptance commands (`gitops.restore_outside`) and the clean states of `untrusted`."""

from __future__ import annotations

import shutil
from pathlib import Path


def remove_untracked(root: Path, rel: str) -> bool:
    """Remove `rel` (a file, a link, or a nested repository listed as its folder) from the work tree at
    `root`, and the folders that leaves empty; False, touching nothing, if it does not lie under `root`."""
    path = root / rel.rstrip("/")
    # git lists what lies in real folders only (it never follows a symlink); checked all the same.
    if not path.parent.resolve().is_relative_to(root):
        return False
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    # A tracked file the command replaced by a folder: the folder must go before the file returns.
    for parent in path.parents:
        if parent == root or not parent.is_relative_to(root):
            break
        try:
            parent.rmdir()
        except OSError:
            break
    return True
