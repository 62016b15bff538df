"""The built-in tools of agent mode: read, list, search and outline the task's files, write or edit one,
run the acceptance commands, scan with the rules, and say `done`.

Reads stay inside the task's worktree and see only what `git ls-files` lists there (tracked, or new and
not ignored): never `.git`, the hub's control files (`hub.yaml`, `prompts/`, `_handoff/`, the rule
folders), an ignored file (a `.env`), or anything a link points at: no component of a path is followed if it is a
link (`hub.core.files.open_under`), since git's index still names `src/x.py` once `src` is a link. Every write goes through the same
path as an edit-mode answer (`hub.edits.apply.apply_edits`): the allowed-paths policy, the control-file
refusal and the pre-write check, with the reason sent back to the model when it is refused. What a tool
answers is capped here and redacted by the loop (`hub.agent.loop`) before the model sees it.
"""

from __future__ import annotations

import fnmatch
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub.core.errors import EditError
from hub.core.files import read_capped
from hub.core.log import get_logger
from hub.core.relpaths import is_glob, path_parts
from hub.core.templates import fragment
from hub.edits.answer import apply_answer
from hub.edits.apply import ApplyResult, apply_edits
from hub.edits.edit import FileEdit, ParseResult, SearchReplace
from hub.edits.feedback import answer_feedback, blocks_failed
from hub.edits.parse import parse_edits
from hub.edits.policy import Policy, control_file_refusal, path_allowed, resolve_target
from hub.review.code import outline, render_outline

log = get_logger(__name__)

READ_LINES = 400  # lines read_file shows at once, unless asked for a range
MAX_READ_BYTES = 1024 * 1024  # larger files are shown up to here
LIST_ENTRIES = 300
SEARCH_HITS = 60
SEARCH_FILE_BYTES = 512 * 1024  # larger files are searched by name only
GIT_TIMEOUT = 30.0


class ToolRefused(Exception):
    """A call the tool cannot carry out as asked; the message goes back to the model, which can fix it."""


@dataclass(frozen=True)
class Refused:
    """Why a write was refused, for the loop to tell a refusal repeated in a row (hub.agent.loop):
    `reason`, what makes two refusals the same one, and `advice`, what the model should do instead
    (empty: the loop's general words)."""

    reason: str
    advice: str = ""


@dataclass(frozen=True)
class Tool:
    """One tool the model may call: its name, what it does, its arguments' JSON schema, and the function
    that answers a call with the text the model is sent back."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[Mapping[str, Any]], str] = field(compare=False, repr=False)

    def spec(self) -> dict[str, Any]:
        """The tool as Ollama's and the OpenAI API's `tools` take it."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def schema(properties: Mapping[str, Mapping[str, Any]], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required)}


STR = {"type": "string"}
INT = {"type": "integer", "minimum": 1}


