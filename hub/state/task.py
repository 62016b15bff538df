"""`Task`: a task's contract and the only way to change it.

Every fact a phase learns about its task is written here by a method named for it (a review requested,
a verdict, an attempt committed, a stall, a halt, a merge...); the contract's shape is
`hub.state.contract`, its file `hub.state.store`. The phases read the contract through the typed
properties or `Task.contract`, and never write it: tests/state/test_task.py fails on a write anywhere else.

Pure: no file, no clock (time is passed in), no git.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from hub.state.contract import iso
from hub.state.machine import ERIK_CONSULTATION, MERGED, REVIEW_COMPLETE, transition

if TYPE_CHECKING:
    from hub.state.contract import (
        AcceptanceResult,
        AttemptRecord,
        Breaker,
        Contract,
        FoundFiles,
        HandoffData,
        HistoryEntry,
        Issue,
        Lease,
        ServerWait,
        StallRecord,
    )
    from hub.state.triggers import Trigger

# The move `rewind_status` records: not an edge of the state machine, a correction of a status the
# history does not back (a hand-set `merged`), so the halt that follows starts from a real state.
REWIND = "rewind"

# The breaker counters a resume clears: what counted towards the halt a person has dealt with.
RESUME_CLEARS = ("stall_strikes", "review_stalls", "interruptions")


class TransitionLine(TypedDict):
    """One line of transition.ndjson (`hub log`)."""

    timestamp: str
    task_id: str
    event: str
    old_status: str
    new_status: str
    status_reason: str | None
    attempt: int | None
    cumulative_cost_usd: float
    repaired: NotRequired[bool]  # written afterwards from the contract's history (`unlogged`)
    at_ns: NotRequired[int]  # stamped by append_transition


def cumulative_cost(contract: Contract) -> float:
    return round(sum(float(role.get("usd", 0.0)) for role in contract.get("cost", {}).values()), 6)


class Task:
    """A task's contract, read through properties and changed only through its methods.

    A plain class (no dataclass): `hub status` imports the state package and must stay light."""

    __slots__ = ("contract",)

    def __init__(self, contract: Contract) -> None:
        # The contract itself, not a copy: `hub.state.store` saves what the methods wrote.
        self.contract = contract

    def __repr__(self) -> str:
        return f"Task({self.task_id!r}, {self.status!r})"

    # --- reads -----------------------------------------------------------------------------------------

    @property
    def task_id(self) -> str:
        return str(self.contract["task_id"])

    @property
    def status(self) -> str:
        return str(self.contract["status"])

    @property
    def attempt(self) -> int:
        return int(self.contract["attempt"])

    @property
    def data(self) -> HandoffData:
        """What the phases hand each other (read it; write it through the methods)."""
        return self.contract["handoff_data"]

    @property
    def verdict(self) -> str | None:
        return self.data.get("judge_verdict")

    @property
    def reviewed_commit(self) -> str | None:
        return self.data.get("reviewed_commit")

    @property
    def task_branch(self) -> str | None:
        return self.contract["git"].get("task_branch")

    @property
    def history(self) -> list[HistoryEntry]:
        return self.contract["history"]

    def counter(self, name: str) -> int:
        return int(self.contract.get("breaker", {}).get("counters", {}).get(name, 0))

    # --- the state machine -----------------------------------------------------------------------------

    def advance(
        self, event: str, now: datetime, reason: str | None = None, resume_to: str | None = None
    ) -> TransitionLine:
        """Apply `event` (InvalidTransition if the machine has no such edge); the transition's line."""
        return self._move(transition(self.status, event, resume_to), event, now, reason)

    def rewind_status(self, now: datetime, reason: str) -> TransitionLine:
        """Put a `merged` the history does not back (set by hand) back to the last state the hub recorded
        (review_complete if that was merged or a halt), so that a halt can start from there."""
        recorded = [str(entry["to"]) for entry in self.history if entry.get("to")]
        last = recorded[-1] if recorded else REVIEW_COMPLETE
        return self._move(
            REVIEW_COMPLETE if last in (MERGED, ERIK_CONSULTATION) else last, REWIND, now, reason
        )

    def _move(self, new: str, event: str, now: datetime, reason: str | None) -> TransitionLine:
        old = self.status
        contract = self.contract
        contract["status"] = new
        contract["status_reason"] = reason or event
        entry: HistoryEntry = {
            "timestamp": iso(now),
            "event": event,
            "from": old,
            "to": new,
            "reason": contract["status_reason"],
            "attempt": contract["attempt"],
        }
        contract["history"].append(entry)
        return {
            "timestamp": entry["timestamp"],
            "task_id": contract["task_id"],
            "event": event,
            "old_status": old,
            "new_status": new,
            "status_reason": contract["status_reason"],
            "attempt": contract["attempt"],
            "cumulative_cost_usd": cumulative_cost(contract),
        }

    # --- a new task ------------------------------------------------------------------------------------

    def claim_id(self, task_id: str) -> None:
        """The id of the folder `hub new` claimed (the title's id, or it with `-N` when taken)."""
        self.contract["task_id"] = task_id

    def set_limits(
        self,
        max_changed_files: int,
        timeout_minutes: dict[str, float | None] | None = None,
        max_rebuttals: int | None = None,
    ) -> None:
        """hub.yaml's limits for a new task (`task_limits`): the clocks it names, its rebuttals."""
        limits = self.contract["limits"]
        limits["max_changed_files"] = max_changed_files
        clocks: dict[str, Any] = limits["timeout_minutes"]  # type: ignore[assignment]
        for phase, minutes in (timeout_minutes or {}).items():
            if minutes is not None and phase in clocks:
                clocks[phase] = float(minutes)
        if max_rebuttals is not None:
            limits["max_rebuttals"] = int(max_rebuttals)

    def set_base(self, base_branch: str | None, base_commit: str | None) -> None:
        """The base setup-task chose, saved before the task branch exists (a killed setup adopts it)."""
        self.contract["git"].update({"base_branch": base_branch, "base_commit": base_commit})

    def set_up(
        self,
        repo_root: str,
        base_branch: str | None,
        task_branch: str,
        base_commit: str | None,
        worktree: str,
    ) -> None:
        """setup-task's result: the task branch from the base, in a worktree of its own."""
        self.contract["git"].update(
            {
                "repo_root": repo_root,
                "base_branch": base_branch,
                "task_branch": task_branch,
                "base_commit": base_commit,
                "worktree": worktree,
            }
        )

    # --- a phase's hold: lease, attempt, counters, cost ------------------------------------------------

    def take_lease(self, holder: str, now: datetime, minutes: float) -> None:
        lease: Lease = {
            "held_by": holder,
            "acquired_at": iso(now),
            "expires_at": iso(now + timedelta(minutes=minutes)),
        }
        self.contract["lock"] = lease

    def drop_lease(self) -> None:
        self.contract["lock"] = None

    def move_attempt(self, by: int = 1) -> int:
        """The one place the attempt counter changes: +1 for a new attempt (rework, retry, a resume to
        the implementer), -1 when a rebuttal takes back the rework its FAIL started. Never below 1."""
        self.contract["attempt"] = max(1, self.contract["attempt"] + by)
        return self.contract["attempt"]

    def _counters(self) -> dict[str, int]:
        return self.contract.setdefault("breaker", {}).setdefault("counters", {})

    def bump(self, name: str, by: int = 1) -> int:
        counters = self._counters()
        counters[name] = counters.get(name, 0) + by
        return counters[name]

    def reset_counters(self, *names: str) -> None:
        """Start the named breaker counters over (what they counted has been dealt with)."""
        counters = self._counters()
        for name in names:
            counters.pop(name, None)

    def add_cost(self, role: str, tokens_in: int, tokens_out: int, seconds: float, usd: float) -> None:
        cost = self.contract.setdefault("cost", {}).setdefault(
            role, {"tokens_in": 0, "tokens_out": 0, "seconds": 0.0, "usd": 0.0, "calls": 0}
        )
        cost["tokens_in"] = cost.get("tokens_in", 0) + int(tokens_in)
        cost["tokens_out"] = cost.get("tokens_out", 0) + int(tokens_out)
        cost["seconds"] = round(cost.get("seconds", 0.0) + seconds, 3)
        cost["usd"] = round(cost.get("usd", 0.0) + usd, 6)
        cost["calls"] = cost.get("calls", 0) + 1

    # --- the implementer's attempt ---------------------------------------------------------------------

    def set_sandbox(self, why: str) -> None:
        """Whether the acceptance commands run sandboxed, and how (the review and the judge read it)."""
        self.data["sandbox"] = why

    def record_acceptance(self, results: list[AcceptanceResult]) -> None:
        self.data["acceptance_results"] = results

    def begin_commit(self, parent: str) -> None:
        """Just before an attempt's commit: recovery finishes an attempt killed after it."""
        self.data["committing"] = {"attempt": self.attempt, "parent": parent}

    def finish_commit(self) -> None:
        """The attempt's commit is done with (recorded, or it failed and the attempt stalls)."""
        self.data.pop("committing", None)

    def record_written(self, changed_files: list[str], summary: str, attempt: AttemptRecord) -> None:
        """An attempt's committed work: its files, the diff's figures, and its record (for `hash_loop`)."""
        data = self.data
        data["changed_files"] = changed_files
        data["diff_summary"] = summary
        data.setdefault("attempts", []).append(attempt)

    def set_found_files(self, found: FoundFiles, allowed: list[str]) -> None:
        """The files the implementer chose for a task that named none: the change may write `allowed` of
        them, which are shown whole from now on, as a task's named sources are. The others (a test module
        the task forbids) are not shown: one can fill a small model's window by itself."""
        self.contract["specification"]["source_files"] = list(allowed)
        self.contract["constraints"]["allowed_paths"] = list(allowed)
        self.data["found_files"] = found

    def drop_found_file(self, path: str) -> None:
        """A file the implementer chose that does not fit the window beside the others: no longer shown
        or writable (its choice stays on record in found_files)."""
        spec, constraints = self.contract["specification"], self.contract["constraints"]
        spec["source_files"] = [f for f in spec.get("source_files", []) if f != path]
        constraints["allowed_paths"] = [f for f in constraints["allowed_paths"] if f != path]

    def add_stall(self, entry: StallRecord) -> None:
        self.data.setdefault("stalls", []).append(entry)

    def add_stash(self, name: str) -> None:
        """A stalled or interrupted attempt's work, kept in a stash a person can look at."""
        self.data.setdefault("stashes", []).append(name)

    # --- the reviews -----------------------------------------------------------------------------------

    def record_local_review(self, issues: list[Issue], passed: bool) -> None:
        self.data["local_review_issues"] = issues
        self.data["local_review_passed"] = passed

    def note_local_review(self, why: str | None) -> None:
        """Why a review the reviewer called passed is recorded as not passed (None: it is not)."""
        self.data["local_review_note"] = why

    def request_review(self, commit: str, now: datetime) -> None:
        """A judge review is requested of this commit and no other (finalize-task merges exactly it)."""
        self.data["review_requested_at"] = iso(now)
        self.data["reviewed_commit"] = commit

    def start_judge(self, now: datetime) -> None:
        """The configured judge starts now: its clock counts from here, not from the request."""
        self.data["judge_started_at"] = iso(now)

    def note_review_request(self, mtime_ns: int) -> None:
        """REVIEW_REQUEST.md's mtime: a judge report older than it never answers it."""
        self.data["review_request_mtime_ns"] = mtime_ns

    def record_verdict(
        self, verdict: str, blocking: list[Issue], suggestions: list[Any], summary: str
    ) -> None:
        """The judge's verdict, on the task and on the attempt it judged."""
        data = self.data
        data["judge_verdict"] = verdict
        data["judge_blocking_issues"] = blocking
        data["judge_suggestions"] = suggestions
        data["judge_summary"] = summary
        for attempt in reversed(data.get("attempts", [])):
            if attempt.get("attempt") == self.attempt:
                attempt["verdict"] = verdict
                break

    def clear_verdict(self) -> None:
        """The branch moved after the verdict: it no longer covers the branch, nor does its merge wait."""
        self.data["judge_verdict"] = None
        self.data.pop("merge_wait", None)

    # --- waits, halts, resumes, the merge --------------------------------------------------------------

    def set_server_wait(self, wait: ServerWait) -> None:
        self.data["server_wait"] = wait

    def clear_server_wait(self) -> None:
        self.data.pop("server_wait", None)

    def set_halt(self, trigger: Trigger, reason: str) -> None:
        """Trip the breaker: the trigger and the reason, on the breaker and in the halt record (whose
        `from_state` is the state the task halts from). The transition is the caller's next step."""
        self.clear_server_wait()
        self.drop_lease()
        breaker: Breaker = {
            **self.contract.get("breaker", {}),
            "status": "tripped",
            "trigger": trigger,
            "reason": reason,
        }
        self.contract["breaker"] = breaker
        self.data["halt"] = {"trigger": trigger, "reason": reason, "from_state": self.status}

    def reset_breakers(self) -> None:
        """A person dealt with the halt: the breaker closes and forgets what counted towards it."""
        breaker = self.contract.setdefault("breaker", {})
        breaker.update({"status": "closed", "trigger": None, "reason": None})
        for name in RESUME_CLEARS:
            breaker.get("counters", {}).pop(name, None)

    def add_resume_note(self, note: str) -> None:
        """A person's note for the implementer's next prompt."""
        self.data.setdefault("resume_notes", []).append(note)

    def clear_halt(self) -> None:
        self.data.pop("halt", None)

    def set_merge_wait(self, why: str) -> None:
        """Why the merge waits (the user's checkout has local changes); `hub next` retries it."""
        self.data["merge_wait"] = why

    def set_merge(self, commit: str) -> None:
        self.data.pop("merge_wait", None)
        self.data["merge_commit"] = commit
