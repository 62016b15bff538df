"""The one place that writes edits: `plan_edits` decides every edit without writing (new contents,
diffs, refusals, failed blocks), `apply_edits` writes the plan.

A path is checked against the `hub.edits.policy.Policy` first. Refused then, with nothing of that edit
written: a binary payload, a change over `max_diff_lines`, a delete without `delete_allowed`, a file given
both as a unified diff and another kind, and whatever `hub.edits.check.judge` refuses (an emptied file, a
broken parse, a destructive whole file, elision placeholders, stray markers). Each file is written
atomically (temp file in its folder, fsync, `os.replace`) as UTF-8, keeping its newline style (LF or CRLF,
by majority), BOM, final-newline-or-not and mode; at write time its path is checked again. Diffs are
computed on LF text.
"""

from __future__ import annotations

import codecs
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hub.core.atomic import write_bytes_atomic
from hub.core.errors import EditError
from hub.core.log import get_logger
from hub.edits.check import judge
from hub.edits.edit import FileEdit
from hub.edits.match import BlockFailure, apply_blocks, diff_stats, unified_diff
from hub.edits.patch import apply_patch
from hub.edits.policy import Policy, check_filesystem, check_path, retarget

log = get_logger(__name__)


@dataclass(frozen=True)
class AppliedEdit:
    """An edit that was (in a plan: would be) written, as a unified diff with a/ b/ prefixes."""

    path: str
    diff: str
    added: int
    removed: int
    created: bool
    deleted: bool = False


@dataclass(frozen=True)
class Refusal:
    """An edit of which nothing was written, and why. `retry`: the content was refused (the pre-write
    check, a diff that does not apply), which the model can fix by answering again, so it is fed back
    once; a path or constraint refusal is not."""

    path: str
    reason: str
    retry: bool = False


class _Unfit(EditError):
    """The edit's content, not its path, was refused."""


@dataclass(frozen=True)
class ApplyResult:
    """What happened to each edit: applied, refused, its blocks that failed, or no change (`unchanged`).
    An edit whose blocks partly failed is in `applied` (the blocks that matched) and in `failed_blocks`."""

    applied: tuple[AppliedEdit, ...]
    refused: tuple[Refusal, ...]
    failed_blocks: tuple[BlockFailure, ...]
    unchanged: tuple[str, ...] = ()

    @property
    def changed_files(self) -> tuple[str, ...]:
        """Paths written, in order, each once."""
        return tuple(dict.fromkeys(a.path for a in self.applied))

    def not_applied(self) -> list[str]:
        """Each refused edit and each SEARCH block that did not match, as `path: reason`."""
        missing = [f"{r.path}: {r.reason}" for r in self.refused]
        return missing + [f"{f.path}: a SEARCH block did not match ({f.reason})" for f in self.failed_blocks]


@dataclass(frozen=True)
class _Write:
    path: str
    data: bytes | None  # None deletes the file
    mode: int | None  # None: a new file, whose mode the umask decides


@dataclass(frozen=True)
class Plan(ApplyResult):
    """What `apply_edits` would do: the ApplyResult it would return, plus the bytes it would write."""

    writes: tuple[_Write, ...] = field(default=(), repr=False)

    def result(self) -> ApplyResult:
        return ApplyResult(self.applied, self.refused, self.failed_blocks, self.unchanged)


@dataclass
class _File:
    """One file as found on disk, and its text as planned so far (None: absent or deleted)."""

    original: str | None
    current: str | None
    newline: str = "\n"
    bom: bool = False
    mode: int | None = None


def plan_edits(edits: Sequence[FileEdit], policy: Policy) -> Plan:
    """Decide every edit without writing: new contents, diffs, refusals, failed blocks. Reads files."""
    root = policy.repo_root.resolve()
    files: dict[str, _File] = {}
    applied: list[AppliedEdit] = []
    refused: list[Refusal] = []
    failed: list[BlockFailure] = []
    unchanged: list[str] = []
    for edit in edits:
        try:
            rel = check_path(retarget(edit, policy, root), policy, root)
            state = files.get(rel) or _load(root / rel)
            new, failures = _new_text(edit, rel, state, policy)
        except EditError as refusal:
            refused.append(Refusal(edit.path, str(refusal), retry=isinstance(refusal, _Unfit)))
            continue
        failed.extend(failures)
        if new == state.current:
            if not failures:
                unchanged.append(rel)
            continue
        diff = unified_diff(
            rel, state.current or "", new or "", created=state.current is None, deleted=new is None
        )
        added, removed = diff_stats(diff)
        if policy.max_diff_lines is not None and added + removed > policy.max_diff_lines:
            refused.append(
                Refusal(
                    edit.path,
                    f"change of {added + removed} lines is over max_diff_lines={policy.max_diff_lines}",
                )
            )
            continue
        why = judge(
            rel,
            state.current,
            new,
            whole_file=edit.content is not None,  # blocks after a whole file do not make it less whole
            delete_allowed=policy.delete_allowed,
        )
        if why is not None:
            log.debug("edits.refused_before_write", path=rel, reason=why)
            refused.append(Refusal(edit.path, why, retry=True))
            continue
        applied.append(
            AppliedEdit(rel, diff, added, removed, created=state.current is None, deleted=new is None)
        )
        state.current = new
        files[rel] = state
    writes = tuple(
        _Write(rel, None if f.current is None else _encode(f), f.mode)
        for rel, f in files.items()
        if f.current != f.original
    )
    return Plan(tuple(applied), tuple(refused), tuple(failed), tuple(unchanged), writes)


