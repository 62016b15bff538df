"""ast-grep rules: the packaged rule set, a repository's sgconfig.yml rules, scanning, and rule edits.

The static gate of `run-local-review` calls `scan_paths`; the MCP rules tools and `hub rules` call the
rest. The community catalog lives in `hub/review/catalog.py`.

Two engines do the matching. Paths are scanned by the `ast-grep` CLI, run once per scan with a
generated sgconfig.yml in a temporary folder that lists the packaged rules and the repository's rule
dirs (nothing is written into the repository). In-memory code (`scan_code`) goes through ast-grep-py
in process, about three times faster than a CLI process on a 300-line file (bench/bench_rules.py),
falling back to the CLI for what the bindings cannot do (global utilDirs, custom languages, rewriters).
The test suite checks that both engines report the same findings for every packaged and catalog rule.

A project rule with the same id as a packaged one replaces it (ast-grep itself refuses duplicate ids),
so a repository can tune or silence (`severity: off`) a packaged rule.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml

from hub.core.atomic import write_atomic
from hub.core.errors import RuleError

log = structlog.get_logger(__name__)

SGCONFIG = "sgconfig.yml"
SEVERITIES = ("error", "warning", "info", "hint", "off")
CODE_FILE = "<code>"
INIT_SGCONFIG = "ruleDirs:\n  - rules\ntestConfigs:\n  - testDir: rule-tests\n"
NO_SGCONFIG = "no sgconfig.yml: call initialize_ast_grep first (or run `hub rules init`)"
SCAN_TIMEOUT_SECONDS = 600.0
CHECK_TIMEOUT_SECONDS = 30.0
_PATHS_PER_RUN = 400  # keeps the command line far below ARG_MAX

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_METAVAR = re.compile(r"\$\$\$([A-Z_][A-Z0-9_]*)|\$\$?([A-Z_][A-Z0-9_]*)")
_PY_CONFIG_KEYS = ("rule", "constraints", "utils", "transform")
_SERDE_REPEAT = re.compile(r" at line \d+, column \d+$")

# ast-grep's built-in languages: canonical name -> (aliases, file extension for a temporary file).
_LANGUAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "bash": (("sh", "shell", "zsh"), ".sh"),
    "c": ((), ".c"),
    "cpp": (("c++", "cc", "cxx", "hpp"), ".cpp"),
    "csharp": (("cs", "c#"), ".cs"),
    "css": ((), ".css"),
    "dart": ((), ".dart"),
    "elixir": (("ex", "exs"), ".ex"),
    "go": (("golang",), ".go"),
    "haskell": (("hs",), ".hs"),
    "hcl": (("terraform", "tf"), ".hcl"),
    "html": (("htm",), ".html"),
    "java": ((), ".java"),
    "javascript": (("js", "jsx", "mjs", "cjs", "node"), ".js"),
    "json": ((), ".json"),
    "kotlin": (("kt", "kts"), ".kt"),
    "lua": ((), ".lua"),
    "nix": ((), ".nix"),
    "php": ((), ".php"),
    "python": (("py", "python3"), ".py"),
    "ruby": (("rb",), ".rb"),
    "rust": (("rs",), ".rs"),
    "scala": ((), ".scala"),
    "solidity": (("sol",), ".sol"),
    "swift": ((), ".swift"),
    "tsx": ((), ".tsx"),
    "typescript": (("ts", "mts", "cts"), ".ts"),
    "yaml": (("yml",), ".yml"),
}
_ALIASES = {alias: name for name, (aliases, _) in _LANGUAGES.items() for alias in (name, *aliases)}


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


@dataclass(frozen=True)
class RuleInfo:
    """A rule as listed: where it lives and whether it is the project's or the packaged set's."""

    id: str
    language: str
    severity: str
    message: str
    tags: tuple[str, ...]
    path: Path
    source: str  # "project" | "packaged"
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        data["path"] = str(self.path)
        return data


@dataclass(frozen=True)
class _Rule:
    info: RuleInfo
    config: Mapping[str, Any]


def is_blocking(f: Finding) -> bool:
    """A finding that halts the pipeline: severity error on a rule tagged security."""
    return f.severity == "error" and "security" in f.tags


def normalize_language(language: str) -> str:
    """ast-grep's canonical name for a language or one of its aliases (`py`, `ts`, `golang`, ...)."""
    name = _ALIASES.get(str(language).strip().lower())
    if name is None:
        raise RuleError(f"unknown language '{language}'; known: {', '.join(sorted(_LANGUAGES))}")
    return name


