"""Model text -> file edits, and the one place that writes them.

    parse_edits(text)            model answer -> ParseResult(edits, problems)        (hub.edits.parse, pure)
    apply_blocks / feedback_for  search/replace matching and the retry message      (hub.edits.match, pure)
    judge                        the pre-write check of one planned file            (hub.edits.check, pure)
    apply_patch                  a unified diff's hunks, applied by git apply       (hub.edits.patch)
    plan_edits(edits, policy)    -> Plan: what would be written, refused, or failed (reads files only)
    apply_edits(edits, policy)   -> ApplyResult: the plan, written                  (the only writer)
    apply_answer(text, policy)   the implementer's path: a cut-off answer is refused whole

Safety: an edit is written only inside `Policy.allowed_paths` and never inside `forbidden_paths`.
Refused, with nothing of that edit written: one of the hub's control files (`hub.safety.trust`: `_handoff/`,
`hub.yaml`, `prompts/`, `sgconfig.yml`, its rule folders), whatever `allowed_paths` says; a path that escapes the repository (`..`, absolute, `~`,
a symlink anywhere on the way, even one pointing inside the repository, since the link's target is
what gets written), a path into `.git/`, a binary payload, a change over `max_diff_lines`, a delete
without `delete_allowed`, and whatever `hub.edits.check.judge` refuses (an emptied file, a broken parse,
a destructive whole file, elision placeholders, stray markers). When exactly one file is allowed, an edit
naming it under another folder, or naming a missing file whose every SEARCH block matches it exactly, goes
to that file (aider reads these the same way). Each file is written atomically (temp file in its folder, fsync,
`os.replace`) as UTF-8, keeping its newline style (LF or CRLF, by majority), BOM, final-newline-or-not
and mode. Diffs are computed on LF text.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from hub.core.atomic import write_bytes_atomic
from hub.core.errors import EditError
from hub.edits.check import judge
from hub.edits.match import BlockFailure, apply_blocks, diff_stats, feedback_for, unified_diff
from hub.edits.parse import FileEdit, ParseResult, SearchReplace, parse_edits, render_edit
from hub.safety.trust import CONTROL_FILES

__all__ = [
    "OUTPUT_TRUNCATED",
    "AppliedEdit",
    "ApplyResult",
    "BlockFailure",
    "FileEdit",
    "ParseResult",
    "Plan",
    "Policy",
    "Refusal",
    "SearchReplace",
    "answer_feedback",
    "apply_answer",
    "apply_blocks",
    "apply_edits",
    "check_files_per_reply",
    "check_reply",
    "control_file_refusal",
    "diff_stats",
    "feedback_for",
    "is_binary",
    "parse_edits",
    "path_allowed",
    "plan_edits",
    "render_edit",
    "unified_diff",
]

log = structlog.get_logger(__name__)


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
            rel = _check_path(_retarget(edit, policy, root), policy, root)
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
            log.debug("edit_refused_before_write", path=rel, reason=why)
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


OUTPUT_TRUNCATED = (
    "output_truncated: the answer was cut off at the token limit, so none of it was applied (a "
    "half-written change is worse than none). Answer with SEARCH/REPLACE blocks that quote only the "
    "lines that change instead of whole files (a person can raise roles.implementer.num_predict in hub.yaml)"
)


# A search/replace block where it was written: (repo-relative path, SEARCH, REPLACE).
Block = tuple[str, str, str]


def apply_answer(
    text: str,
    policy: Policy,
    *,
    default_path: str | None = None,
    done_reason: str = "",
    written: frozenset[Block] = frozenset(),
) -> tuple[ParseResult, ApplyResult]:
    """The implementer's path from a model's answer to written files. An answer the server cut off at
    its token limit (`done_reason` "length") is refused whole: its complete first blocks could land
    while the rest of the change never comes. Blocks in `written` (an earlier answer of this attempt
    wrote them) that the answer sends again are left out: their SEARCH text is gone from the file, so
    applied twice they would fail and fail the change with them."""
    if done_reason == "length":
        return ParseResult((), (OUTPUT_TRUNCATED,)), ApplyResult((), (), ())
    parsed = parse_edits(text, default_path=default_path)
    if written:
        parsed = _without(parsed, written, policy)
    if policy.max_files is not None:
        check_files_per_reply(parsed.edits, policy.max_files)
    return parsed, apply_edits(parsed.edits, policy)


def written_blocks(parsed: ParseResult, result: ApplyResult, policy: Policy) -> frozenset[Block]:
    """The search/replace blocks of an answer that are in the files now: those of an edit that was
    written, but for the ones that failed."""
    root = policy.repo_root.resolve()
    changed = set(result.changed_files)
    failed = {(f.path, f.search) for f in result.failed_blocks}
    found: set[Block] = set()
    for edit in parsed.edits:
        rel = _target(edit, policy, root) if edit.blocks else None
        if rel is not None and rel in changed:
            found |= {(rel, b.search, b.replace) for b in edit.blocks if (rel, b.search) not in failed}
    return frozenset(found)


def _without(parsed: ParseResult, written: frozenset[Block], policy: Policy) -> ParseResult:
    root = policy.repo_root.resolve()
    edits = []
    for edit in parsed.edits:
        if edit.blocks:
            rel = _target(edit, policy, root) or ""
            blocks = tuple(b for b in edit.blocks if (rel, b.search, b.replace) not in written)
            if len(blocks) < len(edit.blocks):
                log.info("edits.sent_again", path=rel, blocks=len(edit.blocks) - len(blocks))
                if not blocks and edit.content is None and edit.patch is None and not edit.delete:
                    continue  # nothing left of this edit but what is already written
                edit = replace(edit, blocks=blocks)
        edits.append(edit)
    return replace(parsed, edits=tuple(edits))


def not_made_good(first: ApplyResult, retry: ParseResult, again: ApplyResult, policy: Policy) -> list[str]:
    """What the first answer failed to write that the answer to the feedback did not write either. Per
    file: a whole new file written covers it all; otherwise the retry must have written at least as many
    blocks (or edits) there as failed the first time. A model that fixes one of two failed blocks and
    says nothing of the other would otherwise pass half a change to review as if whole."""
    root = policy.repo_root.resolve()
    owed: dict[str, int] = {}
    for failure in first.failed_blocks:
        owed[failure.path] = owed.get(failure.path, 0) + 1
    for refusal in first.refused:
        if refusal.retry:
            owed[refusal.path] = owed.get(refusal.path, 0) + 1
    if not owed:
        return []
    changed = set(again.changed_files)
    failed = {(f.path, f.search) for f in again.failed_blocks}
    paid: dict[str, int] = {}
    whole: set[str] = set()
    for edit in retry.edits:
        rel = _target(edit, policy, root)
        if rel is None or rel not in changed:
            continue
        if edit.content is not None or edit.patch is not None or edit.delete:
            whole |= {rel, edit.path}
        written = sum(1 for b in edit.blocks if (rel, b.search) not in failed)
        for key in {rel, edit.path}:  # a refusal names the path as the answer wrote it
            paid[key] = paid.get(key, 0) + max(written, 1)
    return [
        f"{path}: {count - paid.get(path, 0)} of the {count} edit(s) refused the first time were not sent "
        "again"
        for path, count in owed.items()
        if path not in whole and paid.get(path, 0) < count
    ]


def answer_feedback(parsed: ParseResult, result: ApplyResult) -> str:
    """The message sent to the model (once) about what of its answer was refused and how to fix it:
    a cut-off answer, content the pre-write check refused, SEARCH blocks that did not match. "" when
    there is nothing it could fix by answering again."""
    parts = []
    if OUTPUT_TRUNCATED in parsed.problems:
        parts.append(f"Your answer was NOT applied. {OUTPUT_TRUNCATED}.")
    retry = [r for r in result.refused if r.retry]
    if retry:
        written = ", ".join(result.changed_files)
        parts.append(
            f"{len(retry)} edit(s) were refused and NOT written"
            + (f" (written: {written})" if written else "")
            + ". For each, send it again, fixed:"
        )
        parts += [f"- {r.path}: {r.reason}" for r in retry]
    if result.failed_blocks:
        parts.append(feedback_for(result.failed_blocks))
    if parts and not result.failed_blocks:
        # The prompt asks for whole files; the advice above may be the model's first sight of blocks.
        parts.append(SEARCH_REPLACE_FORMAT)
    return "\n\n".join(parts) + ("\n" if parts else "")


PARTIAL_CHANGE = (
    "partial_change: part of the change was written, but these edits were still not applied after the "
    "feedback round, so the change is incomplete: "
)


def unapplied(parsed: ParseResult, result: ApplyResult) -> list[str]:
    """The parts of an answer that were not written (refused edits, SEARCH blocks that did not match,
    blocks the parser dropped), each with its reason; [] when all of it was applied."""
    missing = [f"{r.path}: {r.reason}" for r in result.refused]
    missing += [f"{f.path}: a SEARCH block did not match ({f.reason})" for f in result.failed_blocks]
    missing += list(parsed.problems)
    return missing


SEARCH_REPLACE_FORMAT = """A SEARCH/REPLACE block changes only the lines it quotes:

