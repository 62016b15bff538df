"""`hub run-local-review`: static rules, the syntax check, then the local reviewer model.

A blocking rule finding (severity error, tagged security) halts the task with the issue, file and line
in ERIK_HALT.md. A reviewer's critical finding halts only on evidence (hub.phases.evidence: a security
finding quoting a line the change adds, confirmed by a second look); every other finding goes on to the
judge, recorded so the judge sees it. An unusable reviewer answer is a review stall (two strikes).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from hub.core.errors import (
    HubError,
    RuleError,
    WorkerError,
    describe,
)
from hub.core.files import read_text_capped
from hub.core.log import get_logger
from hub.core.redaction import user_secrets
from hub.phases import prompt_parts
from hub.phases.context import Context
from hub.phases.evidence import agrees, downgrade, second_look_prompt, sort_criticals
from hub.phases.judge import enter_judge_review
from hub.phases.model_calls import generate
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.session import pre_phase_trip, require_setup, running
from hub.phases.stall import Stall, model_unavailable, review_stall, worker_failure
from hub.repo import gitops
from hub.review.code import syntax_errors
from hub.review.scan import is_blocking, scan_paths
from hub.state.breakers import Trip
from hub.state.contract import Issue, task_refs
from hub.state.machine import PENDING_LOCAL_REVIEW, Event
from hub.state.triggers import Trigger
from hub.workers import budget
from hub.workers.bridge import request_for

if TYPE_CHECKING:
    from hub.workers.base import Worker

log = get_logger(__name__)

SEVERITIES = ("critical", "major", "minor")
KINDS = ("security", "bug", "requirement", "style")
MAX_DIFF_CHARS = 40_000
# What the diff may not take from the reviewer's context: its answer, and the note saying the diff was cut.
CUT_NOTE_TOKENS = 40
# Second looks per review: each is a model call, and more critical findings than this in one small change
# are a reviewer crying wolf, not a change with that many holes.
MAX_SECOND_LOOKS = 2


class ReviewReport(TypedDict):
    """The local reviewer's answer, checked and normalised (`parse_review`): what the review decides on."""

    passed: bool
    critical: bool
    issues: list[Issue]  # every one with severity, file, line, description and source "reviewer"


class ReviewParseError(HubError, ValueError):
    """The reviewer's answer holds no usable review object."""


def parse_review(text: str) -> ReviewReport:
    """The reviewer's JSON object, from a fenced block or bare in the text (think blocks already gone)."""
    candidates = [m.group(1) for m in re.finditer(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)]
    candidates += _balanced_objects(text)
    if not candidates:
        raise ReviewParseError("no JSON object in the answer")
    problems = []
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as exc:
            problems.append(f"invalid JSON ({exc.msg})")
            continue
        try:
            return _normalize(data)
        except ReviewParseError as exc:
            problems.append(str(exc))
    raise ReviewParseError("; ".join(dict.fromkeys(problems)))


def _balanced_objects(text: str) -> list[str]:
    found, depth, start, in_string, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            escaped = (ch == "\\") and not escaped
            if ch == '"' and not escaped:
                in_string = False
            continue
        if ch == '"' and depth:
            in_string = True
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def _normalize(data: Any) -> ReviewReport:
    if not isinstance(data, dict) or "passed" not in data:
        raise ReviewParseError('the JSON object has no "passed" field')
    if not isinstance(data["passed"], bool):
        raise ReviewParseError('"passed" must be true or false')
    issues = data.get("issues") or []
    if not isinstance(issues, list):
        raise ReviewParseError('"issues" must be a list')
    clean: list[Issue] = []
    for issue in issues:
        if isinstance(issue, str):
            issue = {"description": issue}
        if not isinstance(issue, dict) or not issue.get("description"):
            continue
        severity = str(issue.get("severity", "minor")).lower()
        line = issue.get("line")
        kind = str(issue.get("kind") or "").lower()
        entry: Issue = {
            # A placeholder copied from a prompt ("critical|major|minor") is no rating: minor.
            "severity": severity if severity in SEVERITIES else "minor",
            "file": issue.get("file"),
            "line": line if isinstance(line, int) else None,
            "description": str(issue["description"]),
            "source": "reviewer",
        }
        if kind in KINDS:
            entry["kind"] = kind
        if isinstance(issue.get("quote"), str) and issue["quote"].strip():
            entry["quote"] = issue["quote"].strip()[:500]
        clean.append(entry)
    # A bare `"critical": true` with no critical issue names nothing to weigh: only issues count.
    critical = any(i["severity"] == "critical" for i in clean)
    return {"passed": data["passed"], "critical": critical, "issues": clean}


