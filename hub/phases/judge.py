"""The judge hand-off: REVIEW_REQUEST.md out, JUDGE_REPORT in, verdicts applied; timeouts and rebuttals."""

from __future__ import annotations

import json
from pathlib import Path

from hub.core.errors import ContractInvalid, WrongState
from hub.core.log import get_logger
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.phases.prompt_parts import render_review_request
from hub.phases.run import Run
from hub.phases.session import running
from hub.phases.status import judge_configured, review_deadline, review_timed_out
from hub.repo import gitops
from hub.state import breakers, handoff
from hub.state.breakers import Trip
from hub.state.contract import VERDICTS, Verdict, task_refs
from hub.state.judge_report import JudgeReport, judge_report_from_markdown, validate_judge_report
from hub.state.machine import (
    JUDGE_REVIEW_IN_PROGRESS,
    PENDING_IMPLEMENTER,
    PENDING_JUDGE_REVIEW,
    PENDING_REBUTTAL,
    REVIEW_COMPLETE,
    TIMEOUT_JUDGE,
    Event,
)
from hub.state.triggers import Trigger

log = get_logger(__name__)


def enter_judge_review(run: Run, event: Event, reason: str | None = None, diff: str | None = None) -> None:
    """Record the move to pending_judge_review and write REVIEW_REQUEST.md for the judge. `diff`: the
    task's diff when the caller has it already (the local review), so it is not computed again. A judge
    report already lying there cannot answer this request (model code, or a stale run, wrote it): it is
    set aside."""
    request_review(run)
    set_aside_stale_reports(run, "it was there before the review was requested")
    run.record(event, reason)
    write_review_request(run, diff)
    run.save()  # the request's mtime, which a report must not predate


def request_review(run: Run) -> None:
    """Start a judge review of the task branch as it is now: the verdict will cover its commit and no
    other (finalize-task merges exactly it), and the review's clock starts now."""
    run.task.request_review(gitops.commit_of(run.repo, task_refs(run.contract).task_branch), run.now)


def set_aside_stale_reports(run: Run, why: str) -> list[Path]:
    """Move judge reports that do not answer the current review request into runs/<task_id>/, logged."""
    hand = run.ctx.handoff
    moved = []
    for path in (hand.judge_report_json, hand.judge_report_md):
        target = handoff.set_aside(hand, path, run.task_id, "stale-judge-report")
        if target is not None:
            log.warning("judge_report.set_aside", task=run.task_id, file=str(path), to=str(target), why=why)
            moved.append(target)
    return moved


def report_is_fresh(run: Run, path: Path) -> bool:
    """A report answers the review request only if it was written after the request was (both times
    from the file system's clock: the request's mtime is recorded when it is written)."""
    written = run.contract["handoff_data"].get("review_request_mtime_ns")
    if written is None:
        return True  # a contract from before this rule: nothing to compare against
    return path.stat().st_mtime_ns >= int(written)


def shown_path(ctx: Context, path: Path) -> str:
    """A path as a judge or person should type it: relative to the repository when inside it."""
    root = ctx.repo_root.resolve()
    resolved = path.resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(resolved)


def write_review_request(run: Run, diff: str | None = None) -> Path:
    contract = run.contract
    base, branch = contract["git"].get("base_commit"), contract["git"].get("task_branch")
    if diff is None:
        diff = gitops.diff_text(run.repo, base, branch) if base and branch else "(no git base recorded)"
    rebuttal_path = run.ctx.handoff.rebuttal
    rebuttal = rebuttal_path.read_text(encoding="utf-8") if rebuttal_path.exists() else ""
    path = run.ctx.handoff.review_request
    text = render_review_request(
        run.ctx.config.trust_root,
        contract,
        diff,
        rebuttal,
        shown_path(run.ctx, run.ctx.handoff.judge_report_json),
    )
    handoff.write_report(path, text)
    run.task.note_review_request(path.stat().st_mtime_ns)
    return path


