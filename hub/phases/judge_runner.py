"""`hub run-judge`: run the configured judge on REVIEW_REQUEST.md and apply its verdict.

Two kinds of judge (`judge:` in hub.yaml):

- `command`: a shell command run in the repository with the review request on stdin, e.g. a `claude -p`
  line. It writes `_handoff/tasks/<task_id>/JUDGE_REPORT.json` (the path is in `$HUB_JUDGE_REPORT`) or prints the JSON on
  stdout. It runs in a process group of its own so that a timeout, or a stop of the hub, kills its
  children too.
- `backend` (ollama | openai | mcp): the `roles.judge` model through the workers, asked to answer with
  the JSON; the reply is parsed out of a fenced block (think blocks are already stripped).

The clock is `limits.timeout_minutes.judge`, from the judge's start (not the request's). A judge that runs out of it is a `timeout` and the task
halts (`timeout_judge -> erik_consultation`, exit 4). A judge that fails otherwise (exits non-zero
without a verdict, answers with something that is not a valid report) sends the task back to
`pending_judge_review` as `interrupted`; the interruptions breaker halts it after three in a row.

Also here, for the MCP server: `read_review_request` and `submit_verdict`, the two halves of an agent
acting as the judge.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from hub.core.atomic import write_atomic
from hub.core.errors import ConfigError, ContractInvalid, HubError, WorkerError, WrongState, describe
from hub.core.faults import crash_point
from hub.core.log import get_logger
from hub.core.redaction import user_secrets
from hub.phases import prompt_parts
from hub.phases.context import Context
from hub.phases.judge import (
    apply_verdict,
    claim_review,
    give_back_review,
    halt_judge_timeout,
    read_judge_report,
    report_judge,
    write_review_request,
)
from hub.phases.model_calls import generate
from hub.phases.outcome import Outcome
from hub.phases.run import Run, worktree_path
from hub.phases.session import bind, pre_phase_trip, running
from hub.phases.stall import Stall, worker_failure
from hub.repo import gitops, untrusted
from hub.repo.child import PIPE, Child
from hub.state import handoff, provenance, store
from hub.state.judge_report import JudgeReport, validate_judge_report
from hub.state.machine import JUDGE_REVIEW_IN_PROGRESS, PENDING_JUDGE_REVIEW, Event
from hub.workers.base import split_thinking
from hub.workers.bridge import request_for

log = get_logger(__name__)

WAITING_FOR_VERDICT = frozenset({PENDING_JUDGE_REVIEW, JUDGE_REVIEW_IN_PROGRESS})
# Between SIGTERM and SIGKILL of a judge command's process group: the user's own tool (a `claude -p`) may
# have something to write before it goes.
KILL_GRACE_SECONDS = 2.0
TAIL_CHARS = 4000


@dataclass
class JudgeResult:
    """What one judge run produced: a report, or why there is none."""

    report: JudgeReport | None = None
    timed_out: bool = False
    error: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    cost_counted: bool = False  # a model judge's call went through calls.generate, which counted it


def run_judge(ctx: Context) -> Outcome:
    """Run the configured judge on the review request and apply its verdict."""
    judge = ctx.config.judge
    if not (judge.command or judge.backend):
        raise ConfigError(
            "no judge configured",
            hint="set judge.command or judge.backend in hub.yaml, or write "
            "_handoff/tasks/<task_id>/JUDGE_REPORT.json and run `hub report-judge`",
        )
    with running(ctx, "run-judge", {PENDING_JUDGE_REVIEW}) as run:
        trip = pre_phase_trip(run)
        if trip:
            return run.halt(trip)
        hand = run.ctx.handoff
        if hand.judge_report_json.exists() or hand.judge_report_md.exists():
            # A verdict is already waiting (an agent wrote it, or the judge of a run that died did).
            try:
                report = read_judge_report(run)
            except ContractInvalid:
                if hand.judge_report_json.exists() or hand.judge_report_md.exists():
                    raise
                report = None  # damaged, and set aside: the configured judge runs instead
            if report is not None:
                claim_review(run)
                return apply_verdict(run, report)
        request = _review_request_text(run)
        with contextlib.ExitStack() as stack:
            # The command judge's checkout first: a disk too full for it (NoSpace) leaves the review
            # unclaimed, for the next run to try again.
            folder = stack.enter_context(_judged_folder(run)) if judge.command else None
            # The judge's clock starts now, however long the task waited for it (in the queue, across a
            # sleep or a clock step), on this process's monotonic clock; the start is recorded (saved
            # with the claim) for `hub status`.
            run.task.start_judge(run.now)
            claim_review(run)
            seconds = float(run.contract["limits"]["timeout_minutes"]["judge"]) * 60
            run.start_clock(run.contract["limits"]["timeout_minutes"]["judge"])
            started = time.perf_counter()
            if judge.command and folder is not None:
                result = _run_command(run, judge.command, request, seconds, folder)
            else:
                result = _run_model(run, request, seconds)
        result.record.update(seconds=round(time.perf_counter() - started, 3), timeout_seconds=seconds)
        provenance.write_record(
            hand,
            run.task_id,
            "judge",
            {
                **result.record,
                "timed_out": result.timed_out,
                "error": result.error or None,
                "verdict": result.report["verdict"] if result.report else None,
            },
            run.now,
        )
        if result.timed_out:
            return halt_judge_timeout(
                run,
                f"the judge gave no verdict within {seconds:g} s",
                _judge_name(ctx),
                {"timeout_seconds": seconds},
            )
        if result.report is None:
            return _failed(run, result.error)
        return apply_verdict(run, result.report, cost_counted=result.cost_counted)


def _judge_name(ctx: Context) -> str:
    judge = ctx.config.judge
    return (
        f"command {judge.command!r}"
        if judge.command
        else f"{judge.backend} model {ctx.config.role('judge').model}"
    )


def _review_request_text(run: Run) -> str:
    hand = run.ctx.handoff
    if not hand.review_request.exists():
        # Left claimed by a judge run that died; claim_review renames it again.
        give_back_review(hand)
    if not hand.review_request.exists():
        write_review_request(run)
    return hand.review_request.read_text(encoding="utf-8")


def _failed(run: Run, error: str) -> Outcome:
    """No verdict: back to pending_judge_review so the next run asks again (the breaker bounds the retries)."""
    hand = run.ctx.handoff
    give_back_review(hand)
    run.bump("interruptions")
    run.drop_lease()
    run.record(Event.INTERRUPTED, f"the judge gave no verdict: {error}"[:500])
    return Outcome(
        "run-judge",
        run.task_id,
        run.start_state,
        PENDING_JUDGE_REVIEW,
        f"the judge gave no verdict: {error}; the review request is back in {hand.review_request.name}",
        exit_code=1,
    )


# --- a command judge ---------------------------------------------------------------------------------


def _judged_folder(run: Run) -> contextlib.AbstractContextManager[Path]:
    """Where the judge command runs: a fresh checkout of exactly the reviewed commit beside the task's
    worktree, never the worktree itself, where the task's sandboxed code may have left ignored files
    for an unsandboxed judge to import or read (issue 28)."""
    reviewed = run.contract["handoff_data"].get("reviewed_commit") or gitops.commit_of(
        run.user_repo, str(run.contract["git"].get("task_branch"))
    )
    path = worktree_path(run.ctx, run.user_repo, run.task_id)
    return untrusted.judged_checkout(run.user_repo, reviewed, path.with_name(f".judge-{run.task_id}"))


def judge_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The judge command's environment: the user's, but nothing that puts the judged folder (the change's
    code) on a search path by accident. `python3 -c 'import json'` in that folder imported a `json.py`
    the change committed, as the user (issue 38): PYTHONSAFEPATH (Python 3.11+) keeps the working
    folder and a script's folder off `sys.path`; a relative PATH, PYTHONPATH or NODE_PATH entry (`.`,
    an empty one) would name the judged folder too, so it is dropped."""
    env = dict(environ)
    for name in ("PATH", "PYTHONPATH", "NODE_PATH"):
        if name in env:
            kept = [p for p in env[name].split(os.pathsep) if p and os.path.isabs(p)]
            if kept:
                env[name] = os.pathsep.join(kept)
            else:
                env.pop(name)
    env["PYTHONSAFEPATH"] = "1"
    return env