def run_local_review(ctx: Context) -> Outcome:
    """Static gate, syntax check and the reviewer model on the task's changed files."""
    with running(ctx, "run-local-review", {PENDING_LOCAL_REVIEW}) as run:
        require_setup(run)
        trip = pre_phase_trip(run)
        if trip:
            return run.halt(trip)
        run.start_clock(run.contract["limits"]["timeout_minutes"]["local_review"])
        return Review(run).execute()


def changed_files(run: Run, committed: str | None) -> list[str]:
    """The files the task branch changes: those the implementer's last attempt recorded with its commit
    (finish_code_written), while the branch is still at that commit. The review checks the branch as it
    is, so the diff is computed again when it is not: the checkpoint just committed leftovers, a person
    committed during a halt and resumed here, or the branch moved after a review (branch_moved)."""
    attempts = run.contract["handoff_data"].get("attempts") or []
    last = attempts[-1] if attempts else None
    refs = task_refs(run.contract)
    if (
        committed is None
        and last is not None
        and last["attempt"] == run.contract["attempt"]
        and last["commit"]
        and last["commit"] == gitops.commit_of(run.repo, refs.task_branch)
    ):
        return list(last["changed_files"])
    return list(gitops.diff_stats(run.repo, refs.base_commit, refs.task_branch).files)