def read_judge_report(run: Run) -> JudgeReport:
    """JUDGE_REPORT.json, or failing that JUDGE_REPORT.md with a `Verdict: X` line; validated. A report
    older than the review request it would answer is set aside and never applied."""
    hand = run.ctx.handoff
    stale = [
        p
        for p in (hand.judge_report_json, hand.judge_report_md)
        if p.exists() and not report_is_fresh(run, p)
    ]
    if stale:
        moved = set_aside_stale_reports(run, "it was written before the review request")
        raise ContractInvalid(
            str(stale[0]),
            "$",
            "written before the review request it would answer, so it cannot be the judge's; set aside as "
            + ", ".join(str(m) for m in moved),
        )
    if hand.judge_report_json.exists():
        try:
            raw = hand.judge_report_json.read_text(encoding="utf-8")
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            # Empty, cut or not text (a judge killed while it wrote): set aside, so that it does not fail
            # every later run the same way (issue 35); the judge is asked again.
            problem = (
                f"not UTF-8 text (byte {exc.start})"
                if isinstance(exc, UnicodeDecodeError)
                else f"not valid JSON: {exc.msg} at line {exc.lineno}"
            )
            kept = handoff.set_aside(hand, hand.judge_report_json, run.task_id, "damaged-judge-report")
            log.warning("judge_report.set_aside", task=run.task_id, problem=problem, to=str(kept))
            raise ContractInvalid(
                str(hand.judge_report_json),
                "$",
                f"{problem}; set aside as {kept}",
                hint="the judge's report is asked for again: write it anew, or let the configured judge run",
            ) from None
        return validate_judge_report(data, str(hand.judge_report_json))
    if hand.judge_report_md.exists():
        try:
            text = hand.judge_report_md.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ContractInvalid(
                str(hand.judge_report_md), "$", f"not UTF-8 text (byte {exc.start})"
            ) from None
        return judge_report_from_markdown(text, str(hand.judge_report_md))
    raise ContractInvalid(
        str(hand.judge_report_json), "$", f"no JUDGE_REPORT.json or JUDGE_REPORT.md in {hand.task_dir}"
    )


# REVIEW_REQUEST.md <-> REVIEW_IN_PROGRESS.md: the two renames live here and nowhere else.


def claim_review(run: Run) -> None:
    """pending_judge_review -> judge_review_in_progress; REVIEW_REQUEST.md becomes REVIEW_IN_PROGRESS.md."""
    hand = run.ctx.handoff
    if hand.review_request.exists():
        hand.review_request.replace(hand.review_in_progress)
    run.take_lease(run.contract["limits"]["timeout_minutes"]["judge"])
    run.record(Event.REVIEW_STARTED)


def give_back_review(hand: handoff.Handoff) -> None:
    """REVIEW_IN_PROGRESS.md back to REVIEW_REQUEST.md: the judge left it claimed without a verdict."""
    if hand.review_in_progress.exists():
        hand.review_in_progress.replace(hand.review_request)


def halt_judge_timeout(run: Run, reason: str, detail: str, evidence: dict[str, object]) -> Outcome:
    """The judge gave no verdict in time: `timeout` (unless a killed run recorded it already), then the
    judge_timeout halt. timeout-judge and run-judge both end a late review here."""
    if run.contract["status"] != TIMEOUT_JUDGE:
        run.drop_lease()
        run.record(Event.TIMEOUT, reason)
    return run.halt(Trip(Trigger.JUDGE_TIMEOUT, f"{reason} ({detail})", evidence), event=Event.ESCALATE)


def report_judge(ctx: Context) -> Outcome:
    """Apply the judge's verdict (works straight from pending_judge_review)."""
    accepts = {PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS, REVIEW_COMPLETE}
    with running(ctx, "report-judge", accepts) as run:
        if run.contract["status"] == REVIEW_COMPLETE:
            return finish_verdict(run)
        report = read_judge_report(run)
        if run.contract["status"] == PENDING_JUDGE_REVIEW:
            claim_review(run)
        return apply_verdict(run, report)


def apply_verdict(run: Run, report: JudgeReport, cost_counted: bool = False) -> Outcome:
    """judge_review_in_progress -> review_complete, then on to the verdict's next state. The report's
    usage goes into the judge's cost unless `calls.generate` counted the call already (a model judge)."""
    verdict = report["verdict"]
    run.task.record_verdict(
        verdict, report.get("blocking_issues", []), report.get("suggestions", []), report.get("summary", "")
    )
    if not cost_counted:
        usage = report.get("usage") or {}
        run.add_cost(
            "judge",
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            0.0,
            usage.get("cost_usd", 0.0),
        )
    run.drop_lease()
    run.task.reset_counters("interruptions")
    if verdict != Verdict.PASS:
        run.bump("review_cycles")
    run.record(Event.JUDGE_COMPLETE, f"verdict {verdict}")
    _set_aside_reports(run)
    return finish_verdict(run)