def _run_command(run: Run, command: str, request: str, seconds: float, folder: Path) -> JudgeResult:
    hand = run.ctx.handoff
    env = {
        **judge_env(os.environ),
        "HUB_TASK_ID": run.task_id,
        "HUB_HANDOFF_DIR": str(hand.dir),
        "HUB_REVIEW_REQUEST": str(hand.review_in_progress),
        "HUB_JUDGE_REPORT": str(hand.judge_report_json),
    }
    record: dict[str, Any] = {"judge": "command", "command": command}
    log.debug("judge.command", task=run.task_id, command=command, timeout=seconds)
    with Child(
        command,
        shell=True,
        cwd=folder,  # the code under review, exactly; the command itself comes from the user's hub.yaml
        env=env,
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
        text=True,
        grace=KILL_GRACE_SECONDS,
    ) as child:
        try:
            # Nothing kills the group if the hub is SIGKILLed: the next phase of the task does
            # (hub.repo.leftovers), before it starts a judge of its own.
            child.remember(hand.judge_pid)
            crash_point("judge:running")
            with child.clock(seconds):
                stdout, stderr = child.proc.communicate(request)
        except BaseException:
            # KeyboardInterrupt (the watcher stopping us), or the pid file unwritable: its pipes, never
            # read to their end, are closed, and the block's end kills its group.
            for stream in (child.proc.stdin, child.proc.stdout, child.proc.stderr):
                if stream is not None:
                    stream.close()
            raise
    timed_out = child.timed_out
    # What the judge printed goes into a record and maybe a halt: redacted as command output is.
    secrets = user_secrets(run.ctx.config, run.worktree)
    record.update(
        exit_code=child.proc.returncode,
        stdout_tail=secrets.redact(stdout[-TAIL_CHARS:]),
        stderr_tail=secrets.redact(stderr[-TAIL_CHARS:]),
    )
    if timed_out:
        return JudgeResult(timed_out=True, record=record)
    if hand.judge_report_json.exists() or hand.judge_report_md.exists():
        try:
            return JudgeResult(report=read_judge_report(run), record=record)
        except ContractInvalid as exc:
            handoff.set_aside(hand, hand.judge_report_json, run.task_id, "invalid-judge-report")
            handoff.set_aside(hand, hand.judge_report_md, run.task_id, "invalid-judge-report")
            return JudgeResult(error=f"the judge wrote an invalid report: {describe(exc)}", record=record)
    try:
        report = extract_report(stdout)
    except ContractInvalid as exc:
        status = f"exited {child.proc.returncode}" if child.proc.returncode else "exited 0"
        detail = secrets.redact((stderr.strip().splitlines() or [""])[-1][:300])
        return JudgeResult(
            error=f"the judge command {status} without a report ({exc.problem})"
            + (f": {detail}" if detail else ""),
            record=record,
        )
    write_atomic(hand.judge_report_json, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return JudgeResult(report=report, record=record)


# --- a model judge ------------------------------------------------------------------------------------


def _run_model(run: Run, request: str, seconds: float) -> JudgeResult:
    config = run.ctx.config
    role = config.judge_role()
    system = prompt_parts.template(config.trust_root, "judge_system").strip()
    chat = request_for(config, role, request, system=system)
    chat = replace(chat, total_timeout=min(chat.total_timeout, seconds))
    record: dict[str, Any] = {"judge": "model", "backend": role.backend, "model": role.model}
    worker = run.ctx.worker("judge")
    try:
        generation = generate(run, worker, "judge", chat, "judge")
    except WorkerError as exc:
        # What the error means is decided in one place; the judge has no stall strikes of its own:
        # a clock that ran out halts (judge_timeout), anything else leaves the request for the next run.
        failure = worker_failure(exc, role.model, role.backend)
        if isinstance(failure, Stall) and failure.event == Event.TIMEOUT:
            record.update(clock=failure.reason.split(": ", 1)[-1], partial=failure.raw_tail[-TAIL_CHARS:])
            return JudgeResult(timed_out=True, record=record, cost_counted=True)
        return JudgeResult(error=f"the judge model failed: {describe(exc)}", record=record, cost_counted=True)
    finally:
        worker.close()
    record.update(
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        reply_tail=generation.text[-TAIL_CHARS:],
    )
    try:
        report = extract_report(generation.text)
    except ContractInvalid as exc:
        return JudgeResult(error=f"the judge model's answer is not a report: {exc.problem}", record=record)
    report.setdefault(
        "usage",
        {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "model": generation.model or role.model,
        },
    )
    try:
        validate_judge_report(report, "judge reply")
    except ContractInvalid as exc:
        return JudgeResult(error=f"the judge model's answer is not a report: {describe(exc)}", record=record)
    write_atomic(run.ctx.handoff.judge_report_json, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return JudgeResult(report=report, record=record, cost_counted=True)


_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_report(text: str) -> JudgeReport:
    """The judge report in a reply: a ```json fenced block, or the first JSON object in the text. Pure."""
    text, _ = split_thinking(text)
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except ValueError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict) and "verdict" in value:
                if isinstance(value["verdict"], str):
                    value["verdict"] = value["verdict"].strip().upper()
                return validate_judge_report(value, "judge reply")
            start = candidate.find("{", start + 1)
    raise ContractInvalid("judge reply", "$", "no JSON object with a 'verdict' in it")


# --- an agent as the judge (the MCP tools) ---------------------------------------------------------------


class ReviewRequest(TypedDict):
    """What an agent acting as the judge reads (MCP `hub_read_review_request`)."""

    task_id: str
    status: str
    path: str  # REVIEW_REQUEST.md, or its in-progress name while a judge run holds it
    text: str


def read_review_request(ctx: Context) -> ReviewRequest:
    """The review request the judge must read, with the task's state (read-only)."""
    hand = bind(ctx, "read-review-request", WAITING_FOR_VERDICT).handoff
    if not hand.contract.exists():
        raise WrongState("no active task: there is nothing to review")
    contract = store.load(hand.contract)
    for path in (hand.review_request, hand.review_in_progress):
        if path.exists():
            return {
                "task_id": contract["task_id"],
                "status": contract["status"],
                "path": str(path),
                "text": path.read_text(encoding="utf-8"),
            }
    raise WrongState(
        f"task {contract['task_id']} is in {contract['status']}: no review request yet "
        "(one is written when the local review passes)"
    )


def submit_verdict(ctx: Context, report: Mapping[str, Any]) -> Outcome:
    """Write JUDGE_REPORT.json (validated first) and apply it as `hub report-judge` does.

    Nothing is left behind when it fails: an invalid report is never written, and a report that could
    not be applied is taken back (the file it replaced, if any, is restored).
    """
    ctx = bind(ctx, "submit-verdict", WAITING_FOR_VERDICT)
    hand = ctx.handoff
    checked = validate_judge_report(report, "verdict")
    if not hand.contract.exists():
        raise WrongState("no active task: there is nothing to give a verdict on")
    contract = store.load(hand.contract)
    if contract["status"] not in WAITING_FOR_VERDICT:
        raise WrongState(
            f"task {contract['task_id']} is in {contract['status']}, not waiting for a verdict",
            hint="see hub_status",
        )
    previous = hand.judge_report_json.read_bytes() if hand.judge_report_json.exists() else None
    write_atomic(hand.judge_report_json, json.dumps(checked, indent=2, ensure_ascii=False) + "\n")
    try:
        return report_judge(ctx)
    except HubError:
        if previous is None:
            hand.judge_report_json.unlink(missing_ok=True)
        else:
            hand.judge_report_json.write_bytes(previous)
        raise


__all__ = [
    "ReviewRequest",
    "extract_report",
    "read_review_request",
    "run_judge",
    "submit_verdict",
]