# --- where things are --------------------------------------------------------------------------------

_binary: str | None = None


def find_ast_grep(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The ast-grep CLI the scans run (and `hub doctor` checks): beside this Python first (the venv's or
    pipx's bin/, where the ast-grep-cli dependency put it), then PATH. None when neither has it."""
    suffix = ".exe" if os.name == "nt" else ""
    beside = Path(sys.executable).parent / f"ast-grep{suffix}"
    # Not "sg": on Linux that name usually belongs to shadow-utils' setgroups command.
    return str(beside) if beside.is_file() else which("ast-grep")


def ast_grep_binary() -> str:
    """Path of the ast-grep CLI (see `find_ast_grep`), looked up once per process."""
    global _binary
    if _binary is None:
        found = find_ast_grep()
        if found is None:
            raise RuleError(
                "ast-grep not found: install it with `pip install ast-grep-cli` (provides `ast-grep`)"
            )
        _binary = found
    return _binary


def packaged_rules_dir() -> Path:
    """The rules shipped with agent-hub: hub/_data/rules in a wheel, <repo>/rules in a checkout."""
    installed = Path(__file__).parents[1] / "_data" / "rules"
    return installed if installed.is_dir() else Path(__file__).parents[2] / "rules"


def _read_sgconfig(repo_root: Path) -> dict[str, Any] | None:
    path = repo_root / SGCONFIG
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RuleError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RuleError(f"{path}: expected a mapping at the top level")
    return data


def _dir_list(config: Mapping[str, Any], key: str, repo_root: Path) -> list[Path]:
    value = config.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise RuleError(f"{repo_root / SGCONFIG}: {key}: expected a list of folders")
    return [(repo_root / str(item)).resolve() for item in value]


def project_rules(repo_root: Path) -> list[Path]:
    """The rule dirs named by the repository's sgconfig.yml `ruleDirs`, or [] without an sgconfig.yml."""
    config = _read_sgconfig(repo_root)
    return [] if config is None else _dir_list(config, "ruleDirs", repo_root)


def project_util_dirs(repo_root: Path) -> list[Path]:
    """The util rule dirs named by sgconfig.yml `utilDirs`: rules match through them, so they are rules."""
    config = _read_sgconfig(repo_root)
    return [] if config is None else _dir_list(config, "utilDirs", repo_root)


# --- reading rule files ------------------------------------------------------------------------------

_file_cache: dict[Path, tuple[int, int, list[_Rule]]] = {}
_FastSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's loader is ~10x faster


def _rule_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())


def _load_rule_file(path: Path, source: str) -> list[_Rule]:
    stat = path.stat()
    cached = _file_cache.get(path)
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        return cached[2]
    try:
        docs = [
            d
            for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_FastSafeLoader)
            if d is not None
        ]
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RuleError(f"{path}: not valid YAML: {exc}") from None
    rules = []
    for doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or "rule" not in doc:
            raise RuleError(f"{path}: not an ast-grep rule (needs id, language and rule)")
        metadata = doc.get("metadata")
        raw_tags = (metadata.get("tags") if isinstance(metadata, dict) else None) or []
        tags = (raw_tags,) if isinstance(raw_tags, str) else tuple(str(t) for t in raw_tags)
        language = str(doc.get("language", ""))
        info = RuleInfo(
            id=doc["id"],
            language=_ALIASES.get(language.lower(), language),
            severity=_severity(doc.get("severity", "hint")),  # hint: ast-grep's default
            message=str(doc.get("message") or ""),
            tags=tags,
            path=path,
            source=source,
            note=str(doc.get("note") or "").strip(),
        )
        rules.append(_Rule(info=info, config=doc))
    _file_cache[path] = (stat.st_mtime_ns, stat.st_size, rules)
    return rules


def _severity(value: Any) -> str:
    # PyYAML reads YAML 1.1, where a bare `off` is False; ast-grep reads YAML 1.2, where it is "off".
    return "off" if value is False else str(value)