def finish_verdict(run: Run) -> Outcome:
    """review_complete -> the recorded verdict's next state. Its own step so that a report-judge killed
    after `judge_complete` is finished by the next one instead of leaving the task in review_complete."""
    contract = run.contract
    data = contract["handoff_data"]
    verdict = data.get("judge_verdict")
    if verdict not in VERDICTS:
        raise WrongState(
            f"task {run.task_id} is in review_complete without a verdict", hint="resume it by hand"
        )
    if verdict == Verdict.PASS:
        if run.start_state == REVIEW_COMPLETE:
            # `found`: a `hub next` that decided on report-judge before another run applied the verdict
            # lost a race (nothing to do), it did not make a mistake.
            raise WrongState(
                f"task {run.task_id} has its PASS already",
                found=REVIEW_COMPLETE,
                hint="run `hub finalize-task`",
            )
        return Outcome(
            "report-judge",
            run.task_id,
            run.start_state,
            REVIEW_COMPLETE,
            "verdict PASS: run `hub finalize-task`",
            data={"verdict": verdict},
        )
    if verdict == Verdict.CRITICAL_HALT:
        issues = "; ".join(i.get("description", "") for i in data["judge_blocking_issues"][:3])
        return run.halt(
            Trip(
                Trigger.CRITICAL_HALT,
                f"the judge halted the task: {issues or data.get('judge_summary', '')}",
                {"blocking_issues": len(data["judge_blocking_issues"])},
            )
        )
    trip = breakers.review_cycles_exceeded(contract) or breakers.budget_exceeded(contract)
    if trip:
        return run.halt(trip)
    run.move_attempt()
    run.record(
        Event.CONDITIONAL if verdict == Verdict.CONDITIONAL else Event.FAIL_AGREE,
        f"verdict {verdict}: {len(data['judge_blocking_issues'])} blocking issues for the next attempt",
    )
    return Outcome(
        "report-judge",
        run.task_id,
        run.start_state,
        PENDING_IMPLEMENTER,
        f"verdict {verdict}: back to the implementer with {len(data['judge_blocking_issues'])} blocking issues",
        data={"verdict": verdict},
    )


def _set_aside_reports(run: Run) -> None:
    hand = run.ctx.handoff
    for path, label in (
        (hand.judge_report_json, "judge-report"),
        (hand.judge_report_md, "judge-report"),
        (hand.review_in_progress, "review-request"),
    ):
        handoff.set_aside(hand, path, run.task_id, label)


def timeout_judge(ctx: Context) -> Outcome:
    """Halt a judge review that has run past limits.timeout_minutes.judge."""
    accepts = {PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS, TIMEOUT_JUDGE}
    with running(ctx, "timeout-judge", accepts) as run:
        configured = judge_configured(run.ctx)
        deadline = review_deadline(run.contract, configured)
        minutes = run.contract["limits"]["timeout_minutes"]["judge"]
        # From timeout_judge (a timeout-judge killed before its escalation) only the halt is left to do.
        if run.contract["status"] != TIMEOUT_JUDGE:
            if review_timed_out(run.contract, run.now, configured) is None:
                raise WrongState(
                    f"the review of {run.task_id} is not past its deadline ({deadline or 'none set'})"
                )
            if run.contract["status"] == PENDING_JUDGE_REVIEW:
                claim_review(run)
        return halt_judge_timeout(
            run, f"no verdict within {minutes} minutes", f"deadline {deadline}", {"deadline": deadline}
        )


def rebut(ctx: Context, text: str) -> Outcome:
    """Record a rebuttal of a FAIL verdict and send the task back to the judge, within max_rebuttals."""
    accepts = {REVIEW_COMPLETE, PENDING_IMPLEMENTER, PENDING_REBUTTAL}
    with running(ctx, "rebut", accepts) as run:
        contract = run.contract
        data = contract["handoff_data"]
        if run.start_state != PENDING_REBUTTAL:
            last = contract["history"][-1]["event"] if contract["history"] else None
            if data.get("judge_verdict") != Verdict.FAIL or (
                run.start_state == PENDING_IMPLEMENTER and last != Event.FAIL_AGREE
            ):
                raise WrongState(
                    "a rebuttal answers a FAIL verdict before the rework starts; there is none to answer"
                )
            if not text.strip():
                raise WrongState("the rebuttal is empty")
            handoff.write_report(run.ctx.handoff.rebuttal, text)
            if run.start_state == PENDING_IMPLEMENTER:
                run.move_attempt(-1)
            run.record(Event.FAIL_DISAGREE, "the implementer disagrees with the FAIL verdict")
        trip = breakers.rebuttals_exceeded(contract)
        if trip:
            return run.halt(trip, event=Event.REBUTTAL_LIMIT_EXCEEDED)
        run.bump("rebuttals")
        enter_judge_review(
            run, Event.REBUTTAL_ACCEPTED, f"rebuttal {run.task.counter('rebuttals')} sent to the judge"
        )
        return Outcome(
            "rebut",
            run.task_id,
            run.start_state,
            PENDING_JUDGE_REVIEW,
            f"rebuttal recorded; {run.ctx.handoff.review_request.name} rewritten for the judge",
        )
