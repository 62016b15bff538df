"""Scanning with the ast-grep rules of `hub/review/rules.py`: `scan_paths`, the static gate of
`run-local-review` (and the MCP `scan_path` tool, `hub rules scan`), and `scan_code` for code in memory.

Two engines do the matching. Paths are scanned by the `ast-grep` CLI, run once per scan with a
generated sgconfig.yml in a temporary folder that lists the packaged rules and the repository's rule
dirs (nothing is written into the repository). In-memory code (`scan_code`) goes through ast-grep-py
in process, about three times faster than a CLI process on a 300-line file (bench/bench_rules.py),
falling back to the CLI for what the bindings cannot do (global utilDirs, custom languages, rewriters).
The test suite checks that both engines report the same findings for every packaged and catalog rule.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from hub.core.errors import RuleError
from hub.core.files import is_linked, read_capped
from hub.core.log import get_logger
from hub.review.rules import (
    CHECK_TIMEOUT_SECONDS,
    LANGUAGES,
    SGCONFIG,
    Rule,
    RuleInfo,
    active_rules,
    ast_grep_cause,
    carried_settings,
    load_dirs,
    normalize_language,
    packaged_rules_dir,
    project_rules,
    read_sgconfig,
    run_ast_grep,
)

log = get_logger(__name__)

CODE_FILE = "<code>"
SCAN_TIMEOUT_SECONDS = 600.0
_PATHS_PER_RUN = 400  # keeps the command line far below ARG_MAX

_METAVAR = re.compile(r"\$\$\$([A-Z_][A-Z0-9_]*)|\$\$?([A-Z_][A-Z0-9_]*)")
_PY_CONFIG_KEYS = ("rule", "constraints", "utils", "transform")


@dataclass(frozen=True)
class Finding:
    """One rule match. `line` and `column` are 1-based."""

    rule_id: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    tags: tuple[str, ...]
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data


def is_blocking(f: Finding) -> bool:
    """A finding that halts the pipeline: severity error on a rule tagged security."""
    return f.severity == "error" and "security" in f.tags


def _write_scan_config(
    tmp: Path, repo_root: Path | None, include_packaged: bool
) -> tuple[Path, list[Rule]] | None:
    """Write tmp/sgconfig.yml listing every active rule dir; None when there is no rule at all."""
    config = (read_sgconfig(repo_root) if repo_root is not None else None) or {}
    project, packaged = active_rules(repo_root, include_packaged)
    dirs = [str(d) for d in project_rules(repo_root)] if repo_root is not None else []
    dirs = [d for d in dirs if Path(d).is_dir()]
    if packaged:
        packaged_dir = packaged_rules_dir()
        every_packaged = load_dirs([packaged_dir], "packaged")
        if len(every_packaged) == len(packaged):
            dirs.append(str(packaged_dir))
        else:
            # Some packaged rules are replaced by project rules: hand ast-grep a copy without them.
            copy = tmp / "packaged-rules"
            copy.mkdir()
            kept_ids = {r.info.id for r in packaged}
            dropped = {r.info.path for r in every_packaged if r.info.id not in kept_ids}
            for path in sorted({r.info.path for r in packaged} - dropped):
                shutil.copyfile(path, copy / path.relative_to(packaged_dir).as_posix().replace("/", "__"))
            dirs.append(str(copy))
    rules = project + packaged
    if not rules:
        return None
    generated: dict[str, Any] = {"ruleDirs": dirs}
    if repo_root is not None:
        generated.update(carried_settings(config, repo_root))
    path = tmp / SGCONFIG
    path.write_text(yaml.safe_dump(generated, sort_keys=False), encoding="utf-8")
    return path, rules


# ast-grep obeys `ast-grep-ignore` comments in the code it scans (ast-grep-py does not): the code under
# review would decide which rules apply to it. Scans see the marker in capitals, which ast-grep ignores;
# same length, so lines and columns stay.
SUPPRESSION = "ast-grep-ignore"


def defused(code: str) -> str:
    return code.replace(SUPPRESSION, SUPPRESSION.upper())


# A run of this many whole-line Python comments or more is blanked in the copy ast-grep scans:
# tree-sitter-python parses such a run in quadratic time (issue 28: a 380,000-character reply of short
# comment lines held the local review over 245 s, 16,000 lines 15 s), and spaces of the same byte length
# keep every line and column. Shorter runs stay, for project rules that look at comments.
COMMENT_RUN = 200
_PY_COMMENT_RUN = re.compile(rb"(?m)^(?:[ \t]*#[^\r\n]*\r?\n){%d,}" % COMMENT_RUN)
_PY_COMMENT = re.compile(rb"(?m)^([ \t]*)(#[^\r\n]*)")


def _blank_comment_runs(data: bytes) -> bytes:
    return _PY_COMMENT_RUN.sub(
        lambda run: _PY_COMMENT.sub(lambda m: m.group(1) + b" " * len(m.group(2)), run.group(0)), data
    )


def _copy_defused(source: Path, copy: Path) -> bool:
    """Write a defused copy of `source` at `copy` if it carries a suppression comment (or, Python, a long
    run of comment lines); True if it did."""
    found = read_capped(source)  # never through a link, never more than the cap
    if found is None:
        return False
    data = found[0]
    changed = data.replace(SUPPRESSION.encode(), SUPPRESSION.upper().encode())
    if source.suffix in {".py", ".pyi"}:
        changed = _blank_comment_runs(changed)
    if changed == data:
        return False
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(changed)
    return True


def _scan_once(config: Path, targets: Sequence[str], cwd: Path, timeout: float) -> list[dict[str, Any]]:
    args = ["scan", "-c", str(config), "--json=stream", "--color", "never", *targets]
    proc = run_ast_grep(args, cwd, timeout)
    # 0: no error-level finding; 1: some error-level finding. Anything else is the scanner failing.
    if proc.returncode not in (0, 1):
        raise RuleError(f"ast-grep scan failed (exit {proc.returncode}): {ast_grep_cause(proc.stderr)}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _finding(raw: Mapping[str, Any], rules: Mapping[str, RuleInfo], file: str) -> Finding:
    start = raw["range"]["start"]
    info = rules.get(raw["ruleId"])
    return Finding(
        rule_id=raw["ruleId"],
        severity=str(raw.get("severity", info.severity if info else "hint")).lower(),
        message=str(raw.get("message", "")),
        file=file,
        line=int(start["line"]) + 1,
        column=int(start["column"]) + 1,
        # ast-grep leaves metadata out of its JSON unless asked; the rule files are read anyway.
        tags=info.tags if info else (),
        note=str(raw.get("note") or (info.note if info else "")).strip(),
    )


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _sort_key(f: Finding) -> tuple[str, int, int, str]:
    return (f.file, f.line, f.column, f.rule_id)


def scan_paths(
    repo_root: Path,
    paths: Sequence[str] | None = None,
    *,
    include_packaged: bool = True,
    timeout: float = SCAN_TIMEOUT_SECONDS,
    config_root: Path | None = None,
) -> list[Finding]:
    """The static gate: packaged rules + the repository's rules on `paths` (changed files), or the whole repo.

    Paths are relative to repo_root (or absolute); ones that no longer exist (deleted files) are skipped.
    Finding.file is relative to repo_root, with forward slashes. `config_root` (default repo_root) is
    where sgconfig.yml and the rules are read: a task's worktree is scanned with the user's checkout's
    rules, so a task cannot change the rules that judge it.
    """
    started = time.perf_counter()
    repo_root = Path(repo_root).resolve()
    if paths is None:
        targets = ["."]
    else:
        targets = []
        for p in paths:
            full = Path(p) if Path(p).is_absolute() else repo_root / p
            # A link is not scanned, nor a file in a linked folder: ast-grep would read the target,
            # outside the tree or /dev/zero.
            if full.exists() and not is_linked(repo_root, os.path.relpath(full, repo_root)):
                targets.append(os.path.relpath(full, repo_root))
        if not targets:
            return []
    with tempfile.TemporaryDirectory(prefix="hub-rules-") as tmp:
        rules_root = Path(config_root).resolve() if config_root is not None else repo_root
        written = _write_scan_config(Path(tmp), rules_root, include_packaged)
        if written is None:
            return []
        config, rules = written
        by_id = {r.info.id: r.info for r in rules}
        # Named files carrying a suppression comment are scanned as defused copies, under the same names.
        copies = Path(tmp) / "defused"
        marked = [t for t in targets if paths is not None and _copy_defused(repo_root / t, copies / t)]
        in_place = [t for t in targets if t not in marked]
        raw = [
            item
            for cwd, group in ((repo_root, in_place), (copies, marked))
            for chunk in _chunks(group, _PATHS_PER_RUN)
            for item in _scan_once(config, chunk, cwd, timeout)
        ]
    findings = sorted((_finding(r, by_id, Path(r["file"]).as_posix()) for r in raw), key=_sort_key)
    log.debug(
        "rules.scan_paths",
        targets=len(targets),
        rules=len(rules),
        findings=len(findings),
        seconds=round(time.perf_counter() - started, 3),
    )
    return findings


def scan_code(
    code: str, language: str, repo_root: Path | None = None, *, engine: str = "auto"
) -> list[Finding]:
    """Scan in-memory code with every active rule of its language; Finding.file is `<code>`.

    `engine` is "auto" (ast-grep-py when it can run all the rules, else the CLI), "py" or "cli".
    A rule's files/ignores globs do not apply: the code has no path.
    """
    lang = normalize_language(language)
    root = Path(repo_root).resolve() if repo_root is not None else None
    project, packaged = active_rules(root)
    rules = [r for r in project + packaged if r.info.language == lang and r.info.severity != "off"]
    if not rules:
        return []
    config = (read_sgconfig(root) if root is not None else None) or {}
    if engine == "auto":
        engine = "py" if _py_can_run(rules, config) else "cli"
    if engine == "py":
        try:
            return _scan_code_py(code, lang, rules)
        except Exception as exc:  # a rule feature the bindings lack: the CLI is the reference
            log.debug("rules.scan_code.py_failed", error=str(exc))
    elif engine != "cli":
        raise RuleError(f"unknown scan engine '{engine}' (auto, py or cli)")
    return _scan_code_cli(code, lang, root)


def _py_can_run(rules: Sequence[Rule], config: Mapping[str, Any]) -> bool:
    # Global utils (utilDirs) and custom languages are only known to the CLI; rewriters only matter to fixes.
    if config.get("utilDirs") or config.get("customLanguages"):
        return False
    return not any("rewriters" in r.config for r in rules)


def _scan_code_py(code: str, language: str, rules: Sequence[Rule]) -> list[Finding]:
    from ast_grep_py import SgRoot

    root = SgRoot(code, language).root()
    findings = []
    for rule in rules:
        config = {key: rule.config[key] for key in _PY_CONFIG_KEYS if key in rule.config}
        for node in root.find_all(config):  # type: ignore[call-overload]
            start = node.range().start
            findings.append(
                Finding(
                    rule_id=rule.info.id,
                    severity=rule.info.severity,
                    message=_interpolate(rule.info.message, node, code),
                    file=CODE_FILE,
                    line=start.line + 1,
                    column=start.column + 1,
                    tags=rule.info.tags,
                    note=rule.info.note,
                )
            )
    return sorted(findings, key=_sort_key)


def _interpolate(message: str, node: Any, code: str) -> str:
    """Fill $VAR and $$$VARS in a rule message the way the CLI does (unbound ones become empty)."""

    def text(match: re.Match[str]) -> str:
        multi, single = match.group(1), match.group(2)
        if multi:
            nodes = node.get_multiple_matches(multi)
            if not nodes:
                return ""
            return code[nodes[0].range().start.index : nodes[-1].range().end.index]
        bound = node.get_match(single)
        if bound is not None:
            return str(bound.text())
        return str(node.get_transformed(single) or "")

    return _METAVAR.sub(text, message)


def _scan_code_cli(code: str, language: str, repo_root: Path | None) -> list[Finding]:
    with tempfile.TemporaryDirectory(prefix="hub-scan-code-") as tmp:
        folder = Path(tmp)
        written = _write_scan_config(folder, repo_root, include_packaged=True)
        if written is None:
            return []
        config, rules = written
        source = folder / f"code{LANGUAGES[language][1]}"
        source.write_text(defused(code), encoding="utf-8")
        raw = _scan_once(config, [source.name], folder, CHECK_TIMEOUT_SECONDS)
    by_id = {r.info.id: r.info for r in rules}
    return sorted((_finding(r, by_id, CODE_FILE) for r in raw), key=_sort_key)
