"""ast-grep rules: the packaged rule set, a repository's sgconfig.yml and rule folders, and rule edits.

The MCP rules tools and `hub rules` call this module; scanning code or paths with the rules is
`hub/review/scan.py`, and the community catalog is `hub/review/catalog.py`. Both read the rules here.

A project rule with the same id as a packaged one replaces it (ast-grep itself refuses duplicate ids),
so a repository can tune or silence (`severity: off`) a packaged rule.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from hub.core.atomic import write_atomic
from hub.core.errors import RuleError
from hub.core.log import get_logger

log = get_logger(__name__)

SGCONFIG = "sgconfig.yml"
SEVERITIES = ("error", "warning", "info", "hint", "off")
INIT_SGCONFIG = "ruleDirs:\n  - rules\ntestConfigs:\n  - testDir: rule-tests\n"
NO_SGCONFIG = "no sgconfig.yml: call initialize_ast_grep first (or run `hub rules init`)"
CHECK_TIMEOUT_SECONDS = 30.0

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SERDE_REPEAT = re.compile(r" at line \d+, column \d+$")

# ast-grep's built-in languages: canonical name -> (aliases, file extension for a temporary file).
LANGUAGES: dict[str, tuple[tuple[str, ...], str]] = {
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
_ALIASES = {alias: name for name, (aliases, _) in LANGUAGES.items() for alias in (name, *aliases)}


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
class Rule:
    """A rule as read from its file: what is listed, and the mapping ast-grep-py matches with."""

    info: RuleInfo
    config: Mapping[str, Any]


def normalize_language(language: str) -> str:
    """ast-grep's canonical name for a language or one of its aliases (`py`, `ts`, `golang`, ...)."""
    name = _ALIASES.get(str(language).strip().lower())
    if name is None:
        raise RuleError(f"unknown language '{language}'; known: {', '.join(sorted(LANGUAGES))}")
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
                "ast-grep not found", hint="install it with `pip install ast-grep-cli` (provides `ast-grep`)"
            )
        _binary = found
    return _binary


def packaged_rules_dir() -> Path:
    """The rules shipped with agent-hub: hub/_data/rules in a wheel, <repo>/rules in a checkout."""
    installed = Path(__file__).parents[1] / "_data" / "rules"
    return installed if installed.is_dir() else Path(__file__).parents[2] / "rules"


def read_sgconfig(repo_root: Path) -> dict[str, Any] | None:
    """The repository's sgconfig.yml as a mapping, or None when it has none."""
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
    config = read_sgconfig(repo_root)
    return [] if config is None else _dir_list(config, "ruleDirs", repo_root)


def project_util_dirs(repo_root: Path) -> list[Path]:
    """The util rule dirs named by sgconfig.yml `utilDirs`: rules match through them, so they are rules."""
    config = read_sgconfig(repo_root)
    return [] if config is None else _dir_list(config, "utilDirs", repo_root)


# --- reading rule files ------------------------------------------------------------------------------

_file_cache: dict[Path, tuple[int, int, list[Rule]]] = {}
_FastSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's loader is ~10x faster


def _rule_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())


def _load_rule_file(path: Path, source: str) -> list[Rule]:
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
        rules.append(Rule(info=info, config=doc))
    _file_cache[path] = (stat.st_mtime_ns, stat.st_size, rules)
    return rules


def _severity(value: Any) -> str:
    # PyYAML reads YAML 1.1, where a bare `off` is False; ast-grep reads YAML 1.2, where it is "off".
    return "off" if value is False else str(value)


def packaged_rules() -> list[RuleInfo]:
    """The rules shipped with agent-hub (active in every scan unless a repository turns one off)."""
    return [rule.info for rule in load_dirs([packaged_rules_dir()], "packaged")]


def load_dirs(dirs: Sequence[Path], source: str) -> list[Rule]:
    """Every rule in the YAML files under `dirs`, marked as from `source` ("project" or "packaged")."""
    return [rule for d in dirs for path in _rule_files(d) for rule in _load_rule_file(path, source)]


def active_rules(repo_root: Path | None, include_packaged: bool = True) -> tuple[list[Rule], list[Rule]]:
    """(project rules, packaged rules not replaced by a project rule of the same id)."""
    project = load_dirs(project_rules(repo_root), "project") if repo_root is not None else []
    if not include_packaged:
        return project, []
    taken = {r.info.id for r in project}
    packaged = [r for r in load_dirs([packaged_rules_dir()], "packaged") if r.info.id not in taken]
    return project, packaged


def list_rules(repo_root: Path) -> list[RuleInfo]:
    """Every active rule: the project's first, then the packaged ones it does not replace."""
    project, packaged = active_rules(repo_root)
    return [r.info for r in project + packaged]


# --- running ast-grep (the scans of scan.py, the rule check below) -------------------------------------


def carried_settings(config: Mapping[str, Any], repo_root: Path) -> dict[str, Any]:
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


