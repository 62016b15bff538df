"""Where edits may be written: `Policy`, and the checks of an edit's path against it and the file system.

An edit is written only inside `Policy.allowed_paths` and never inside `forbidden_paths`. Refused, whatever
`allowed_paths` says: one of the hub's control files (`hub.safety.trust`: `_handoff/`, `hub.yaml`,
`prompts/`, `sgconfig.yml`, its rule folders); a path that escapes the repository (`..`, absolute, `~`, a
symlink anywhere on the way, even one pointing inside the repository, since the link's target is what
gets written); a path into `.git/`. When exactly one file is allowed, an edit naming it under another
folder, or naming a missing file whose every SEARCH block matches it exactly, goes to that file (aider
reads these the same way). Files that change how git, CI or agents behave (`.gitattributes`, `.claude/`,
`CLAUDE.md`, ...) only when `allowed_paths` names them exactly. Whether a path is allowed is decided by
the one matcher, `hub.core.relpaths.refusal`. Reads the file system, never writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hub.core.errors import EditError
from hub.core.files import read_text_capped
from hub.core.log import get_logger
from hub.core.relpaths import first_match, is_glob, path_parts, refusal
from hub.edits.edit import FileEdit
from hub.safety.trust import CONTROL_FILES

log = get_logger(__name__)
# What Linux file systems take (NAME_MAX, PATH_MAX): a longer name fails the stat itself with
# ENAMETOOLONG, so it is refused before the disk is asked anything.
NAME_MAX = 255
PATH_MAX = 4096


@dataclass(frozen=True)
class Policy:
    """Where edits may be written.

    `allowed_paths` and `forbidden_paths` hold repo-relative files, directories (everything under them)
    or globs (`*`, `?`, `[...]` within a name; `**` across folders; a glob without a slash matches the
    file name at any depth). Forbidden wins. `max_diff_lines` bounds added+removed lines of each edit."""

    repo_root: Path
    allowed_paths: tuple[str, ...]
    forbidden_paths: tuple[str, ...] = ()
    max_diff_lines: int | None = None
    delete_allowed: bool = False
    # The hub's control files (hub.safety.trust): refused whatever allowed_paths says.
    control_paths: tuple[str, ...] = CONTROL_FILES
    # How many files one answer may touch; an answer over it is refused whole, before anything is written.
    max_files: int | None = None
    # The task's acceptance commands: the files they run may be written only where allowed_paths names them.
    acceptance_commands: tuple[str, ...] = ()


def resolve_target(edit: FileEdit, policy: Policy, root: Path) -> str | None:
    """The repo-relative path an edit writes, as `plan_edits` finds it; None when it is refused."""
    try:
        return check_path(retarget(edit, policy, root), policy, root)
    except EditError:
        return None


def retarget(edit: FileEdit, policy: Policy, root: Path) -> str:
    """The one allowed file, for an edit whose path misses it in a way with one reading (aider accepts
    these too): the same file name under another folder (`src/calc.py` for `calc.py`), or a name that
    does not exist whose every SEARCH block is found exactly in the allowed file. Otherwise the path as
    written, for `check_path` to judge."""
    only = _only_file(policy, root)
    path = edit.path.strip().replace("\\", "/")
    parts = path_parts(path)
    if only is None or not parts or "/".join(parts) == only or path.startswith(("/", "~")) or ".." in parts:
        return edit.path
    if _too_long(parts):  # before any look at the disk: the stat itself fails on such a name
        return edit.path
    if path_allowed("/".join(parts), policy.allowed_paths) or (root / "/".join(parts)).exists():
        return edit.path
    if parts[-1] == only.rsplit("/", 1)[-1]:
        log.debug("edits.retargeted", path=edit.path, to=only, why="same file name")
        return only
    known = (
        read_text_capped(root / only, root=root)
        if edit.blocks and edit.content is None and edit.patch is None
        else None
    )
    if known is not None:
        text = known.replace("\r\n", "\n")
        if all(b.search.strip() and text.count(b.search) == 1 for b in edit.blocks):
            log.debug("edits.retargeted", path=edit.path, to=only, why="SEARCH found in the allowed file")
            return only
    return edit.path


def _only_file(policy: Policy, root: Path) -> str | None:
    if len(policy.allowed_paths) != 1:
        return None
    entry = "/".join(path_parts(policy.allowed_paths[0].strip()))
    if not entry or is_glob(entry) or (root / entry).is_dir():
        return None
    return entry


def check_path(raw: str, policy: Policy, root: Path) -> str:
    """The edit's path as a clean repo-relative path, or `EditError` naming the rule it breaks."""
    path = raw.strip().replace("\\", "/")
    if not path:
        raise EditError("empty path")
    if "\x00" in path:
        raise EditError("path contains a NUL byte")
    if path.startswith("~"):
        raise EditError("path escapes the repository (home-relative '~')")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise EditError("path escapes the repository (absolute path)")
    parts = path_parts(path)
    if not parts:
        raise EditError("path names the repository root, not a file")
    if ".." in parts:
        raise EditError("path escapes the repository ('..')")
    if any(p.lower() == ".git" for p in parts):
        raise EditError("path is inside .git/")
    too_long = _too_long(parts)
    if too_long:
        raise EditError(too_long)
    rel = "/".join(parts)
    control = control_file_refusal(rel, policy.control_paths)
    if control is not None:
        raise EditError(control)
    refused = refusal(rel, policy.allowed_paths, policy.forbidden_paths, commands=policy.acceptance_commands)
    if refused is not None:
        raise EditError(refused)
    check_filesystem(root, rel)
    return rel


