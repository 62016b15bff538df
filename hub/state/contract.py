"""The task contract (schema 2.0): schema, load/validate/save, new contracts, judge reports.

The schema half is pure. `load` and `save` are the only functions that touch files; `save` is atomic
(temp file in the same folder, fsync, `os.replace`) so a crash never leaves half a contract.
"""

from __future__ import annotations

import copy
import json
import math
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict, cast

from hub.core.atomic import write_atomic
from hub.core.config import DEFAULT_MAX_CHANGED_FILES
from hub.core.errors import ContractInvalid, WrongState
from hub.state.machine import STATES

SCHEMA_VERSION = "2.0"
COMPLEXITIES = ("trivial", "minor", "major", "critical")
ROLE_NAMES = ("implementer", "local_reviewer", "judge")


class Verdict(StrEnum):
    """A judge's verdict; equal to (and saved as) its plain string."""

    PASS = "PASS"
    CONDITIONAL = "CONDITIONAL"
    FAIL = "FAIL"
    CRITICAL_HALT = "CRITICAL_HALT"


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)


# --- the contract's shape, for mypy (SCHEMA below is the same shape for the file) ------------------------


# TypedDicts for mypy only: at run time each is a plain dict, because creating ~20 TypedDict classes
# cost every command about a millisecond of start-up (bench/bench_startup.py) for nothing it uses.
if TYPE_CHECKING:

    class Timestamps(TypedDict):
        created_at: str
        updated_at: str
        deadline_at: NotRequired[str | None]

    class GitInfo(TypedDict, total=False):
        repo_root: str | None
        base_branch: str | None
        task_branch: str | None
        base_commit: str | None
        worktree: str | None  # the task's own git worktree (setup-task)

    class Roles(TypedDict):
        implementer: str
        local_reviewer: str
        judge: str

    class TimeoutMinutes(TypedDict):
        implementer: float
        local_review: float
        judge: float

    class Limits(TypedDict):
        max_rebuttals: int
        max_review_cycles: int
        timeout_minutes: TimeoutMinutes
        token_budget: NotRequired[int | None]
        cost_ceiling_usd: NotRequired[float | None]
        max_changed_files: NotRequired[int]

    class Constraints(TypedDict):
        allowed_paths: list[str]
        forbidden_paths: list[str]
        delete_allowed: NotRequired[bool]
        max_diff_lines: NotRequired[int | None]

    class Specification(TypedDict):
        requirements: list[str]
        source_files: NotRequired[list[str]]
        target_file: NotRequired[str | None]
        acceptance_criteria: NotRequired[list[str]]
        acceptance_commands: NotRequired[list[str]]

    class Issue(TypedDict, total=False):
        """A local-review finding or a judge's blocking issue."""

        id: str
        severity: str
        file: str | None
        line: int | None
        description: str
        fix_required: str | None
        source: str
        rule_id: str
        tags: list[str]

    class AcceptanceResult(TypedDict):
        command: str
        exit_code: int | None
        seconds: float
        timed_out: bool

    class AttemptRecord(TypedDict):
        attempt: int
        content_hash: str
        commit: str | None
        changed_files: list[str]
        verdict: str | None

    class StallRecord(TypedDict):
        timestamp: str
        role: str
        attempt: int
        reason: str
        detail: str
        raw_tail: str
        timings: dict[str, float]

    class ServerWait(TypedDict):
        """An outage being waited out by the running phase (`hub status` shows it)."""

        since: str
        waited_seconds: float
        limit_minutes: float
        attempts: int
        next_try_seconds: float
        error: str

    class HaltRecord(TypedDict):
        trigger: str
        reason: str
        from_state: str

    class Committing(TypedDict):
        """Set just before an attempt's commit: recovery finishes an attempt killed after it."""

        attempt: int
        parent: str

    class HandoffData(TypedDict, total=False):
        """What the phases hand each other. Every key is optional: a phase writes its own as it runs."""

        changed_files: list[str]
        diff_summary: str | None
        local_review_passed: bool | None
        local_review_issues: list[Issue]
        local_review_note: str | None  # why a review the reviewer called passed is recorded as not passed
        judge_verdict: str | None
        judge_blocking_issues: list[Issue]
        judge_suggestions: list[str | dict[str, Any]]
        judge_summary: str
        acceptance_results: list[AcceptanceResult]
        attempts: list[AttemptRecord]
        stalls: list[StallRecord]
        stashes: list[str]
        halt: HaltRecord
        resume_notes: list[str]
        review_requested_at: str
        review_request_mtime_ns: int  # a judge report older than this is never applied
        merge_commit: str
        reviewed_commit: str  # the task branch's commit the judge reviews; finalize-task merges only it
        merge_wait: str  # why the merge waits (the user's checkout has local changes); retried
        server_wait: ServerWait
        sandbox: str  # whether the acceptance commands ran sandboxed, and how
        committing: Committing

    class Lease(TypedDict):
        held_by: str | None
        acquired_at: str | None
        expires_at: str | None

    class Breaker(TypedDict, total=False):
        status: str
        trigger: str | None
        reason: str | None
        counters: dict[str, int]

    class RoleCost(TypedDict, total=False):
        tokens_in: int
        tokens_out: int
        seconds: float
        usd: float
        calls: int

    # "from" is a keyword, hence the functional form.
    HistoryEntry = TypedDict(
        "HistoryEntry",
        {"timestamp": str, "event": str, "from": str, "to": str, "reason": str | None, "attempt": int},
        total=False,
    )

    class Contract(TypedDict):
        schema_version: str
        task_id: str
        title: NotRequired[str]
        project: str
        complexity: str
        status: str
        status_reason: NotRequired[str | None]
        attempt: int
        timestamps: Timestamps
        git: GitInfo
        roles: Roles
        limits: Limits
        constraints: Constraints
        specification: Specification
        handoff_data: HandoffData
        lock: NotRequired[Lease | None]
        breaker: NotRequired[Breaker]
        cost: NotRequired[dict[str, RoleCost]]
        history: list[HistoryEntry]

    class TaskFields(TypedDict, total=False):
        """A new task's fields (`hub new`, MCP hub_create_task, a backlog proposal): `new_contract`'s
        keyword arguments. A task needs a title and requirements (`setup.missing_task_field`)."""

        title: str
        requirements: list[str]
        target_file: str | None
        source_files: list[str]
        acceptance_criteria: list[str]
        acceptance_commands: list[str]
        allowed_paths: list[str]
        forbidden_paths: list[str]
        complexity: str
        max_diff_lines: int | None

    class JudgeUsage(TypedDict, total=False):
        prompt_tokens: int
        completion_tokens: int
        model: str
        cost_usd: float

    class JudgeReport(TypedDict):
        verdict: str
        summary: NotRequired[str]
        blocking_issues: NotRequired[list[Issue]]
        suggestions: NotRequired[list[str | dict[str, Any]]]
        usage: NotRequired[JudgeUsage]

