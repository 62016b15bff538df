"""The task contract (schema 2.0): its shape, declared once.

The TypedDicts here are the shape mypy checks, and the file's JSON schema is derived from them
(`hub.state.schema.contract_schema`, generated into `hub.state._validate_contract` by
scripts/gen_validators.py): a key not declared here is refused in the file. `Verdict`, the names a
contract's fields take, the timestamp format and `task_refs` go with them. Changing the contract is
`hub.state.task.Task`.
Reading and writing a contract is `hub.state.store`; a new one is `hub.state.new_task`; a judge's
report is `hub.state.judge_report`. Nothing here touches a file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict

from hub.core.errors import WrongState

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


# --- the contract's shape (hub.state.schema derives the file's JSON schema from it) ---------------------


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
        # Symbolic links the change may add, each path named exactly (a person's choice, set by hand):
        # any other link is refused before a commit and before the merge (issue 38).
        links_allowed: NotRequired[list[str]]
        max_diff_lines: NotRequired[int | None]

    class Specification(TypedDict):
        requirements: list[str]
        source_files: NotRequired[list[str]]
        target_file: NotRequired[str | None]
        acceptance_criteria: NotRequired[list[str]]
        acceptance_commands: NotRequired[list[str]]
        # The task named no file: the implementer's first call finds them with the repository map
        # (hub.phases.attempt_files), and the files it chose become source_files and allowed_paths.
        find_files: NotRequired[bool]

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
        kind: str  # the local reviewer's: security, bug, requirement or style
        quote: str  # the line of the change a reviewer's finding is about (hub.phases.evidence)

    class AcceptanceResult(TypedDict):
        command: str
        exit_code: int | None
        seconds: float
        timed_out: bool
        failure: NotRequired[str]  # resource_limit, no_tests_run...: why an exit 0 still failed

    class AttemptRecord(TypedDict):
        attempt: int
        content_hash: str
        commit: str | None
        changed_files: list[str]
        verdict: str | None

    class StallRecord(TypedDict):
        # A stall is read by role, attempt and reason; the rest is for a person.
        timestamp: NotRequired[str]
        role: str
        attempt: int
        reason: str
        detail: NotRequired[str]
        raw_tail: NotRequired[str]
        timings: NotRequired[dict[str, float]]

    class ServerWait(TypedDict):
        """An outage being waited out by the running phase (`hub status` shows it)."""

        since: str
        waited_seconds: float
        limit_minutes: float
        attempts: int
        next_try_seconds: float
        error: str

    class FoundFiles(TypedDict):
        """The files the implementer chose from the repository map (a task that named none), for `hub
        eval`'s files found / files needed."""

        attempt: int
        files: list[str]
        refused: list[str]  # what else the answer named, and why it was not taken
        map_files: int  # files the map showed
        map_tokens: int
        repository_files: int  # files the map was made from

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
        judge_started_at: str  # when run-judge started the configured judge (its clock is run-judge's own)
        review_request_mtime_ns: int  # a judge report older than this is never applied
        merge_commit: str
        reviewed_commit: str  # the task branch's commit the judge reviews; finalize-task merges only it
        merge_wait: str  # why the merge waits (the user's checkout has local changes); retried
        server_wait: ServerWait
        sandbox: str  # whether the acceptance commands ran sandboxed, and how
        committing: Committing
        found_files: FoundFiles

    class Lease(TypedDict, total=False):
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
        {
            "timestamp": str,
            "event": str,
            "from": str,
            "to": str,
            "reason": NotRequired[str | None],
            "attempt": NotRequired[int],
        },
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
    FoundFiles = dict
    ServerWait = dict
    HandoffData = dict
    Lease = dict
    Breaker = dict
    RoleCost = dict
    Contract = dict
    TaskFields = dict
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
        raise WrongState(
            f"task {contract['task_id']} has no task branch yet", hint="run `hub setup-task` first"
        )
    return TaskRefs(git.get("base_branch") or "", task_branch, git.get("base_commit") or "")


# --- time: the contract's timestamps -------------------------------------------------------------------


def now_utc() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def elapsed(started: str | None, now: datetime, earliest: str | None = None) -> timedelta | None:
    """Wall time since `started`, recorded by this or another process; None when it cannot be trusted
    as a clock: missing or unreadable, in the future (the clock was stepped back, or another machine's
    is ahead), or before `earliest` (the task's creation: a clock stepped far back when it was written).
    A clock that is None never runs out (issue 35: a stepped clock halted tasks nobody had looked at)."""
    try:
        start = parse_iso(started) if started else None
        floor = parse_iso(earliest) if earliest else None
    except ValueError:
        return None
    if start is None or start > now or (floor is not None and start < floor):
        return None
    return now - start