def packaged_rules() -> list[RuleInfo]:
    """The rules shipped with agent-hub (active in every scan unless a repository turns one off)."""
    return [rule.info for rule in _load_dirs([packaged_rules_dir()], "packaged")]


def _load_dirs(dirs: Sequence[Path], source: str) -> list[_Rule]:
    return [rule for d in dirs for path in _rule_files(d) for rule in _load_rule_file(path, source)]


def _active_rules(repo_root: Path | None, include_packaged: bool = True) -> tuple[list[_Rule], list[_Rule]]:
    """(project rules, packaged rules not replaced by a project rule of the same id)."""
    project = _load_dirs(project_rules(repo_root), "project") if repo_root is not None else []
    if not include_packaged:
        return project, []
    taken = {r.info.id for r in project}
    packaged = [r for r in _load_dirs([packaged_rules_dir()], "packaged") if r.info.id not in taken]
    return project, packaged


def list_rules(repo_root: Path) -> list[RuleInfo]:
    """Every active rule: the project's first, then the packaged ones it does not replace."""
    project, packaged = _active_rules(repo_root)
    return [r.info for r in project + packaged]


# --- scanning ----------------------------------------------------------------------------------------


def _write_scan_config(
    tmp: Path, repo_root: Path | None, include_packaged: bool
) -> tuple[Path, list[_Rule]] | None:
    """Write tmp/sgconfig.yml listing every active rule dir; None when there is no rule at all."""
    config = (_read_sgconfig(repo_root) if repo_root is not None else None) or {}
    project, packaged = _active_rules(repo_root, include_packaged)
    dirs = [str(d) for d in project_rules(repo_root)] if repo_root is not None else []
    dirs = [d for d in dirs if Path(d).is_dir()]
    if packaged:
        packaged_dir = packaged_rules_dir()
        every_packaged = _load_dirs([packaged_dir], "packaged")
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
        generated.update(_carried_settings(config, repo_root))
    path = tmp / SGCONFIG
    path.write_text(yaml.safe_dump(generated, sort_keys=False), encoding="utf-8")
    return path, rules


def _carried_settings(config: Mapping[str, Any], repo_root: Path) -> dict[str, Any]:
    """The repository's settings that change how its rules match, with folders made absolute."""
    carried: dict[str, Any] = {}
    if config.get("utilDirs"):
        carried["utilDirs"] = [str(d) for d in _dir_list(config, "utilDirs", repo_root)]
    if isinstance(config.get("languageGlobs"), dict):
        carried["languageGlobs"] = config["languageGlobs"]
    if isinstance(config.get("customLanguages"), dict):
        custom = {}
        for name, spec in config["customLanguages"].items():
            spec = dict(spec) if isinstance(spec, dict) else {}
            if spec.get("libraryPath"):
                spec["libraryPath"] = str((repo_root / str(spec["libraryPath"])).resolve())
            custom[name] = spec
        carried["customLanguages"] = custom
    return carried