def apply_edits(edits: Sequence[FileEdit], policy: Policy) -> ApplyResult:
    """Plan the edits, then write each planned file atomically; the result says what happened to each."""
    plan = plan_edits(edits, policy)
    root = policy.repo_root.resolve()
    failed_paths: dict[str, str] = {}
    for write in plan.writes:
        try:
            # Checked again at write time: the tree may have changed since the plan read it.
            check_filesystem(root, write.path)
            _write(root / write.path, write.data, write.mode)
        except (EditError, OSError) as error:
            failed_paths[write.path] = f"write failed: {error}"
            log.debug("edits.write_failed", path=write.path, error=str(error))
    applied = tuple(a for a in plan.applied if a.path not in failed_paths)
    refused = plan.refused + tuple(Refusal(path, reason) for path, reason in failed_paths.items())
    result = ApplyResult(applied, refused, plan.failed_blocks, plan.unchanged)
    log.debug(
        "edits.applied",
        files=list(result.changed_files),
        refused=[r.path for r in refused],
        failed_blocks=len(plan.failed_blocks),
    )
    return result


def _new_text(
    edit: FileEdit, rel: str, state: _File, policy: Policy
) -> tuple[str | None, list[BlockFailure]]:
    if edit.delete:
        if not policy.delete_allowed:
            raise EditError("deleting files is not allowed (constraints.delete_allowed is false)")
        if state.current is None:
            raise EditError("cannot delete: the file does not exist")
        return None, []
    if edit.patch is not None:
        if edit.content is not None or edit.blocks:
            # Applying one kind would silently drop the other: half the change would land.
            raise _Unfit(
                "the answer gives this file both as a unified diff and as a whole file or SEARCH/REPLACE "
                "blocks; send one kind of edit per file"
            )
        if is_binary(edit.patch):
            raise EditError("binary payload (NUL bytes or mostly control characters)")

        try:
            return apply_patch(rel, state.current, edit.patch), []
        except EditError as error:
            raise _Unfit(str(error)) from None
    if edit.content is None and not edit.blocks:
        raise EditError("the edit holds neither content nor search/replace blocks")
    payloads = ([edit.content] if edit.content is not None else []) + [b.replace for b in edit.blocks]
    if any(is_binary(p) for p in payloads):
        raise EditError("binary payload (NUL bytes or mostly control characters)")
    text = state.current
    if edit.content is not None:
        text = _version(edit, state).replace("\r\n", "\n")
        # The file keeps its own last-line ending: a whole file sent as a JSON string (agent mode's
        # write_file) rarely ends in one, a fenced block always does.
        if state.original is not None and not state.original.endswith("\n") and text.endswith("\n"):
            text = text[:-1]
        elif text and not text.endswith("\n") and (state.original is None or state.original.endswith("\n")):
            text += "\n"
    if edit.blocks:
        return apply_blocks(rel, text, edit.blocks)
    return text, []


def _version(edit: FileEdit, state: _File) -> str:
    """The whole version of the file to write when the answer gave several: the only one that differs
    from the file (the others repeat it "for reference"), else the last (a correction)."""
    content = edit.content or ""
    if not edit.others:
        return content
    current = (state.current or "").rstrip("\n")
    changes = [v for v in (*edit.others, content) if v.replace("\r\n", "\n").rstrip("\n") != current]
    if len(changes) == 1:
        return changes[0]
    log.debug("edits.versions", path=edit.path, versions=len(edit.others) + 1, changes=len(changes))
    return content


def is_binary(text: str) -> bool:
    """NUL anywhere, or more than 10% control characters other than tab, newline, CR, form feed, ESC."""
    if "\x00" in text:
        return True
    if not text:
        return False
    control = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\n\r\f\x1b") or ch == "\ufffd")
    return control > len(text) // 10


def _load(target: Path) -> _File:
    if not target.exists():
        return _File(original=None, current=None)
    if not target.is_file():
        raise EditError("not a regular file")
    raw = target.read_bytes()
    bom = raw.startswith(codecs.BOM_UTF8)
    try:
        text = raw[len(codecs.BOM_UTF8) if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError:
        raise EditError("the existing file is not UTF-8 text") from None
    if "\x00" in text:
        raise EditError("the existing file is binary")
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"
    text = text.replace("\r\n", "\n")
    return _File(text, text, newline, bom, stat.S_IMODE(target.stat().st_mode))


def _encode(state: _File) -> bytes:
    text = state.current or ""
    if state.newline != "\n":
        text = text.replace("\n", state.newline)
    return (codecs.BOM_UTF8 if state.bom else b"") + text.encode("utf-8")


def _write(target: Path, data: bytes | None, mode: int | None) -> None:
    if data is None:
        target.unlink()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    # New files get the umask's mode, as from any editor; existing files keep theirs.
    write_bytes_atomic(target, data, mode)