else:
    Timestamps = dict
    GitInfo = dict
    Roles = dict
    TimeoutMinutes = dict
    Limits = dict
    Constraints = dict
    Specification = dict
    Issue = dict
    AcceptanceResult = dict
    AttemptRecord = dict
    StallRecord = dict
    HaltRecord = dict
    ServerWait = dict
    HandoffData = dict
    Lease = dict
    Breaker = dict
    RoleCost = dict
    Contract = dict
    TaskFields = dict
    JudgeUsage = dict
    JudgeReport = dict
    HistoryEntry = dict


class TaskRefs(NamedTuple):
    base_branch: str
    task_branch: str
    base_commit: str


def task_refs(contract: Contract) -> TaskRefs:
    """The git refs `setup-task` recorded; WrongState before it has run."""
    git = contract["git"]
    task_branch = git.get("task_branch")
    if not task_branch:
        raise WrongState(f"task {contract['task_id']} has no task branch yet: run `hub setup-task` first")
    return TaskRefs(git.get("base_branch") or "", task_branch, git.get("base_commit") or "")


_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_STR_LIST = {"type": "array", "items": _STR}
_OBJ_LIST = {"type": "array", "items": {"type": "object"}}
_NUM = {"type": "number", "minimum": 0}
_INT = {"type": "integer", "minimum": 0}
_ROLE_COST = {
    "type": "object",
    "properties": {"tokens_in": _INT, "tokens_out": _INT, "seconds": _NUM, "usd": _NUM, "calls": _INT},
}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