def _too_long(parts: Sequence[str]) -> str | None:
    """Why a path is longer than file systems allow (a name of 255 bytes, a path of 4,096), else None."""
    if any(len(p.encode("utf-8")) > NAME_MAX for p in parts):
        return f"a path component is longer than {NAME_MAX} bytes, more than file systems allow"
    if len("/".join(parts).encode("utf-8")) > PATH_MAX:
        return f"the path is longer than {PATH_MAX:,} bytes, more than file systems allow"
    return None


def control_file_refusal(rel: str, control_paths: Sequence[str]) -> str | None:
    """Why `rel` may not be edited because it is (or is inside) one of the hub's control files, else None.
    Compared without case: on a case-insensitive file system `HUB.YAML` is `hub.yaml`."""
    lowered = rel.lower()
    for entry in control_paths:
        name = entry.strip("/").lower()
        if name and (lowered == name or lowered.startswith(name + "/")):
            return (
                f"path is the hub's control file {entry!r}: the hub's configuration, prompts, rules and "
                "hand-off folder decide how your work is checked, so no task may edit them, whatever "
                "allowed_paths says; change only the task's files"
            )
    return None


def check_filesystem(root: Path, rel: str) -> None:
    current = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        current = current / part
        if current.is_symlink():
            target = os.path.realpath(current)
            shown = "/".join(parts[: i + 1])
            if not _inside(root, Path(target)):
                raise EditError(f"path escapes the repository through the symlink {shown} -> {target}")
            raise EditError(f"path goes through the symlink {shown}; edits are never written through links")
        if not current.exists():
            break
        if i < len(parts) - 1 and not current.is_dir():
            raise EditError(f"{'/'.join(parts[: i + 1])} is a file, not a folder")
    if not _inside(root, Path(os.path.realpath(root / rel))):
        raise EditError("path escapes the repository")


def _inside(root: Path, target: Path) -> bool:
    return target == root or root in target.parents


def path_allowed(path: str, entries: Sequence[str]) -> bool:
    """Whether a clean repo-relative path falls under any entry (file, directory or glob)."""
    return first_match(path, entries) is not None
