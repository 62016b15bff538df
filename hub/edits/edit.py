"""What an edit is: `FileEdit` (one file's new content, search/replace blocks, unified-diff hunks or a
delete), `SearchReplace` and `ParseResult`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchReplace:
    """One search/replace block: `search` is the exact text to find ("" creates a missing file)."""

    search: str
    replace: str


@dataclass(frozen=True)
class FileEdit:
    """An edit of one file: a whole new `content`, search/replace `blocks` applied after it, `delete`, or
    a unified diff's hunks (`patch`, from its first `@@` line; applied by `git apply` in `hub.edits.patch`).
    `others`: earlier whole versions the same answer gave (a new version, then the original "for
    reference"): `hub.edits.apply` takes the one version that changes the file, else the last."""

    path: str
    content: str | None = None
    blocks: tuple[SearchReplace, ...] = ()
    delete: bool = False
    patch: str | None = None
    others: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParseResult:
    """The edits found in a model's answer, and why anything in it could not become an edit.
    `truncated`: the server cut the answer off, so none of it is an edit (`problems` says why)."""

    edits: tuple[FileEdit, ...]
    problems: tuple[str, ...]
    truncated: bool = False