def run_ast_grep(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the ast-grep CLI; RuleError when it cannot start or runs past `timeout`."""
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


def ast_grep_cause(stderr: str) -> str:
    """The useful part of an ast-grep error: its 'Caused by' chain, or its first line."""
    causes = [line.split("╰▻", 1)[1].strip() for line in stderr.splitlines() if "╰▻" in line]
    # The generic first step says nothing, and serde repeats its message with the position appended.
    causes = [c for c in causes if not c.startswith("Fail to parse yaml as") and not _SERDE_REPEAT.search(c)]
    if causes:
        return ": ".join(c.rstrip(".") for c in causes)
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[0].removeprefix("Error: ") if lines else "no output"


# --- editing a repository's rules --------------------------------------------------------------------


def init_project(repo_root: Path) -> Path:
    """Create sgconfig.yml (ruleDirs: [rules], testConfigs) and its rule dirs if absent; idempotent."""
    path = Path(repo_root) / SGCONFIG
    if not path.exists():
        write_atomic(path, INIT_SGCONFIG)
    for directory in project_rules(Path(repo_root)):
        directory.mkdir(parents=True, exist_ok=True)
    return path


# Names Windows keeps for devices, whatever follows their first dot (`CON.yml` opens the console there).
_WINDOWS_DEVICES = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\.|$)", re.IGNORECASE)


def check_rule_id(rule_id: str) -> str:
    """A rule id that is safe as a file name on every system: letters, digits, '-', '_', '.', no path parts,
    not a Windows device name."""
    if (
        not isinstance(rule_id, str)
        or not _SAFE_ID.fullmatch(rule_id)
        or ".." in rule_id
        or _WINDOWS_DEVICES.match(rule_id)
    ):
        raise RuleError(
            f"invalid rule id {rule_id!r}",
            hint="use letters, digits, '-', '_' and '.' (no '/', no '..'), starting with a letter or digit, "
            "and not a Windows device name (CON, PRN, AUX, NUL, COM1, LPT1...)",
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
        settings = carried_settings(read_sgconfig(repo_root) or {}, repo_root) if repo_root else {}
        config.write_text(yaml.safe_dump({"ruleDirs": [], **settings}), encoding="utf-8")
        proc = run_ast_grep(
            ["scan", "-c", str(config), "--inline-rules", rule_yaml, "--color", "never", "empty"],
            folder,
            CHECK_TIMEOUT_SECONDS,
        )
    if proc.returncode == 0:
        return
    cause = ast_grep_cause(proc.stderr)
    if "enum SgLang" in cause:
        raise RuleError(f"unknown language '{language}'; known: {', '.join(sorted(LANGUAGES))}")
    raise RuleError(f"invalid rule: {cause}")


def _project_rule_files(repo_root: Path, rule_id: str) -> list[tuple[Path, int]]:
    """Files of the project that define rule_id, each with how many rules it holds."""
    project = load_dirs(project_rules(repo_root), "project")
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


def add_or_update_rule(repo_root: Path, rule_id: str, rule_yaml: str, person: bool = False) -> Path:
    """Validate a rule, then write it (atomically) into the repository's first rule dir; return its file.

    A rule replacing a packaged security rule must keep it blocking (severity error, tagged security)
    unless `person` (the CLI): an agent's tool call must not switch off the check that would halt its
    own task's code."""
    repo_root = Path(repo_root).resolve()
    check_rule_id(rule_id)
    if read_sgconfig(repo_root) is None:
        raise RuleError(NO_SGCONFIG)
    parsed = validate_rule(rule_yaml, rule_id, repo_root=repo_root)
    if not person:
        _keeps_security(rule_id, parsed)
    dirs = project_rules(repo_root)
    if not dirs:
        raise RuleError(f"{repo_root / SGCONFIG}: ruleDirs is empty", hint="name a folder for the rules")
    existing = _project_rule_files(repo_root, rule_id)
    if any(count > 1 for _, count in existing):
        raise RuleError(
            f"rule '{rule_id}' lives in a file with other rules ({existing[0][0]})", hint="edit that file"
        )
    target = existing[0][0] if existing else dirs[0] / f"{rule_id}.yml"
    _require_inside(repo_root, target)
    if not target.resolve().is_relative_to(repo_root):
        raise RuleError(f"{target} is outside the repository; not writing there")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, rule_yaml if rule_yaml.endswith("\n") else rule_yaml + "\n")
    log.debug("rules.saved", rule_id=rule_id, path=str(target), replaced=bool(existing))
    return target


def _keeps_security(rule_id: str, parsed: dict[str, Any]) -> None:
    packaged = [r.info for r in load_dirs([packaged_rules_dir()], "packaged") if r.info.id == rule_id]
    if not packaged or packaged[0].severity != "error" or "security" not in packaged[0].tags:
        return
    metadata = parsed.get("metadata")
    raw_tags = (metadata.get("tags") if isinstance(metadata, dict) else None) or []
    tags = [raw_tags] if isinstance(raw_tags, str) else [str(t) for t in raw_tags]
    if _severity(parsed.get("severity", "hint")) != "error" or "security" not in tags:
        raise RuleError(
            f"'{rule_id}' is a packaged security rule: a tool call may not make it non-blocking (severity "
            "error and the security tag stay); a person can, with `hub rules add FILE`"
        )


def remove_rule(repo_root: Path, rule_id: str) -> Path:
    """Delete a project rule's file; return the path it had."""
    repo_root = Path(repo_root).resolve()
    check_rule_id(rule_id)
    if read_sgconfig(repo_root) is None:
        raise RuleError(NO_SGCONFIG)
    existing = _project_rule_files(repo_root, rule_id)
    if not existing:
        if any(r.info.id == rule_id for r in load_dirs([packaged_rules_dir()], "packaged")):
            raise RuleError(
                f"'{rule_id}' is a packaged rule and cannot be removed; to silence it, add a project rule "
                "with the same id and `severity: off`"
            )
        raise RuleError(f"no project rule '{rule_id}'")
    path, count = existing[0]
    _require_inside(repo_root, path)
    if count > 1:
        raise RuleError(f"rule '{rule_id}' lives in a file with other rules ({path})", hint="edit that file")
    path.unlink()
    log.debug("rules.removed", rule_id=rule_id, path=str(path))
    return path
