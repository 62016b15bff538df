"""Where the hub may work: a git repository on which `hub init` has run.

Every command that writes task state (and the read-only views, which would otherwise describe a task
that cannot exist) asks `require_ready` first, through both faces (CLI and MCP), before anything is
created: outside a git repository the handoff folder would be created and never committed, and in a
repository without `hub init` the handoff folder is not excluded from git, so its lock file makes
every phase refuse a "dirty" work tree. `problems` is what `hub doctor` shows for the same checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from hub.core.config import CONFIG_FILE, Config
from hub.core.errors import NotInitialised


class Problem(NamedTuple):
    """Why the hub cannot work here, and the command that fixes it."""

    check: str
    detail: str
    hint: str


def in_git_repository(repo_root: Path) -> bool:
    return (repo_root / ".git").exists()


def handoff_ignored(repo_root: Path, handoff_dir: Path) -> bool:
    """True when git ignores the handoff folder (or it lies outside the work tree)."""
    try:
        rel = handoff_dir.resolve().relative_to(repo_root.resolve())
    except ValueError:
        return True
    # The line `hub init` writes, read directly: `hub status` should not pay for a git process.
    name = rel.as_posix()
    for listing in (repo_root / ".git" / "info" / "exclude", repo_root / ".gitignore"):
        try:
            lines = {line.strip() for line in listing.read_text(encoding="utf-8").splitlines()}
        except (OSError, UnicodeDecodeError):
            continue
        if lines & {f"/{name}/", f"{name}/", f"/{name}", name}:
            return True
    # Here, not at the top: only this fallback runs git, and `hub status` imports this module.
    import subprocess

    try:
        done = subprocess.run(
            ["git", "check-ignore", "-q", f"{rel.as_posix()}/"],
            cwd=repo_root,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def problems(config: Config) -> list[Problem]:
    """What stands between this folder and a working hub, in the order to fix it (empty: ready)."""
    root = config.repo_root
    if not in_git_repository(root):
        return [
            Problem(
                "git repository",
                f"{root} is not inside a git repository; the hub works on one (task branches, merges)",
                "cd into your repository (or pass --repo), or make this folder one: "
                "git init && git add -A && git commit -m 'first commit', then hub init",
            )
        ]
    found: list[Problem] = []
    if not (root / CONFIG_FILE).is_file():
        found.append(
            Problem("hub init", f"no {CONFIG_FILE} in {root}: `hub init` has not run here", "hub init")
        )
    elif not handoff_ignored(root, config.handoff_dir):
        rel = config.handoff_dir.resolve().relative_to(root.resolve())
        found.append(
            Problem(
                "hub init",
                f"{rel}/ is not ignored by git in {root}: its files would make the work tree dirty",
                f"hub init (it lists /{rel}/ in .git/info/exclude)",
            )
        )
    return found


def require_ready(config: Config) -> None:
    """Raise NotInitialised (exit 1, nothing written) unless the hub can work in this repository."""
    found = problems(config)
    if found:
        first = found[0]
        raise NotInitialised(first.detail, hint=first.hint)