class Review:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.contract = run.contract
        self.config = run.ctx.config
        self.model = self.config.role("local_reviewer").model
        self.started = time.perf_counter()
        refs = task_refs(self.contract)
        # The task's own edits are what is reviewed: any left uncommitted (a kill in an older hub between
        # code_written and its commit) are committed first, so the diff is never empty by accident.
        committed = run.checkpoint(Event.CODE_WRITTEN)
        self.diff = gitops.diff_text(run.repo, refs.base_commit, refs.task_branch)
        root = run.worktree
        self.files = [f for f in changed_files(run, committed) if (root / f).is_file()]

    def execute(self) -> Outcome:
        leaked = self._user_secrets()
        if leaked is not None:
            return leaked
        static = self._static()
        if isinstance(static, Outcome):
            return static
        worker = self.run.ctx.worker("local_reviewer")
        try:
            review = self._ask(worker, static)
            if not isinstance(review, Outcome):
                review = self._weigh(worker, review)
        except WorkerError as exc:
            failure = worker_failure(exc, self.model, self.config.role("local_reviewer").backend)
            return self.run.halt(failure) if isinstance(failure, Trip) else self._stall(failure)
        finally:
            worker.close()
        if isinstance(review, Outcome):
            return review
        return self._decide(static, review)

    def _user_secrets(self) -> Outcome | None:
        """A halt when the change adds one of the user's own secrets (a .env value, a credential-named
        variable's value, a token of the git configuration, a private key): sandboxed code can read the
        git metadata and tracked files and write what it read into the file it may change. Before any
        prompt, REVIEW_REQUEST.md or merge carries it on; the values are never shown, only their kinds."""
        added = "\n".join(
            line[1:] for line in self.diff.splitlines() if line.startswith("+") and not line.startswith("+++")
        )
        kinds = user_secrets(self.run.ctx.config, self.run.worktree).known_in(added)
        if not kinds:
            return None
        return self.run.halt(
            Trip(
                Trigger.SECRET_IN_CHANGE,
                f"the change adds your own secrets ({', '.join(kinds)}); the values are not shown here",
                {"kinds": kinds},
                hint="read the task's diff (git diff on its branch) and remove them; then `hub resume` the "
                "task, or reject it",
            ),
            event=Event.CRITICAL_FLAW,
        )

    def _static(self) -> list[Issue] | Outcome:
        """ast-grep rules and tree-sitter syntax errors; a blocking finding halts at once."""
        issues: list[Issue] = []
        try:
            findings = (
                scan_paths(self.run.worktree, self.files, config_root=self.run.ctx.repo_root)
                if self.files
                else []
            )
        except RuleError as exc:
            # A broken rule set must not wave a change through: make it the judge's business.
            findings = []
            issues.append(
                {
                    "severity": "major",
                    "file": None,
                    "line": None,
                    "source": "rules",
                    "description": f"the static rules could not run: {describe(exc)}",
                }
            )
        for f in findings:
            issue: Issue = {
                "severity": "critical" if is_blocking(f) else ("major" if f.severity == "error" else "minor"),
                "file": f.file,
                "line": f.line,
                "description": f"{f.rule_id}: {f.message}",
                "source": "rules",
                "rule_id": f.rule_id,
                "tags": list(f.tags),
            }
            if is_blocking(f):
                self._record_issues([*issues, issue], passed=False)
                return self.run.halt(
                    Trip(
                        Trigger.CRITICAL_FLAW,
                        f"rule {f.rule_id} at {f.file}:{f.line}: {f.message}",
                        {"rule": f.rule_id, "file": f.file, "line": f.line, "note": f.note},
                    ),
                    event=Event.CRITICAL_FLAW,
                )
            issues.append(issue)
        root = self.run.worktree
        for rel in self.files:
            # Never through a link, never more than the cap: the model's code shaped this folder.
            source = read_text_capped(root / rel, root=root)
            for err in syntax_errors(rel, source or "")[:5]:
                issues.append(
                    {
                        "severity": "major",
                        "file": rel,
                        "line": err.line,
                        "source": "syntax",
                        "description": f"syntax error: {err.message}",
                    }
                )
        return issues

    def _ask(self, worker: Worker, static: list[Issue]) -> ReviewReport | Outcome:
        trip = model_unavailable(self.run, worker, self.model, "local_reviewer")
        if trip:
            return self.run.halt(trip)
        prompt = self._prompt(static)
        request = request_for(self.config, "local_reviewer", prompt)
        generation = generate(self.run, worker, "local_reviewer", request, "review")
        try:
            return parse_review(generation.text)
        except ReviewParseError as exc:
            return self._stall(
                Stall("malformed_output", str(exc), generation.raw or generation.text),
                {"model call": round(generation.seconds, 3)},
            )

    def _weigh(self, worker: Worker, review: ReviewReport) -> ReviewReport:
        """Keep as critical only the findings with evidence (hub.phases.evidence): a security finding
        that quotes a line the change adds, which a second look at that line alone confirms. The rest
        are major findings for the judge, each saying why it did not halt."""
        judged = sort_criticals(review["issues"], self.diff)
        confirmed: list[Issue] = []
        kept = list(judged.downgraded)
        for n, issue in enumerate(judged.candidates):
            if n >= MAX_SECOND_LOOKS:
                kept.append(downgrade(issue, "more critical findings than the review looks at twice"))
                continue
            request = request_for(self.config, "local_reviewer", second_look_prompt(issue, self.config))
            answer = generate(self.run, worker, "local_reviewer", request, "second-look")
            if agrees(answer.text):
                confirmed.append(
                    {**issue, "description": f"{issue['description']} (confirmed by a second look)"}
                )
            else:
                kept.append(downgrade(issue, "a second look at the quoted line did not agree"))
        others = [i for i in review["issues"] if i["severity"] != "critical"]
        if kept:
            log.info("review.downgraded", task=self.run.task_id, findings=len(kept), confirmed=len(confirmed))
        return {"passed": review["passed"], "critical": bool(confirmed), "issues": confirmed + kept + others}

    def _acceptance_lines(self) -> str:
        results = self.contract["handoff_data"].get("acceptance_results") or []
        return (
            "\n".join(
                f"- `{r['command']}`: {'passed' if r['exit_code'] == 0 else 'failed (exit ' + str(r['exit_code']) + ')'}"
                for r in results
            )
            or "(no acceptance commands ran)"
        )

    def _prompt(self, static: list[Issue]) -> str:
        """The reviewer's prompt, its diff cut so the whole prompt fits the model's num_ctx with room for
        the answer (a prompt that does not fit is refused, and the review would stall on every big change).
        The judge still gets the whole diff in REVIEW_REQUEST.md."""

        def render(diff: str) -> str:
            return prompt_parts.render(
                self.config.trust_root,
                "local_reviewer",
                task_id=self.run.task_id,
                title=self.contract.get("title", ""),
                requirements=prompt_parts.bullets(self.contract["specification"]["requirements"]),
                acceptance=self._acceptance_lines(),
                static_findings=prompt_parts.issue_lines(static),
                diff=diff,
            )

        if not self.diff.strip():
            return render("(empty diff)")
        request = request_for(self.config, "local_reviewer", render(""))
        fit = budget.plan(
            request.prompt, request.system, request.num_ctx, request.num_predict, scale=request.token_scale
        )
        room = fit.prompt_room - fit.prompt_tokens - CUT_NOTE_TOKENS
        shown = budget.fit_text(self.diff[:MAX_DIFF_CHARS], max(0, room), request.token_scale)
        if shown == self.diff:
            return render(self.diff)
        cut = len(self.diff) - len(shown)
        return render(shown + f"\n... (diff cut to fit the reviewer's context: {cut} more characters)")

    def _stall(self, stall: Stall, timings: dict[str, float] | None = None) -> Outcome:
        stall.timings = {**(timings or {}), "review": round(time.perf_counter() - self.started, 3)}
        return review_stall(self.run, stall)

    def _record_issues(self, issues: list[Issue], passed: bool) -> None:
        self.run.task.record_local_review(issues, passed)

    def _decide(self, static: list[Issue], review: ReviewReport) -> Outcome:
        issues = static + review["issues"]
        self.run.task.reset_counters("review_stalls")
        if review["critical"]:
            first = next((i for i in review["issues"] if i["severity"] == "critical"), None) or {
                "description": "the reviewer flagged the change as critical",
                "file": None,
                "line": None,
            }
            self._record_issues(issues, passed=False)
            where = f"{first.get('file')}:{first.get('line')}" if first.get("file") else "the change"
            quoted = f" (the line: {first['quote']})" if first.get("quote") else ""
            return self.run.halt(
                Trip(
                    Trigger.CRITICAL_FLAW,
                    f"the local reviewer found a critical issue in {where}: {first['description']}{quoted}",
                    {"file": first.get("file"), "line": first.get("line"), "model": self.model},
                ),
                event=Event.CRITICAL_FLAW,
            )
        # Any finding, minor ones too, marks the review as not passed: the judge must look at it.
        passed = review["passed"] and not issues
        self._record_issues(issues, passed=passed)
        why = overruled_pass(review, static)
        self.run.task.note_local_review(why)
        event = Event.LOCAL_PASS if passed else Event.LOCAL_WARN
        reason = f"local review: {len(issues)} issues, passed={passed}" + (f" ({why})" if why else "")
        enter_judge_review(self.run, event, reason, diff=self.diff)
        return Outcome(
            "run-local-review",
            self.run.task_id,
            self.run.start_state,
            self.contract["status"],
            f"local review {'passed' if passed else 'found issues'} ({len(issues)} issue(s))"
            + (f": {why}" if why else "")
            + f"; {self.run.ctx.handoff.review_request.name} is ready for the judge",
            data={"passed": passed, "issues": len(issues), **({"why": why} if why else {})},
        )


def overruled_pass(review: ReviewReport, static: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a review the reviewer called passed is recorded as not passed (None: it was not overruled)."""
    if not review["passed"] or not (review["issues"] or static):
        return None
    parts = []
    if review["issues"]:
        severities = sorted({str(i.get("severity") or "unrated") for i in review["issues"]})
        parts.append(f"{len(review['issues'])} issue(s) of its own ({', '.join(severities)})")
    if static:
        parts.append(f"{len(static)} rule finding(s)")
    return (
        f"the reviewer answered passed=true but the review holds {' and '.join(parts)}; "
        "any finding marks it not passed so the judge weighs it"
    )
