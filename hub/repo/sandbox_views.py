"""The hub's own part of a repository's common git folder for the sandbox: `hub-sandbox/<worktree>/`
holds what a sandboxed command in that worktree sees of git instead of the user's own files (a
sanitized config and packed-refs, the worktree's own object store: hub.safety.git_view). It lives as
long as the worktree: removed with it, and any left by a worktree removed some other way (by hand, a
killed removal, `git worktree prune`) goes with the next removal."""

from __future__ import annotations

import shutil
from pathlib import Path

from hub.core.log import get_logger

log = get_logger(__name__)

SANDBOX_VIEWS = "hub-sandbox"


def drop_orphan_views(common: Path) -> list[Path]:
    """Remove every worktree's sandbox view whose worktree git no longer records
    (`<common>/worktrees/<name>` gone). Returns what was removed."""
    removed = []
    try:
        views = sorted((common / SANDBOX_VIEWS).iterdir())
    except OSError:
        return []
    for view in views:
        if view.is_dir() and not view.is_symlink() and not (common / "worktrees" / view.name).is_dir():
            shutil.rmtree(view, ignore_errors=True)
            log.debug("sandbox.git_view_removed", view=str(view))
            removed.append(view)
    return removed
