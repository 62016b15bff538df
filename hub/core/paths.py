"""Repository-relative path text, spelled one way: the parts of a path, a path in its clean form, and
whether an entry of `allowed_paths` (or a scope) is a glob. Pure: nothing here touches the disk."""

from __future__ import annotations


def path_parts(path: str) -> list[str]:
    """The parts between `/`s, without the empty and `.` ones: `./src//a.py` -> `["src", "a.py"]`."""
    return [part for part in path.split("/") if part not in ("", ".")]


def clean_path(path: str) -> str:
    """`\\` read as `/`, then the empty and `.` parts dropped: `.\\src/./a.py` -> `src/a.py`; `.` -> ``."""
    return "/".join(path_parts(path.replace("\\", "/")))


def is_glob(pattern: str) -> bool:
    """Whether the entry holds a glob character (`*`, `?`, `[`), so it names files by pattern."""
    return any(c in pattern for c in "*?[")
