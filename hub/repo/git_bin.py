"""Whether there is a git to run: checked before GitPython is imported, whose import fails with an
80-line ImportError when there is none (issue 35), and before `hub next` starts any phase (a phase's git
failure halts its task; a missing git is no task's failure)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.errors import GitError

if TYPE_CHECKING:
    from git import Repo


def require_git() -> None:
    """GitError, in one line with the fix, when no git can be run."""
    if shutil.which("git") is None and not os.environ.get("GIT_PYTHON_GIT_EXECUTABLE"):
        raise GitError(
            "git is not installed: no `git` on PATH",
            hint="install git (e.g. `apt install git`), or put it on PATH",
        )


def open_repo(path: Path) -> Repo:
    """The repository `path` is in, after `require_git`; GitError when it is in none."""
    require_git()
    import git

    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{path} is not inside a git repository", hint="run `git init` first") from None