def _run_ast_grep(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [ast_grep_binary(), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuleError(f"ast-grep {args[0]} ran past {timeout:g}s") from None
    except OSError as exc:
        raise RuleError(f"cannot run ast-grep: {exc}") from None


def _cause(stderr: str) -> str:
    """The useful part of an ast-grep error: its 'Caused by' chain, or its first line."""
    causes = [line.split("╰▻", 1)[1].strip() for line in stderr.splitlines() if "╰▻" in line]
    # The generic first step says nothing, and serde repeats its message with the position appended.
    causes = [c for c in causes if not c.startswith("Fail to parse yaml as") and not _SERDE_REPEAT.search(c)]
    if causes:
        return ": ".join(c.rstrip(".") for c in causes)
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[0].removeprefix("Error: ") if lines else "no output"


# ast-grep obeys `ast-grep-ignore` comments in the code it scans (ast-grep-py does not): the code under
# review would decide which rules apply to it. Scans see the marker in capitals, which ast-grep ignores;
# same length, so lines and columns stay.
SUPPRESSION = "ast-grep-ignore"


def defused(code: str) -> str:
    return code.replace(SUPPRESSION, SUPPRESSION.upper())


def _copy_defused(source: Path, copy: Path) -> bool:
    """Write a defused copy of `source` at `copy` if it carries a suppression comment; True if it did."""
    if not source.is_file():
        return False
    data = source.read_bytes()
    if SUPPRESSION.encode() not in data:
        return False
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(data.replace(SUPPRESSION.encode(), SUPPRESSION.upper().encode()))
    return True


def _scan_once(config: Path, targets: Sequence[str], cwd: Path, timeout: float) -> list[dict[str, Any]]:
    args = ["scan", "-c", str(config), "--json=stream", "--color", "never", *targets]
    proc = _run_ast_grep(args, cwd, timeout)
    # 0: no error-level finding; 1: some error-level finding. Anything else is the scanner failing.
    if proc.returncode not in (0, 1):
        raise RuleError(f"ast-grep scan failed (exit {proc.returncode}): {_cause(proc.stderr)}")
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
            if full.exists():
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
    project, packaged = _active_rules(root)
    rules = [r for r in project + packaged if r.info.language == lang and r.info.severity != "off"]
    if not rules:
        return []
    config = (_read_sgconfig(root) if root is not None else None) or {}
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


def _py_can_run(rules: Sequence[_Rule], config: Mapping[str, Any]) -> bool:
    # Global utils (utilDirs) and custom languages are only known to the CLI; rewriters only matter to fixes.
    if config.get("utilDirs") or config.get("customLanguages"):
        return False
    return not any("rewriters" in r.config for r in rules)


def _scan_code_py(code: str, language: str, rules: Sequence[_Rule]) -> list[Finding]:
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
        source = folder / f"code{_LANGUAGES[language][1]}"
        source.write_text(defused(code), encoding="utf-8")
        raw = _scan_once(config, [source.name], folder, CHECK_TIMEOUT_SECONDS)
    by_id = {r.info.id: r.info for r in rules}
    return sorted((_finding(r, by_id, CODE_FILE) for r in raw), key=_sort_key)


# --- editing a repository's rules --------------------------------------------------------------------


def init_project(repo_root: Path) -> Path:
    """Create sgconfig.yml (ruleDirs: [rules], testConfigs) and its rule dirs if absent; idempotent."""
    path = Path(repo_root) / SGCONFIG
    if not path.exists():
        write_atomic(path, INIT_SGCONFIG)
    for directory in project_rules(Path(repo_root)):
        directory.mkdir(parents=True, exist_ok=True)
    return path


def check_rule_id(rule_id: str) -> str:
    """A rule id that is safe as a file name: letters, digits, '-', '_', '.', no path parts."""
    if not isinstance(rule_id, str) or not _SAFE_ID.fullmatch(rule_id) or ".." in rule_id:
        raise RuleError(
            f"invalid rule id {rule_id!r}: use letters, digits, '-', '_' and '.' (no '/', no '..'), "
            "starting with a letter or digit"
        )
    return rule_id


def validate_rule(
    rule_yaml: str, rule_id: str | None = None, *, repo_root: Path | None = None
) -> dict[str, Any]:
    """Parse one rule and have ast-grep check it; return the parsed rule or raise RuleError naming the fault.

    With repo_root, the repository's utilDirs and custom languages are known to the check.
    """
    try:
        docs = [d for d in yaml.safe_load_all(rule_yaml) if d is not None]
    except yaml.YAMLError as exc:
        raise RuleError(f"rule YAML does not parse: {' '.join(str(exc).split())}") from None
    if len(docs) != 1:
        raise RuleError(f"expected exactly one rule in the YAML, found {len(docs)}")
    rule = docs[0]
    if not isinstance(rule, dict):
        raise RuleError("a rule must be a YAML mapping with id, language and rule")
    missing = [key for key in ("id", "language", "rule") if key not in rule]
    if missing:
        raise RuleError(f"rule is missing: {', '.join(missing)}")
    check_rule_id(rule["id"])
    if rule_id is not None and rule["id"] != rule_id:
        raise RuleError(f"rule_id '{rule_id}' does not match the rule's id '{rule['id']}'")
    if "severity" in rule and _severity(rule["severity"]) not in SEVERITIES:
        raise RuleError(f"severity '{rule['severity']}' is not one of {', '.join(SEVERITIES)}")
    _ast_grep_check(rule_yaml, str(rule["language"]), repo_root)
    return rule


def _ast_grep_check(rule_yaml: str, language: str, repo_root: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="hub-rule-check-") as tmp:
        folder = Path(tmp)
        (folder / "empty").mkdir()
        config = folder / SGCONFIG
        settings = _carried_settings(_read_sgconfig(repo_root) or {}, repo_root) if repo_root else {}
        config.write_text(yaml.safe_dump({"ruleDirs": [], **settings}), encoding="utf-8")
        proc = _run_ast_grep(
            ["scan", "-c", str(config), "--inline-rules", rule_yaml, "--color", "never", "empty"],
            folder,
            CHECK_TIMEOUT_SECONDS,
        )
    if proc.returncode == 0:
        return
    cause = _cause(proc.stderr)
    if "enum SgLang" in cause:
        raise RuleError(f"unknown language '{language}'; known: {', '.join(sorted(_LANGUAGES))}")
    raise RuleError(f"invalid rule: {cause}")


def _project_rule_files(repo_root: Path, rule_id: str) -> list[tuple[Path, int]]:
    """Files of the project that define rule_id, each with how many rules it holds."""
    project = _load_dirs(project_rules(repo_root), "project")
    counts: dict[Path, int] = {}
    for rule in project:
        counts[rule.info.path] = counts.get(rule.info.path, 0) + 1
    return [(r.info.path, counts[r.info.path]) for r in project if r.info.id == rule_id]


def _require_inside(repo_root: Path, path: Path) -> None:
    """A rule file the tools write or delete must lie in the repository: sgconfig.yml's ruleDirs may name
    any folder, and remove_rule followed one outside and deleted there."""
    if not path.resolve().is_relative_to(repo_root.resolve()):
        raise RuleError(
            f"{path} is outside the repository {repo_root} (sgconfig.yml ruleDirs points there); "
            "rules are only written or removed inside the repository"
        )


def add_or_update_rule(repo_root: Path, rule_id: str, rule_yaml: str) -> Path:
    """Validate a rule, then write it (atomically) into the repository's first rule dir; return its file."""
    repo_root = Path(repo_root).resolve()
    check_rule_id(rule_id)
    if _read_sgconfig(repo_root) is None:
        raise RuleError(NO_SGCONFIG)
    validate_rule(rule_yaml, rule_id, repo_root=repo_root)
    dirs = project_rules(repo_root)
    if not dirs:
        raise RuleError(f"{repo_root / SGCONFIG}: ruleDirs is empty: name a folder for the rules")
    existing = _project_rule_files(repo_root, rule_id)
    if any(count > 1 for _, count in existing):
        raise RuleError(
            f"rule '{rule_id}' lives in a file with other rules ({existing[0][0]}); edit that file"
        )
    target = existing[0][0] if existing else dirs[0] / f"{rule_id}.yml"
    _require_inside(repo_root, target)
    if not target.resolve().is_relative_to(repo_root):
        raise RuleError(f"{target} is outside the repository; not writing there")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, rule_yaml if rule_yaml.endswith("\n") else rule_yaml + "\n")
    log.debug("rules.saved", rule_id=rule_id, path=str(target), replaced=bool(existing))
    return target


def remove_rule(repo_root: Path, rule_id: str) -> Path:
    """Delete a project rule's file; return the path it had."""
    repo_root = Path(repo_root).resolve()
    check_rule_id(rule_id)
    if _read_sgconfig(repo_root) is None:
        raise RuleError(NO_SGCONFIG)
    existing = _project_rule_files(repo_root, rule_id)
    if not existing:
        if any(r.info.id == rule_id for r in _load_dirs([packaged_rules_dir()], "packaged")):
            raise RuleError(
                f"'{rule_id}' is a packaged rule and cannot be removed; to silence it, add a project rule "
                "with the same id and `severity: off`"
            )
        raise RuleError(f"no project rule '{rule_id}'")
    path, count = existing[0]
    _require_inside(repo_root, path)
    if count > 1:
        raise RuleError(f"rule '{rule_id}' lives in a file with other rules ({path}); edit that file")
    path.unlink()
    log.debug("rules.removed", rule_id=rule_id, path=str(path))
    return path