SCHEMA: dict[str, Any] = _obj(
    [
        "schema_version",
        "task_id",
        "project",
        "complexity",
        "status",
        "attempt",
        "timestamps",
        "git",
        "roles",
        "limits",
        "constraints",
        "specification",
        "handoff_data",
        "history",
    ],
    schema_version={"const": SCHEMA_VERSION},
    task_id={"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$"},
    title=_STR,
    project={"type": "string", "minLength": 1},
    complexity={"enum": list(COMPLEXITIES)},
    status={"enum": [state.value for state in STATES]},
    status_reason=_STR_OR_NULL,
    attempt={"type": "integer", "minimum": 1},
    timestamps=_obj(
        ["created_at", "updated_at"],
        created_at=_STR,
        updated_at=_STR,
        deadline_at=_STR_OR_NULL,
    ),
    git=_obj(
        [],
        repo_root=_STR_OR_NULL,
        base_branch=_STR_OR_NULL,
        task_branch=_STR_OR_NULL,
        base_commit=_STR_OR_NULL,
        worktree=_STR_OR_NULL,
    ),
    roles=_obj(["implementer", "local_reviewer", "judge"], implementer=_STR, local_reviewer=_STR, judge=_STR),
    limits=_obj(
        ["max_rebuttals", "max_review_cycles", "timeout_minutes"],
        max_rebuttals=_INT,
        max_review_cycles={"type": "integer", "minimum": 1},
        timeout_minutes=_obj(
            ["implementer", "local_review", "judge"],
            implementer={"type": "number", "exclusiveMinimum": 0},
            local_review={"type": "number", "exclusiveMinimum": 0},
            judge={"type": "number", "exclusiveMinimum": 0},
        ),
        token_budget={"type": ["integer", "null"], "minimum": 0},
        cost_ceiling_usd={"type": ["number", "null"], "minimum": 0},
        max_changed_files={"type": "integer", "minimum": 1},
    ),
    constraints=_obj(
        ["allowed_paths", "forbidden_paths"],
        allowed_paths=_STR_LIST,
        forbidden_paths=_STR_LIST,
        delete_allowed={"type": "boolean"},
        max_diff_lines={"type": ["integer", "null"], "minimum": 1},
    ),
    specification=_obj(
        ["requirements"],
        source_files=_STR_LIST,
        target_file=_STR_OR_NULL,
        requirements={"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        acceptance_criteria=_STR_LIST,
        acceptance_commands=_STR_LIST,
    ),
    handoff_data=_obj(
        [],
        changed_files=_STR_LIST,
        diff_summary=_STR_OR_NULL,
        local_review_passed={"type": ["boolean", "null"]},
        local_review_issues=_OBJ_LIST,
        judge_verdict={"type": ["string", "null"]},
        judge_blocking_issues=_OBJ_LIST,
        judge_suggestions={"type": "array", "items": {"type": ["string", "object"]}},
        judge_summary=_STR,
        acceptance_results=_OBJ_LIST,
        attempts=_OBJ_LIST,
        stalls=_OBJ_LIST,
        stashes=_STR_LIST,
        halt={"type": "object"},
        resume_notes=_STR_LIST,
        review_requested_at=_STR,
        merge_commit=_STR,
        reviewed_commit=_STR,
        merge_wait=_STR,
    ),
    lock={
        "type": ["object", "null"],
        "properties": {"held_by": _STR_OR_NULL, "acquired_at": _STR_OR_NULL, "expires_at": _STR_OR_NULL},
    },
    breaker={
        "type": "object",
        "properties": {
            "status": {"enum": ["closed", "tripped"]},
            "trigger": _STR_OR_NULL,
            "reason": _STR_OR_NULL,
            "counters": {"type": "object", "additionalProperties": _INT},
        },
    },
    cost={"type": "object", "additionalProperties": _ROLE_COST},
    history={
        "type": "array",
        "items": _obj(["timestamp", "event", "from", "to"], timestamp=_STR, event=_STR, to=_STR),
    },
)

JUDGE_REPORT_SCHEMA: dict[str, Any] = _obj(
    ["verdict"],
    verdict={"enum": list(VERDICTS)},
    summary=_STR,
    blocking_issues={
        "type": "array",
        "items": _obj(
            ["description"],
            id=_STR,
            severity=_STR,
            file=_STR_OR_NULL,
            line={"type": ["integer", "null"]},
            description=_STR,
            fix_required=_STR_OR_NULL,
        ),
    },
    suggestions={"type": "array", "items": {"type": ["string", "object"]}},
    usage=_obj(
        [],
        prompt_tokens=_INT,
        completion_tokens=_INT,
        model=_STR,
        cost_usd=_NUM,
    ),
)


# --- time -----------------------------------------------------------------------------------------


def now_utc() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- validation -------------------------------------------------------------------------------------


def schema_hash() -> str:
    import hashlib

    text = json.dumps([SCHEMA, JUDGE_REPORT_SCHEMA], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def _validator(which: str) -> Any:
    # Validators generated by scripts/gen_validators.py cost ~1 ms to import; compiling the schema
    # at run time costs tens of milliseconds on every command. Stale ones are never used.
    import importlib

    try:
        generated = importlib.import_module(
            "hub.state._validate_contract" if which == "contract" else "hub.state._validate_judge"
        )
    except ImportError:
        generated = None
    if generated is not None and schema_hash() == generated.SCHEMA_HASH:
        return generated.validate
    import fastjsonschema

    return fastjsonschema.compile(SCHEMA if which == "contract" else JUDGE_REPORT_SCHEMA)


def _invalid(file: str, exc: Any) -> ContractInvalid:
    # fastjsonschema names fields "data.limits.max_rebuttals" / "data.history[2].event".
    name = str(exc.name or "data")
    path = "$" + name[len("data") :] if name.startswith("data") else name
    if getattr(exc, "rule", None) == "required" and isinstance(exc.value, dict):
        missing = [key for key in exc.definition.get("required", []) if key not in exc.value]
        if missing:
            return ContractInvalid(file, f"{path}.{missing[0]}", "required field is missing")
    return ContractInvalid(file, path, str(exc.message).replace(name, "value"))


def validate(contract: Any, file: str = "TASK_CONTRACT.json") -> Contract:
    """Check a contract against the schema and the rules a schema cannot say; return it unchanged."""
    if not isinstance(contract, dict):
        raise ContractInvalid(file, "$", "expected a JSON object")
    try:
        _validator("contract")(contract)
    except ValueError as exc:  # fastjsonschema's JsonSchemaValueException, or the generated module's
        raise _invalid(file, exc) from None
    constraints = contract["constraints"]
    allowed = set(constraints["allowed_paths"])
    for i, path in enumerate(constraints["forbidden_paths"]):
        if path in allowed:
            raise ContractInvalid(
                file,
                f"$.constraints.forbidden_paths[{i}]",
                f"'{path}' is listed as both allowed and forbidden",
            )
    _check_paths(contract, file)
    _check_numbers(contract, file)
    for key in ("created_at", "updated_at", "deadline_at"):
        value = contract["timestamps"].get(key)
        if value is not None:
            try:
                parse_iso(value)
            except ValueError:
                raise ContractInvalid(
                    file, f"$.timestamps.{key}", f"'{value}' is not an ISO 8601 time"
                ) from None
    return cast("Contract", contract)


# Upper bounds a schema minimum leaves open: 1e300 minutes overflowed a timedelta into a traceback.
NUMBER_BOUNDS: dict[tuple[str, ...], float] = {
    ("attempt",): 10_000,
    ("limits", "max_rebuttals"): 1_000,
    ("limits", "max_review_cycles"): 1_000,
    ("limits", "timeout_minutes", "implementer"): 7 * 24 * 60,
    ("limits", "timeout_minutes", "local_review"): 7 * 24 * 60,
    ("limits", "timeout_minutes", "judge"): 30 * 24 * 60,
    ("limits", "token_budget"): 10**12,
    ("limits", "cost_ceiling_usd"): 10**9,
    ("limits", "max_changed_files"): 100_000,
    ("constraints", "max_diff_lines"): 10**7,
}


def _check_numbers(contract: dict[str, Any], file: str) -> None:
    for keys, bound in NUMBER_BOUNDS.items():
        value: Any = contract
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, bool):
            continue
        if not math.isfinite(value) or value > bound:
            raise ContractInvalid(
                file, "$." + ".".join(keys), f"{value!r} is out of range (at most {bound:g})"
            )


def path_problem(path: str) -> str | None:
    """Why a contract path cannot name a file inside the repository, else None. Pure: the path's shape
    only; what a symlink on the way points to is checked where the file is opened."""
    clean = path.strip().replace("\\", "/")
    if not clean:
        return "is empty"
    if "\x00" in clean:
        return "contains a NUL byte"
    if clean.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", clean):
        return "is not inside the repository (give a path relative to its root)"
    if ".." in clean.split("/"):
        return "is not inside the repository ('..')"
    if any(len(part.encode("utf-8")) > 255 for part in clean.split("/")):
        return "has a path component longer than 255 bytes"
    return None


def _check_paths(contract: dict[str, Any], file: str) -> None:
    spec, constraints = contract["specification"], contract["constraints"]
    named: list[tuple[str, Any]] = [("$.specification.target_file", spec.get("target_file"))]
    named += [(f"$.specification.source_files[{i}]", p) for i, p in enumerate(spec.get("source_files") or [])]
    for key in ("allowed_paths", "forbidden_paths"):
        named += [(f"$.constraints.{key}[{i}]", p) for i, p in enumerate(constraints.get(key) or [])]
    for where, path in named:
        if path is None:
            continue
        problem = path_problem(path)
        if problem:
            raise ContractInvalid(file, where, f"'{path}' {problem}")


def validate_judge_report(report: Any, file: str = "JUDGE_REPORT.json") -> JudgeReport:
    if not isinstance(report, dict):
        raise ContractInvalid(file, "$", "expected a JSON object")
    try:
        _validator("judge")(report)
    except ValueError as exc:
        raise _invalid(file, exc) from None
    return cast("JudgeReport", report)


@cache
def _verdict_line() -> re.Pattern[str]:
    # Compiled on first use: this case-insensitive pattern takes ~4 ms to compile, which every command
    # paid at start-up (bench/bench_startup.py) though only a markdown judge report needs it.
    return re.compile(r"^\W*verdict\W*:?\W*([A-Za-z_]+)", re.IGNORECASE | re.MULTILINE)


def judge_report_from_markdown(text: str, file: str = "JUDGE_REPORT.md") -> JudgeReport:
    """A JUDGE_REPORT.md with a `Verdict: X` line; its bullets under 'Blocking' become blocking issues."""
    match = _verdict_line().search(text)
    if not match:
        raise ContractInvalid(file, "Verdict", "no 'Verdict: PASS|CONDITIONAL|FAIL|CRITICAL_HALT' line")
    verdict = match.group(1).upper()
    if verdict not in VERDICTS:
        raise ContractInvalid(
            file, "Verdict", f"unknown verdict '{match.group(1)}'; expected one of {', '.join(VERDICTS)}"
        )
    issues: list[Issue] = []
    in_blocking = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            in_blocking = "blocking" in stripped.lower()
        elif in_blocking and stripped[:2] in ("- ", "* "):
            issues.append(
                {"id": f"B{len(issues) + 1}", "severity": "major", "description": stripped[2:].strip()}
            )
    return validate_judge_report(
        {"verdict": verdict, "blocking_issues": issues, "summary": text.strip()}, file
    )


# --- files ---------------------------------------------------------------------------------------------


def load(path: Path) -> Contract:
    """Read and validate a contract; ContractInvalid names the file and the first bad field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractInvalid(str(path), "$", "no such file") from None
    except UnicodeDecodeError as exc:
        raise ContractInvalid(str(path), "$", f"not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractInvalid(
            str(path), "$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return validate(data, str(path))


def save(path: Path, contract: Contract, now: datetime) -> Contract:
    """Validate, stamp `updated_at`, and atomically replace the file. Returns the saved contract."""
    contract["timestamps"]["updated_at"] = iso(now)
    validate(contract, str(path))
    write_atomic(path, json.dumps(contract, indent=2, ensure_ascii=False) + "\n")
    _remove_stale_temps(path, now)
    return contract


STALE_TEMP_SECONDS = 60


def _remove_stale_temps(path: Path, now: datetime) -> None:
    # A save killed between mkstemp and os.replace leaves its temp file behind. Old ones only:
    # a younger one may belong to a writer that is still running.
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if now.timestamp() - temp.stat().st_mtime > STALE_TEMP_SECONDS:
                temp.unlink()
        except OSError:
            continue


# --- new contracts ---------------------------------------------------------------------------------------


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "task"


def make_task_id(project: str, title: str, now: datetime) -> str:
    """`PROJECT-MMDDHHMMSS-slug`."""
    return f"{slugify(project, 24)}-{now.astimezone(UTC).strftime('%m%d%H%M%S')}-{slugify(title)}"


DEFAULT_LIMITS: Limits = {
    "max_rebuttals": 2,
    "max_review_cycles": 3,
    "timeout_minutes": {"implementer": 30, "local_review": 15, "judge": 60},
    "token_budget": 500_000,
    "cost_ceiling_usd": 5.0,
    "max_changed_files": DEFAULT_MAX_CHANGED_FILES,
}


def new_contract(
    *,
    project: str,
    title: str,
    requirements: list[str],
    now: datetime,
    roles: dict[str, str],
    target_file: str | None = None,
    source_files: list[str] | None = None,
    acceptance_criteria: list[str] | None = None,
    acceptance_commands: list[str] | None = None,
    allowed_paths: list[str] | None = None,
    forbidden_paths: list[str] | None = None,
    complexity: str = "minor",
    max_diff_lines: int | None = None,
    global_timeout_hours: float = 4.0,
) -> Contract:
    """A fresh, valid contract in `pending_implementer`."""
    source_files = list(source_files or [])
    if allowed_paths is None:
        allowed_paths = sorted({p for p in [target_file, *source_files] if p})
    contract: Contract = {
        "schema_version": SCHEMA_VERSION,
        "task_id": make_task_id(project, title, now),
        "title": title,
        "project": project,
        "complexity": complexity,
        "status": "pending_implementer",
        "status_reason": "created",
        "attempt": 1,
        "timestamps": {
            "created_at": iso(now),
            "updated_at": iso(now),
            "deadline_at": iso(now + timedelta(hours=global_timeout_hours)),
        },
        "git": {"repo_root": None, "base_branch": None, "task_branch": None, "base_commit": None},
        "roles": {
            "implementer": roles.get("implementer", ""),
            "local_reviewer": roles.get("local_reviewer", ""),
            "judge": roles.get("judge", ""),
        },
        "limits": copy.deepcopy(DEFAULT_LIMITS),
        "constraints": {
            "allowed_paths": allowed_paths,
            "forbidden_paths": list(forbidden_paths or []),
            "delete_allowed": False,
            "max_diff_lines": max_diff_lines,
        },
        "specification": {
            "source_files": source_files,
            "target_file": target_file,
            "requirements": list(requirements),
            "acceptance_criteria": list(acceptance_criteria or []),
            "acceptance_commands": list(acceptance_commands or []),
        },
        "handoff_data": {
            "changed_files": [],
            "diff_summary": None,
            "local_review_passed": None,
            "local_review_issues": [],
            "judge_verdict": None,
            "judge_blocking_issues": [],
            "judge_suggestions": [],
            "acceptance_results": [],
            "attempts": [],
        },
        "lock": None,
        "breaker": {"status": "closed", "trigger": None, "reason": None, "counters": {}},
        "cost": {},
        "history": [],
    }
    return validate(contract, "new contract")


_HEADING = re.compile(r"^#+\s*(.+?)\s*$")
PROPOSAL_FIELD = re.compile(
    r"^\s*(?:[-*]\s*)?\**(target(?: file)?|source(?: files?)?|complexity)\**\s*:\s*(.+)$", re.IGNORECASE
)


def proposal_fields(markdown: str, file: str = "proposal") -> TaskFields:
    """Title (first heading), requirements (bullets under a 'Requirements' heading), target and sources.

    Recognised lines: `Target: path`, `Source: a.py, b.py`, `Complexity: minor`; a section named
    'Acceptance' gives acceptance criteria, one named 'Commands' gives acceptance commands.
    """
    title: str | None = None
    section = ""
    fields: TaskFields = {
        "requirements": [],
        "acceptance_criteria": [],
        "acceptance_commands": [],
        "source_files": [],
        "target_file": None,
    }
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            if title is None:
                title = heading.group(1)
            section = heading.group(1).lower()
            continue
        field = PROPOSAL_FIELD.match(line)
        if field:
            key, value = field.group(1).lower(), field.group(2).strip().strip("`")
            if key.startswith("target"):
                fields["target_file"] = value
            elif key.startswith("source"):
                fields["source_files"] = [v.strip().strip("`") for v in value.split(",") if v.strip()]
            else:
                fields["complexity"] = value.lower()
            continue
        bullet = re.match(r"^\s*(?:[-*]|\d+[.)])\s+(.+)$", line)
        if not bullet:
            continue
        item = bullet.group(1).strip()
        if "requirement" in section:
            fields["requirements"].append(item)
        elif "acceptance" in section or "criteria" in section:
            fields["acceptance_criteria"].append(item)
        elif "command" in section:
            fields["acceptance_commands"].append(item.strip("`"))
    if title is None:
        raise ContractInvalid(file, "title", "no '# Title' heading")
    if not fields["requirements"]:
        raise ContractInvalid(file, "requirements", "no bullet list under a 'Requirements' heading")
    if fields.get("complexity") not in (None, *COMPLEXITIES):
        raise ContractInvalid(
            file, "complexity", f"'{fields['complexity']}' is not one of {', '.join(COMPLEXITIES)}"
        )
    fields["title"] = title
    return fields