@dataclass
class Workspace:
    """The task's worktree as the tools see it, and what they may do there.

    `run_tests` runs the acceptance commands (the phase's, in the sandbox) and returns their report;
    `scan` scans the named files with the rules; `on_write` is told every write (for the provenance and
    the attempt's list of written files)."""

    root: Path
    policy: Policy
    run_tests: Callable[[], str] | None = None
    scan: Callable[[list[str]], str] | None = None
    on_write: Callable[[ParseResult, ApplyResult], None] = lambda parsed, result: None
    trust_root: Path | None = None
    written: list[str] = field(default_factory=list)
    version: int = 0  # goes up with every write: the same read after a write is not a repeat
    refused: Refused | None = None  # the last write's refusal, until the loop takes it

    # -- what the model may see ------------------------------------------------------------------------

    def visible(self) -> list[str]:
        """Every file the model may read, repo-relative: what git lists in the worktree (tracked, or new
        and not ignored), without the control files."""
        try:
            done = subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=self.root,
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolRefused(f"the task's files cannot be listed: {exc}") from None
        names = done.stdout.decode("utf-8", errors="replace").split("\0")
        return sorted({n for n in names if n and self._shown(n)})

    def shown(self, rel: str) -> bool:
        """Whether the model may see `rel` (a clean repo-relative path) at all: not git's, not the hub's."""
        return self._shown(rel)

    def take_refusal(self) -> Refused | None:
        """The refusal of the last write since the last take, and none after."""
        refused, self.refused = self.refused, None
        return refused

    def _shown(self, rel: str) -> bool:
        parts = path_parts(rel)
        if any(p.lower() == ".git" for p in parts):
            return False
        return control_file_refusal("/".join(parts), self.policy.control_paths) is None

    def readable(self, raw: str) -> str:
        """`raw` as a clean repo-relative path the model may read, or ToolRefused saying why not."""
        rel = self._clean(raw)
        if not self._shown(rel):
            raise ToolRefused(
                f"{rel}: the hub's own files (configuration, prompts, rules, hand-off) are not shown"
            )
        if rel not in set(self.visible()):
            if (self.root / rel).is_dir():
                raise ToolRefused(f"{rel} is a folder: list_files(path={rel!r}) shows what is in it")
            raise ToolRefused(f"{rel}: no such file in the task's files (list_files or search find them)")
        return rel

    def _clean(self, raw: str) -> str:
        path = str(raw or "").strip().replace("\\", "/")
        if path.startswith(("/", "~")) or "\x00" in path:
            raise ToolRefused(f"{raw!r}: give a path relative to the repository root")
        parts = [p for p in path_parts(path) if p != "."]
        if ".." in parts:
            raise ToolRefused(f"{raw!r}: a path may not leave the repository ('..')")
        return "/".join(parts)

    def text_of(self, rel: str) -> str:
        found = read_capped(self.root / rel, MAX_READ_BYTES, root=self.root)
        if found is None:
            raise ToolRefused(
                f"{rel}: not a regular file, or reached through a link (links are never followed)"
            )
        data, more = found
        if b"\0" in data[:8192]:
            raise ToolRefused(f"{rel}: a binary file, not shown")
        text = data.decode("utf-8", errors="replace")
        return text + ("\n... (cut: the file is longer than 1 MiB)" if more else "")

    # -- the tools -------------------------------------------------------------------------------------

    def read_file(self, args: Mapping[str, Any]) -> str:
        rel = self.readable(args.get("path", ""))
        lines = self.text_of(rel).splitlines()
        start = max(1, int(args.get("start_line") or 1))
        end = int(args.get("end_line") or start + READ_LINES - 1)
        if not lines:
            return f"{rel} is empty"
        if start > len(lines):
            raise ToolRefused(f"{rel} has {len(lines)} lines; start_line {start} is past its end")
        end = min(end, len(lines), start + READ_LINES - 1)
        width = len(str(end))
        body = "\n".join(f"{n:>{width}}| {lines[n - 1]}" for n in range(start, end + 1))
        more = (
            f"\n(lines {start}-{end} of {len(lines)}: read_file with start_line={end + 1} for more)"
            if end < len(lines)
            else ""
        )
        return f"{rel} (lines {start}-{end} of {len(lines)}):\n{body}{more}"

    def list_files(self, args: Mapping[str, Any]) -> str:
        under = self._clean(args.get("path") or "")
        pattern = str(args.get("pattern") or "")
        names = [
            n
            for n in self.visible()
            if (not under or n == under or n.startswith(under + "/"))
            and (not pattern or fnmatch.fnmatch(n, pattern) or fnmatch.fnmatch(n.rsplit("/", 1)[-1], pattern))
        ]
        if not names:
            return f"no files under {under or 'the repository root'}" + (
                f" matching {pattern!r}" if pattern else ""
            )
        shown = names[:LIST_ENTRIES]
        more = (
            f"\n... and {len(names) - len(shown)} more (narrow it with path or pattern)"
            if len(names) > len(shown)
            else ""
        )
        return "\n".join(shown) + more

    def search(self, args: Mapping[str, Any]) -> str:
        needle = str(args.get("text") or "")
        if not needle.strip():
            raise ToolRefused("search needs the text to look for")
        under = self._clean(args.get("path") or "")
        lowered = needle.lower()
        hits: list[str] = []
        for rel in self.visible():
            if under and not (rel == under or rel.startswith(under + "/")):
                continue
            if lowered in rel.lower():
                hits.append(f"{rel} (name)")
            found = read_capped(self.root / rel, SEARCH_FILE_BYTES, root=self.root)
            if found is None or b"\0" in found[0][:8192]:
                continue
            for n, line in enumerate(found[0].decode("utf-8", errors="replace").splitlines(), 1):
                if lowered in line.lower():
                    hits.append(f"{rel}:{n}: {line.strip()[:200]}")
            if len(hits) > SEARCH_HITS:
                break
        if not hits:
            return f"{needle!r} was found in no file name or text" + (f" under {under}" if under else "")
        more = "\n... more hits left out (narrow it with path)" if len(hits) > SEARCH_HITS else ""
        return "\n".join(hits[:SEARCH_HITS]) + more

    def outline(self, args: Mapping[str, Any]) -> str:
        rel = self.readable(args.get("path", ""))
        shape = outline(rel, self.text_of(rel))
        if shape is None:
            return f"{rel}: no outline (its language is not parsed); read_file shows it"
        return f"{rel}:\n{render_outline(shape)}"

    def write_file(self, args: Mapping[str, Any]) -> str:
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolRefused("write_file needs content: the whole new text of the file")
        return self._edit(FileEdit(str(args.get("path") or ""), content=content))

    def edit_file(self, args: Mapping[str, Any]) -> str:
        search, replace = args.get("search"), args.get("replace")
        if not isinstance(search, str) or not isinstance(replace, str):
            raise ToolRefused("edit_file needs search (the exact lines now in the file) and replace")
        return self._edit(FileEdit(str(args.get("path") or ""), blocks=(SearchReplace(search, replace),)))

    def _edit(self, edit: FileEdit) -> str:
        """One edit through edit mode's own path: the policy, the control files, the pre-write check."""
        limit = self.policy.max_files
        if limit is not None and len(self.written) >= limit and self._clean(edit.path) not in self.written:
            raise ToolRefused(
                f"this change already writes {len(self.written)} files, the most one change may "
                "(limits.max_changed_files): change the files already written instead"
            )
        try:
            result = apply_edits([edit], self.policy)
        except EditError as exc:
            self.refused = self._refusal(edit.path, str(exc))
            raise ToolRefused(str(exc)) from None
        self.on_write(ParseResult((edit,), ()), result)
        if result.changed_files:
            self.version += 1
            self.written.extend(p for p in result.changed_files if p not in self.written)
        if result.failed_blocks:
            if not result.changed_files:
                rel = result.failed_blocks[0].path
                advice = fragment(self.trust_root, "agent_advice_search", path=rel)
                self.refused = Refused(f"search not found in {rel}", advice)
            return blocks_failed(result.failed_blocks, self.trust_root, result.changed_files).strip()
        if result.refused:
            self.refused = self._refusal(result.refused[0].path, result.refused[0].reason)
            return "refused, nothing written: " + "; ".join(f"{r.path}: {r.reason}" for r in result.refused)
        if result.unchanged:
            return f"{', '.join(result.unchanged)}: unchanged (the new text is the same as the old)"
        done = result.applied[0]
        what = "created" if done.created else "written"
        return f"{done.path} {what} (+{done.added} -{done.removed} lines)"

    def _refusal(self, path: str, reason: str) -> Refused:
        """A refused write: outside the allowed paths, the model is told which they are; else the reason."""
        try:
            rel = self._clean(path)
        except ToolRefused:
            rel = ""
        if not rel or not path_allowed(rel, self.policy.allowed_paths):
            allowed = ", ".join(self.policy.allowed_paths) or "none"
            return Refused(
                "outside the allowed paths", fragment(self.trust_root, "agent_advice_paths", allowed=allowed)
            )
        return Refused(reason)

    def answer(self, text: str, done_reason: str = "") -> str | None:
        """A reply with edit blocks and no tool call, written as edit mode writes an answer
        (`hub.edits.answer.apply_answer`); what became of it, for the model. None: no edit in it."""
        allowed = self.policy.allowed_paths
        single = allowed[0] if len(allowed) == 1 and not is_glob(allowed[0]) else None
        limit = self.policy.max_files
        if limit is not None:
            # The attempt's limit on changed files, across the tools' writes and such replies alike.
            root = self.policy.repo_root.resolve()
            named = {resolve_target(e, self.policy, root) or e.path for e in parse_edits(text, single).edits}
            new = named - set(self.written)
            if len(self.written) + len(new) > limit:
                return (
                    f"refused, nothing written: with {', '.join(sorted(new))} this change would write "
                    f"{len(self.written) + len(new)} files, more than one change may ({limit}, "
                    "limits.max_changed_files): change the files already written instead"
                )
        try:
            parsed, result = apply_answer(
                text, self.policy, default_path=single, done_reason=done_reason, trust_root=self.trust_root
            )
        except EditError as exc:
            return f"error: {exc}"
        if not parsed.edits and not parsed.truncated:
            return None
        self.on_write(parsed, result)
        if result.changed_files:
            self.version += 1
            self.written.extend(p for p in result.changed_files if p not in self.written)
        told = answer_feedback(parsed, result, self.trust_root).strip()
        refused = [f"- {r.path}: {r.reason}" for r in result.refused if not r.retry]
        parts = [
            f"Written from your answer: {', '.join(result.changed_files)}." if result.changed_files else ""
        ]
        parts += [told, "Refused:\n" + "\n".join(refused) if refused else ""]
        return "\n\n".join(p for p in parts if p) or "Your answer changed nothing: the files already hold it."

    def run_acceptance(self, args: Mapping[str, Any]) -> str:
        if self.run_tests is None:
            return "the task has no acceptance commands to run"
        return self.run_tests()

    def scan_rules(self, args: Mapping[str, Any]) -> str:
        if self.scan is None:
            return "no rules to scan with"
        path = args.get("path")
        targets = [self.readable(str(path))] if path else list(self.written)
        if not targets:
            return "nothing written yet to scan (name a path to scan a file)"
        return self.scan(targets)

    # -- the list ----------------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The built-in tools, `done` last."""
        return [
            Tool(
                "read_file",
                "Read a file of the repository, with line numbers (up to 400 lines at a time).",
                schema({"path": STR, "start_line": INT, "end_line": INT}, ["path"]),
                self.read_file,
            ),
            Tool(
                "list_files",
                "List the repository's files, under a folder (path) and/or matching a glob (pattern).",
                schema({"path": STR, "pattern": STR}),
                self.list_files,
            ),
            Tool(
                "search",
                "Find text (case-insensitive) in the files' names and contents, optionally under a folder.",
                schema({"text": STR, "path": STR}, ["text"]),
                self.search,
            ),
            Tool(
                "outline",
                "The functions, classes and imports a source file defines, with their line ranges.",
                schema({"path": STR}, ["path"]),
                self.outline,
            ),
            Tool(
                "write_file",
                "Write the whole new content of a file (creates it if missing). Only the task's allowed paths.",
                schema({"path": STR, "content": STR}, ["path", "content"]),
                self.write_file,
            ),
            Tool(
                "edit_file",
                "Replace the exact text `search` (copied from the file, whole lines) with `replace` in a file.",
                schema({"path": STR, "search": STR, "replace": STR}, ["path", "search", "replace"]),
                self.edit_file,
            ),
            Tool(
                "run_tests",
                "Run the task's acceptance commands in the sandbox and show their output.",
                schema({}),
                self.run_acceptance,
            ),
            Tool(
                "scan",
                "Check the files you wrote (or one path) with the project's static-analysis rules.",
                schema({"path": STR}),
                self.scan_rules,
            ),
            Tool(
                "done",
                "Say the change is complete, with a short summary of what you changed. Call it last.",
                # Not required: a small model's bare `done` means done (issue 34), not a schema error.
                schema({"summary": STR}),
                lambda args: "done",
            ),
        ]
