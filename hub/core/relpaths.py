"""Repository-relative path text, spelled one way: the parts of a path, a path in its clean form, whether
an entry of `allowed_paths` is a glob, and the one matcher that decides whether a task may write a path
(`refusal`). Pure: nothing here touches the disk."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence


def path_parts(path: str) -> list[str]:
    """The parts between `/`s, without the empty and `.` ones: `./src//a.py` -> `["src", "a.py"]`."""
    return [part for part in path.split("/") if part not in ("", ".")]


def clean_path(path: str) -> str:
    """`\\` read as `/`, then the empty and `.` parts dropped: `.\\src/./a.py` -> `src/a.py`; `.` -> ``."""
    return "/".join(path_parts(path.replace("\\", "/")))


def is_glob(pattern: str) -> bool:
    """Whether the entry holds a glob character (`*`, `?`, `[`), so it names files by pattern."""
    return any(c in pattern for c in "*?[")


# --- the one path matcher ---------------------------------------------------------------------------------
# Every question about allowed and forbidden paths is answered here: the edit layer (hub.edits.policy),
# the clean-up after an acceptance command and the checkpoint (hub.repo.gitops), and the diff breaker
# that reads what a task branch changed (hub.state.breakers). Two readings of the same glob once let an
# edit be written that no checkpoint committed (issue 28).

# Files that change how git, CI or coding agents behave: a task may change one only when its
# `allowed_paths` names it exactly (not through `.`, a folder above it or a glob). Folders at the root
# (everything under them); names at any depth (git and agents read nested copies too).
BEHAVIOUR_FOLDERS = (".github/workflows", ".claude", ".cursor", ".husky", ".githooks")
BEHAVIOUR_ROOT_FILES = (
    ".gitmodules",
    ".gitlab-ci.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    ".overcommit.yml",
    ".cursorrules",
    ".windsurfrules",
    ".mcp.json",
)
BEHAVIOUR_NAMES = (".gitattributes", "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md")


def behaviour_file(path: str) -> str | None:
    """The entry of the behaviour files `path` falls under (compared without case, as a
    case-insensitive file system would), else None."""
    lowered = clean_path(path).lower()
    for folder in BEHAVIOUR_FOLDERS:
        if lowered == folder.lower() or lowered.startswith(folder.lower() + "/"):
            return folder + "/"
    if lowered in (name.lower() for name in BEHAVIOUR_ROOT_FILES):
        return lowered
    name = lowered.rsplit("/", 1)[-1]
    return next((n for n in BEHAVIOUR_NAMES if n.lower() == name), None)


def named_exactly(path: str, entries: Sequence[str]) -> bool:
    """Whether a non-glob entry names `path` itself, or a behaviour folder it lies in (at or below the
    folder's own level: `.claude` names `.claude/settings.json`, `.` and `.github` do not)."""
    rel = clean_path(path)
    kind = behaviour_file(rel)
    for entry in entries:
        name = clean_path(entry.strip())
        if not name or is_glob(name):
            continue
        if name == rel:
            return True
        folder = kind is not None and kind.endswith("/") and rel.startswith(name + "/")
        if folder and kind is not None and (name.lower() + "/").startswith(kind.lower()):
            return True
    return False


def first_match(path: str, entries: Sequence[str]) -> str | None:
    """The first entry (file, folder or glob) a clean repo-relative path falls under, else None.

    A folder entry covers everything under it; `.` covers everything. In a glob `*` and `?` stay within
    one name, `[...]`/`[!...]` is a set, `**` crosses folders (`src/**/*.py` covers `src/y.py` too), a
    glob without a slash is matched against each name on the path (`*.md` at any depth, `build?` covers
    `build7/out/f.o`), and a glob that matches a folder covers everything under it."""
    for entry in entries:
        pattern = clean_path(entry.strip())
        if not pattern:
            if entry.strip() in (".", "./", "/"):
                return entry
            continue
        if is_glob(pattern):
            target = path if "/" in pattern else path.rsplit("/", 1)[-1]
            if _glob_regex(pattern).match(target) or ("/" not in pattern and _under_glob(path, pattern)):
                return entry
        elif path == pattern or path.startswith(pattern + "/"):
            return entry
    return None


def refusal(
    path: str, allowed: Sequence[str], forbidden: Sequence[str] = (), control: Sequence[str] = ()
) -> str | None:
    """Why a task may not write `path` (a clean repo-relative path), else None: one of the hub's control
    files, inside `forbidden` (which wins), a behaviour file `allowed` does not name exactly, or outside
    `allowed`. Control names are compared without case."""
    lowered = path.lower()
    for entry in control:
        name = entry.strip("/").lower()
        if name and (lowered == name or lowered.startswith(name + "/")):
            return f"path is the hub's control file {entry!r}"
    hit = first_match(path, forbidden)
    if hit is not None:
        return f"path is inside forbidden_paths ({hit!r})"
    if first_match(path, allowed) is None:
        shown = ", ".join(allowed) if allowed else "none"
        return f"path is not inside allowed_paths ({shown})"
    kind = behaviour_file(path)
    if kind is not None and not named_exactly(path, allowed):
        return (
            f"path is {kind!r}, which changes how git, CI or coding agents behave: a task may change it only "
            "when allowed_paths names it exactly (not through '.', a folder above it or a glob)"
        )
    return None


def _under_glob(path: str, pattern: str) -> bool:
    """A slash-free glob also matches a folder anywhere on the path (`build*` covers `build1/x`)."""
    regex = _glob_regex(pattern)
    return any(regex.match(part) for part in path.split("/")[:-1])


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            close = pattern.index("]", i + 2)
            body = pattern[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # A glob naming a folder allows everything under it, like a plain directory entry.
    return re.compile("".join(out) + "(?:/.*)?$")
