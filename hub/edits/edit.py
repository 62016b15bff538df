"""What an edit is: `FileEdit` (one file's new content, search/replace blocks, unified-diff hunks or a
delete), `SearchReplace`, `ParseResult`; and `render_edit`, an edit in the format `hub.edits.parse` reads."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SearchReplace:
    """One search/replace block: `search` is the exact text to find ("" creates a missing file)."""

    search: str
    replace: str


@dataclass(frozen=True)
class FileEdit:
    """An edit of one file: a whole new `content`, search/replace `blocks` applied after it, `delete`, or
    a unified diff's hunks (`patch`, from its first `@@` line; applied by `git apply` in `hub.edits.patch`)."""

    path: str
    content: str | None = None
    blocks: tuple[SearchReplace, ...] = ()
    delete: bool = False
    patch: str | None = None


@dataclass(frozen=True)
class ParseResult:
    """The edits found in a model's answer, and why anything in it could not become an edit.
    `truncated`: the server cut the answer off, so none of it is an edit (`problems` says why)."""

    edits: tuple[FileEdit, ...]
    problems: tuple[str, ...]
    truncated: bool = False


def render_edit(edit: FileEdit) -> str:
    """An edit in the format `parse_edits` reads (whole file or search/replace), for prompts and tests."""
    if edit.delete:
        return f"DELETE: {edit.path}\n"
    parts = [edit.path]
    if edit.content is not None:
        longest = max((len(m) for m in re.findall(r"^[ \t]*(`{3,})", edit.content, re.MULTILINE)), default=2)
        fence = "`" * max(3, longest + 1)
        body = edit.content if not edit.content or edit.content.endswith("\n") else edit.content + "\n"
        parts.append(f"{fence}\n{body}{fence}")
    for block in edit.blocks:
        parts.append(f"<<<<<<< SEARCH\n{block.search}=======\n{block.replace}>>>>>>> REPLACE")
    return "\n".join(parts) + "\n"