path/to/file.py
<<<<<<< SEARCH
the lines to change, copied exactly from the file
=======
the new lines
>>>>>>> REPLACE"""


def apply_edits(edits: Sequence[FileEdit], policy: Policy) -> ApplyResult:
    """Plan the edits, then write each planned file atomically; the result says what happened to each."""
    plan = plan_edits(edits, policy)
    root = policy.repo_root.resolve()
    failed_paths: dict[str, str] = {}
    for write in plan.writes:
        try:
            # Checked again at write time: the tree may have changed since the plan read it.
            _check_filesystem(root, write.path)
            _write(root / write.path, write.data, write.mode)
        except (EditError, OSError) as error:
            failed_paths[write.path] = f"write failed: {error}"
            log.debug("edit_write_failed", path=write.path, error=str(error))
    applied = tuple(a for a in plan.applied if a.path not in failed_paths)
    refused = plan.refused + tuple(Refusal(path, reason) for path, reason in failed_paths.items())
    result = ApplyResult(applied, refused, plan.failed_blocks, plan.unchanged)
    log.debug(
        "edits_applied",
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
        from hub.edits.patch import apply_patch

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
        text = edit.content.replace("\r\n", "\n")
        if state.original is not None and not state.original.endswith("\n") and text.endswith("\n"):
            text = text[:-1]
    if edit.blocks:
        return apply_blocks(rel, text, edit.blocks)
    return text, []


def is_binary(text: str) -> bool:
    """NUL anywhere, or more than 10% control characters other than tab, newline, CR, form feed, ESC."""
    if "\x00" in text:
        return True
    if not text:
        return False
    control = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\n\r\f\x1b") or ch == "\ufffd")
    return control > len(text) // 10


def _target(edit: FileEdit, policy: Policy, root: Path) -> str | None:
    """The repo-relative path an edit writes, as `plan_edits` finds it; None when it is refused."""
    try:
        return _check_path(_retarget(edit, policy, root), policy, root)
    except EditError:
        return None


def _retarget(edit: FileEdit, policy: Policy, root: Path) -> str:
    """The one allowed file, for an edit whose path misses it in a way with one reading (aider accepts
    these too): the same file name under another folder (`src/calc.py` for `calc.py`), or a name that
    does not exist whose every SEARCH block is found exactly in the allowed file. Otherwise the path as
    written, for `_check_path` to judge."""
    only = _only_file(policy, root)
    path = edit.path.strip().replace("\\", "/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if only is None or not parts or "/".join(parts) == only or path.startswith(("/", "~")) or ".." in parts:
        return edit.path
    if path_allowed("/".join(parts), policy.allowed_paths) or (root / "/".join(parts)).exists():
        return edit.path
    if parts[-1] == only.rsplit("/", 1)[-1]:
        log.debug("edit_retargeted", path=edit.path, to=only, why="same file name")
        return only
    if edit.blocks and edit.content is None and edit.patch is None and (root / only).is_file():
        text = (root / only).read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        if all(b.search.strip() and text.count(b.search) == 1 for b in edit.blocks):
            log.debug("edit_retargeted", path=edit.path, to=only, why="SEARCH found in the allowed file")
            return only
    return edit.path


def _only_file(policy: Policy, root: Path) -> str | None:
    if len(policy.allowed_paths) != 1:
        return None
    entry = "/".join(p for p in policy.allowed_paths[0].strip().split("/") if p not in ("", "."))
    if not entry or any(c in entry for c in "*?[") or (root / entry).is_dir():
        return None
    return entry


def _check_path(raw: str, policy: Policy, root: Path) -> str:
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
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        raise EditError("path names the repository root, not a file")
    if ".." in parts:
        raise EditError("path escapes the repository ('..')")
    if any(p.lower() == ".git" for p in parts):
        raise EditError("path is inside .git/")
    if any(len(p.encode("utf-8")) > 255 for p in parts):
        raise EditError("a path component is longer than 255 bytes, more than file systems allow")
    rel = "/".join(parts)
    control = control_file_refusal(rel, policy.control_paths)
    if control is not None:
        raise EditError(control)
    forbidden = _first_match(rel, policy.forbidden_paths)
    if forbidden is not None:
        raise EditError(f"path is inside forbidden_paths ({forbidden!r})")
    if _first_match(rel, policy.allowed_paths) is None:
        shown = ", ".join(policy.allowed_paths) if policy.allowed_paths else "none"
        raise EditError(f"path is not inside allowed_paths ({shown})")
    _check_filesystem(root, rel)
    return rel


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


def check_reply(text: str, max_chars: int) -> None:
    """Refuse a model reply too large to parse and apply safely, before anything reads it whole."""
    if len(text) > max_chars:
        raise EditError(
            f"the reply is {len(text):,} characters, over the limit of {max_chars:,} "
            "(limits.max_reply_chars): answer with only the files you change"
        )


def check_files_per_reply(edits: Sequence[FileEdit], max_files: int) -> None:
    """Refuse a reply touching more files than one change may, before anything is written."""
    paths = {e.path.strip() for e in edits}
    if len(paths) > max_files:
        raise EditError(
            f"the reply edits {len(paths)} files, over the limit of {max_files} "
            "(limits.max_changed_files): change fewer files"
        )


def _check_filesystem(root: Path, rel: str) -> None:
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
    return _first_match(path, entries) is not None


def _first_match(path: str, entries: Sequence[str]) -> str | None:
    for entry in entries:
        pattern = "/".join(p for p in entry.strip().replace("\\", "/").split("/") if p not in ("", "."))
        if not pattern:
            if entry.strip() in (".", "./", "/"):
                return entry
            continue
        if any(ch in pattern for ch in "*?["):
            target = path if "/" in pattern else path.rsplit("/", 1)[-1]
            if _glob_regex(pattern).match(target) or ("/" not in pattern and _under_glob(path, pattern)):
                return entry
        elif path == pattern or path.startswith(pattern + "/"):
            return entry
    return None


def _under_glob(path: str, pattern: str) -> bool:
    """A slash-free glob also matches a folder anywhere on the path (`build*` covers `build1/x`)."""
    regex = _glob_regex(pattern)
    return any(regex.match(part) for part in path.split("/")[:-1])


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
