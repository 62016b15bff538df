"""Who the hub's own commits are by: the user's git identity where git has one, else the hub's own.

A machine without `user.name` / `user.email` (a fresh home folder, a container, CI) made every
checkpoint fail after the model had been paid for, and the leftovers of that attempt were then
committed as "a person's edits" (issue 36). So every command of the hub that makes a commit (the
checkpoint, a stash, the merge commits) is given both values with `-c`: the user's own as git resolves
them in the repository when they are set, the hub's (FALLBACK) for the one that is not. `hub doctor`
says which applies (`resolved`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

FALLBACK_NAME = "agent-hub"
FALLBACK_EMAIL = "agent-hub@localhost"


class Identity(NamedTuple):
    """The name and email the hub commits with, and whether each is the user's own."""

    name: str
    email: str
    name_set: bool
    email_set: bool

    @property
    def complete(self) -> bool:
        return self.name_set and self.email_set

    def config_args(self) -> list[str]:
        """`-c user.name=... -c user.email=...`, to go between `git` and its command."""
        return ["-c", f"user.name={self.name}", "-c", f"user.email={self.email}"]


def resolved(cwd: Path) -> Identity:
    """git's `user.name` and `user.email` as git resolves them in `cwd` (the repository's config, the
    user's, the system's and `-c` from the environment), each missing one replaced by the hub's."""
    # One git for both keys: this runs before every commit the hub makes.
    done = subprocess.run(
        ["git", "config", "--get-regexp", r"^user\.(name|email)$"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if value.strip():
            found[key.lower()] = value  # the last one wins, as it does for git
    name, email = found.get("user.name"), found.get("user.email")
    return Identity(name or FALLBACK_NAME, email or FALLBACK_EMAIL, name is not None, email is not None)


def commit_args(cwd: Path) -> list[str]:
    """The `-c` options that give a commit made in `cwd` an identity whatever git's configuration holds."""
    return resolved(cwd).config_args()
