"""`hub run-implementer`: the local model writes the change.

pending_implementer -[lock_acquired]-> implementation_in_progress, then one attempt: health check, prompt,
model call, edits applied inside the allowed paths, acceptance commands with up to two in-attempt
reflections, checkpoint -[code_written]-> pending_local_review. Every way the model can fail ends in a
stall strike (retry, or STALL_REPORT.md on the second) or a halt; nothing the model wrote is thrown away.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.errors import ContextOverflow, EditError, WorkerError
from hub.core.faults import crash_point
from hub.core.files import read_text_capped
from hub.core.log import get_logger
from hub.core.paths import is_glob
from hub.core.text import listed
from hub.edits.answer import apply_answer, check_reply, not_made_good, unapplied, written_blocks
from hub.edits.feedback import answer_feedback, output_truncated
from hub.edits.policy import Policy
from hub.phases import prompts
from hub.phases.acceptance import CommandResult, jail_for, run_command, user_secrets
from hub.phases.calls import generate
from hub.phases.context import Context
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.session import pre_phase_trip, require_setup, running
from hub.phases.stall import (
    Failed,
    Stall,
    empty_answer,
    implementer_stall,
    model_unavailable,
    strike,
    worker_failure,
)
from hub.phases.written import finish_code_written
from hub.repo import gitops, untrusted
from hub.review.code import language_for, outline, render_outline
from hub.safety.sandbox import Jail, SandboxUnavailable
from hub.safety.trust import control_paths
from hub.state.backlog import notes_for_prompt
from hub.state.breakers import Trip
from hub.state.contract import Contract, Verdict
from hub.state.machine import PENDING_IMPLEMENTER, TIMEOUT_IMPLEMENTER, Event
from hub.state.provenance import write_record
from hub.state.triggers import Trigger
from hub.workers import budget
from hub.workers.base import Generation, Worker
from hub.workers.bridge import request_for

if TYPE_CHECKING:
    from hub.edits.answer import Block
    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult

    # What an answer became: how it parsed, and what was written, refused or failed.
    Answer = tuple[ParseResult, ApplyResult]

MAX_REFLECTIONS = 2
# The temperature of a reflection after an answer that changed nothing (see _acceptance).
SAME_ANSWER_TEMPERATURE = 0.7
MAX_FILE_CHARS = 60_000

log = get_logger(__name__)


def run_implementer(ctx: Context) -> Outcome:
    """Have the implementer model write the change for the current attempt."""
    with running(ctx, "run-implementer", {PENDING_IMPLEMENTER, TIMEOUT_IMPLEMENTER}) as run:
        require_setup(run)
        if run.contract["status"] == TIMEOUT_IMPLEMENTER:
            stalls = run.contract["handoff_data"].get("stalls")
            return strike(run, stalls[-1]["reason"] if stalls else Event.INTERRUPTED)
        trip = pre_phase_trip(run)
        if trip:
            return run.halt(trip)
        # A person may have fixed things by hand while the task was halted: their edits are the task's.
        run.checkpoint("manual_edit")
        run.take_lease(run.contract["limits"]["timeout_minutes"]["implementer"])
        run.start_clock(run.contract["limits"]["timeout_minutes"]["implementer"])
        run.record(Event.LOCK_ACQUIRED, f"attempt {run.contract['attempt']}")
        return Attempt(run).execute()


class Attempt:
    """One implementer attempt, from health check to code_written (or a stall, or a halt)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.contract = run.contract
        self.config = run.ctx.config
        self.model = self.config.role("implementer").model
        self.raw = ""
        self.applied_any = False
        self.written: set[str] = set()  # every path an answer of this attempt wrote
        self.started = time.perf_counter()
        # For STALL_REPORT.md: where the attempt's time went.
        self.timings: dict[str, float] = {}
        self.jail: Jail | None = None
        self.outlines = False  # the prompt shows the files other than the target as outlines

    def execute(self) -> Outcome:
        worker = self.run.ctx.worker("implementer")
        try:
            return self._attempt(worker)
        except WorkerError as exc:
            return self._failed(worker_failure(exc, self.model))
        except Failed as exc:
            return self._failed(exc.failure)
        finally:
            worker.close()

    def _failed(self, failure: Trip | Stall) -> Outcome:
        """Where every failure of the attempt ends: a halt, or a stall strike with the model's last raw
        output (unless the failure brought its own) and where the attempt's time went."""
        if isinstance(failure, Trip):
            return self.run.halt(failure)
        timings = {**self.timings, "attempt": round(time.perf_counter() - self.started, 3)}
        return implementer_stall(
            self.run, replace(failure, raw_tail=failure.raw_tail or self.raw, timings=timings)
        )

    def _attempt(self, worker: Worker) -> Outcome:
        self._preflight(worker)
        if self.config.role("implementer").mode == "agent":
            from hub.phases.agent import agent_attempt  # the loop, its tools and MCP: agent mode's only

            return self._written(agent_attempt(self, worker, feedback_section(self.run)))
        system = prompts.template(self.config.trust_root, "implementer_system").strip()
        prompt, generation = self._first_call(worker, system)
        answer = self._apply(generation, feedback_due=True)
        feedback = answer_feedback(*answer, self.config.trust_root)
        if feedback:
            self._feedback_round(worker, prompt + "\n\n" + feedback, system, answer)
        return self._written(self._acceptance(worker, system))

    def _preflight(self, worker: Worker) -> None:
        """What must hold before the model is called: a jail for the acceptance commands (under `sandbox:
        required` nothing runs unsandboxed) and a server that has the model; else a halt."""
        if self.contract["specification"].get("acceptance_commands"):
            try:
                self.jail = jail_for(self.config, self.run.worktree)
            except SandboxUnavailable as exc:
                raise Failed(Trip(Trigger.SANDBOX_UNAVAILABLE, str(exc), hint=exc.hint)) from exc
            self.run.task.set_sandbox(self.jail.why)
        trip = model_unavailable(self.run, worker, self.model, "implementer")
        if trip:
            raise Failed(trip)

    def _first_call(self, worker: Worker, system: str) -> tuple[str, Generation]:
        """The prompt the model answered, and its answer. A prompt that does not fit is retried smaller,
        never unchanged: the files other than the target as outlines."""
        prompt = build_prompt(self.run)
        try:
            return prompt, self._call(worker, prompt, system, "implement")
        except ContextOverflow as exc:
            smaller = build_prompt(self.run, outlines=True)
            if smaller == prompt:
                raise
            log.warning("implement.outlines", task=self.run.task_id, reason=str(exc))
            self.outlines = True
            return smaller, self._call(worker, smaller, system, "implement-outlines")

    def _feedback_round(self, worker: Worker, prompt: str, system: str, first: Answer) -> None:
        """The one answer to the feedback on what of the first answer was refused. Some of the change
        written and some still refused after it is a partial_change stall: a change only partly made
        must not go on to review as if whole (issue 12)."""
        root = self.config.trust_root
        retry = self._call(worker, prompt, system, "block-feedback")
        refused: list[str] = []
        try:
            # The blocks already written, sent again with the fixed ones, are not applied twice.
            again = self._apply(retry, written=written_blocks(*first, self._policy()))
        except Failed as exc:
            if not self.applied_any or not isinstance(exc.failure, Stall):
                raise
            stall, missing = exc.failure, unapplied(*first)
            why = prompts.fragment(root, "partial_change_refused", reason=stall.reason, detail=stall.detail)
            refused = [why]
        else:
            missing = unapplied(*again) + not_made_good(first[1], *again, self._policy())
        if missing:
            detail = prompts.fragment(root, "partial_change", unapplied="; ".join(missing + refused))
            raise Failed(Stall("partial_change", detail))

    def _call(
        self, worker: Worker, prompt: str, system: str, purpose: str, temperature: float | None = None
    ) -> Generation:
        request = request_for(self.config, "implementer", prompt, system)
        if temperature is not None:
            request = replace(request, temperature=temperature)
        generation = generate(self.run, worker, "implementer", request, purpose)
        if generation.truncated:
            # Only a count that filled the window is a sure cut; a low one is also Ollama's prompt
            # cache. The first call retries smaller (the caller); later ones go on, on record.
            if generation.prompt_tokens >= request.num_ctx or purpose == "implement":
                window = budget.cut_window(generation.prompt_tokens)
                raise ContextOverflow(
                    generation.prompt_tokens,
                    request.num_ctx,
                    source="server",
                    detail=f"the server read only {generation.prompt_tokens} prompt tokens of a larger "
                    "prompt (its window is smaller than num_ctx): the start was silently dropped",
                    server_window=window if window is not None and window < request.num_ctx else None,
                    configured_num_ctx=request.num_ctx,
                )
            log.warning(
                "implement.prompt_count_low",
                task=self.run.task_id,
                purpose=purpose,
                prompt_eval_count=generation.prompt_tokens,
                hint="a cached prefix or a server window smaller than num_ctx; going on",
            )
        self.raw = generation.raw or generation.text
        self.timings["model calls"] = round(self.timings.get("model calls", 0.0) + generation.seconds, 3)
        self.timings["first token"] = round(generation.first_token_seconds, 3)
        return generation

    def _policy(self) -> Policy:
        """What the implementer's answer may write: the task's constraints, in its worktree."""
        constraints = self.contract["constraints"]
        return Policy(
            control_paths=control_paths(self.config),
            max_files=self.config.max_changed_files,
            repo_root=self.run.worktree,
            allowed_paths=tuple(constraints["allowed_paths"]),
            forbidden_paths=tuple(constraints["forbidden_paths"]),
            max_diff_lines=constraints.get("max_diff_lines"),
            delete_allowed=bool(constraints.get("delete_allowed", False)),
        )

    def _apply(
        self, generation: Generation, feedback_due: bool = False, written: frozenset[Block] = frozenset()
    ) -> Answer:
        """Parse, check and write the edits; `Failed` (a stall) when nothing usable came of it. With
        `feedback_due`, an answer whose edits were all refused for what the model can fix (SEARCH blocks
        that did not match, content the pre-write check refused, a cut-off answer) is not yet a stall:
        the caller feeds the reasons back to the model once."""
        root = self.config.trust_root
        text = generation.text
        if not text.strip():
            raise Failed(Stall("empty_output", empty_answer(generation)))
        policy = self._policy()
        allowed = policy.allowed_paths
        single = allowed[0] if len(allowed) == 1 and not is_glob(allowed[0]) else None
        # Bounded before anything is parsed or written: the whole reply, and the files it may touch.
        try:
            check_reply(text, self.config.max_reply_chars)
            parsed, result = apply_answer(
                text,
                policy,
                default_path=single,
                done_reason=generation.done_reason,
                written=written,
                trust_root=root,
            )
        except EditError as exc:
            raise Failed(Stall("reply_too_large", str(exc))) from exc
        self._record_edits(parsed, result)
        if not parsed.edits and not parsed.truncated:
            why = "; ".join(parsed.problems) or "no file path followed by a fenced code block was found"
            raise Failed(Stall("malformed_output", why))
        if not result.changed_files and not self.applied_any:
            if feedback_due and answer_feedback(parsed, result, root):
                return parsed, result
            parts = result.not_applied()
            if result.unchanged:
                parts.append(f"{', '.join(result.unchanged)}: the new content is the same as the old")
            if parsed.truncated:
                raise Failed(Stall("output_truncated", "; ".join(parsed.problems) or output_truncated(root)))
            why = "no edit could be applied: " + ("; ".join(parts) or "nothing parsed")
            raise Failed(Stall("malformed_output", why))
        self.applied_any = self.applied_any or bool(result.changed_files)
        self.written.update(result.changed_files)
        return parsed, result

    def _record_edits(self, parsed: ParseResult, result: ApplyResult) -> None:
        """One provenance record per applied or refused edit and per failed block, with the reason:
        what `hub log --task` shows."""
        records: list[dict[str, Any]] = [
            {
                "path": a.path,
                "diff": a.diff,
                "added": a.added,
                "removed": a.removed,
                "outcome": "applied",
            }
            for a in result.applied
        ]
        records += [{"path": r.path, "outcome": f"refused: {r.reason}"} for r in result.refused]
        records += [
            {"path": f.path, "search": f.search[:2000], "outcome": f"refused: SEARCH block: {f.reason}"}
            for f in result.failed_blocks
        ]
        # Also beside applied edits: a block the parser dropped (markers out of order, a cut-off block)
        # is part of the answer that was not written.
        records += [{"path": "", "outcome": f"refused: {problem}"} for problem in parsed.problems]
        for record in records:
            write_record(self.run.ctx.handoff, self.run.task_id, "diff", record, self.run.now)

    def _acceptance(self, worker: Worker, system: str) -> list[CommandResult]:
        """The acceptance commands, and up to MAX_REFLECTIONS answers to their failures; `Failed` (a
        stall) while they still fail."""
        commands = self.contract["specification"].get("acceptance_commands") or []
        results: list[CommandResult] = []
        same = False  # the last answer changed nothing: the same code, failing the same way
        for reflection in range(MAX_REFLECTIONS + 1):
            if not same:
                self._clean_state()
                results = [self._command(c) for c in commands]
            failed = [r for r in results if not r.ok]
            if not failed:
                return results
            if reflection == MAX_REFLECTIONS:
                break
            feedback = "\n\n".join(r.feedback() for r in failed)
            # The prompt again, built from the worktree as the answer left it: the model must see the code
            # the failures are about (issue 18: shown the stub it had replaced, a real 1.5B sent the same
            # answer back word for word).
            reflect = prompts.render(
                self.config.trust_root,
                "reflection",
                prompt=build_prompt(self.run, outlines=self.outlines),
                feedback=feedback,
            )
            if same:
                reflect += "\n\n" + prompts.fragment(self.config.trust_root, "reflection_same")
            # A small model at a low temperature answers the same prompt with the same code (the real
            # 1.5B sent one wrong answer back word for word through every reflection): after an answer
            # that changed nothing, the next is sampled warmer.
            warmer = (
                max(self.config.role("implementer").temperature, SAME_ANSWER_TEMPERATURE) if same else None
            )
            generation = self._call(worker, reflect, system, f"reflection-{reflection + 1}", warmer)
            _, result = self._apply(generation)
            same = not result.changed_files
        self.run.task.record_acceptance([r.summary() for r in results])
        failed = [r for r in results if not r.ok]
        # A command ended at a sandbox limit says so by name: raising the limit may be the fix.
        limited = any((r.failure or "").startswith("resource_limit") for r in failed)
        reason = "resource_limit" if limited else "tests_failed"
        raise Failed(Stall(reason, "\n\n".join(r.feedback() for r in failed)[-3000:]))

    def _clean_state(self) -> None:
        """The worktree as the branch and the model's answers made it, nothing else: before every run
        of the commands (what an earlier run left, a planted json.pyc, a poisoned .venv, a conftest.py it
        wrote, must not decide this one) and before the commit (what the commands wrote is not the
        task's change). Within a run the commands share what they build (`make`, then `make test`)."""
        repo = self.run.repo
        written = sorted(self.written)
        cleaned = untrusted.remove_ignored(repo, written) + untrusted.keep_only(repo, written)
        if cleaned:
            log.debug("acceptance.cleaned", task=self.run.task_id, paths=cleaned[:50])

    def _command(self, command: str) -> CommandResult:
        # PhaseTimeout (a phase_timeout stall) when the attempt's clock is spent: no command starts.
        left = self.run.remaining(f"the acceptance command `{command}`")
        result = run_command(
            command,
            self.run.worktree,
            min(self.config.acceptance_timeout_seconds, left if left is not None else float("inf")),
            self.jail,
            self.run.ctx.handoff.sandbox_pid,
        )
        restored = self._restore_outside_allowed(command)
        if restored:
            note = prompts.fragment(self.config.trust_root, "command_restored", paths=listed(restored, 20))
            result = replace(result, stderr=result.stderr + "\n" + note)
        write_record(
            self.run.ctx.handoff,
            self.run.task_id,
            "command",
            {
                "command": command,
                "exit_code": result.exit_code,
                "stdout": result.stdout[-8000:],
                "stderr": result.stderr[-8000:],
                "seconds": round(result.seconds, 3),
                "timed_out": result.timed_out,
                "sandbox": self.jail.why if self.jail else None,
                "outcome": "ok" if result.ok else "failed",
                "restored": restored,
            },
            self.run.now,
        )
        return result

    def _restore_outside_allowed(self, command: str) -> list[str]:
        """Undo what a command changed in the worktree outside the allowed paths (a rewritten test, a
        new conftest.py): the next run, a reflection's, must check against the task's own tests; the
        model is told. Inside the allowed paths the changes stay until the next round or the commit
        (`_clean_state`); the user's checkout is never touched."""
        constraints = self.contract["constraints"]
        restored = gitops.restore_outside(
            self.run.repo,
            constraints["allowed_paths"],
            constraints["forbidden_paths"],
            control_paths(self.config),
        )
        if restored:
            log.warning("acceptance.restored", task=self.run.task_id, command=command, paths=restored[:50])
        return restored

    def _written(self, acceptance: list[CommandResult]) -> Outcome:
        run = self.run
        run.task.record_acceptance([r.summary() for r in acceptance])
        # Commit first, then record: the other order left an uncommitted edit behind a recorded
        # code_written when killed between the two (review and judge saw an empty diff). The marker
        # lets recovery tell "killed after the commit" (finish the attempt) from "before" (stash it).
        if self.contract["specification"].get("acceptance_commands"):
            self._clean_state()
        run.task.begin_commit(gitops.head_commit(run.repo))
        run.save()
        commit = run.checkpoint(Event.CODE_WRITTEN)
        crash_point("implement:after-commit")
        left = untrusted.uncommitted(run.repo, sorted(self.written))
        if left:
            # Never "N files changed" and on to review while a written edit is not in the commit (an
            # ignored path, say): the review and the judge would see a change without it.
            run.task.finish_commit()
            raise Failed(
                Stall(
                    "uncommitted_edit",
                    prompts.fragment(self.config.trust_root, "uncommitted_edit", paths=listed(left, 20)),
                )
            )
        return finish_code_written(run, commit)


def budget_warning(ctx: Context, contract: Contract) -> str | None:
    """What `hub new` and `hub setup-task` say when the task's files will not fit the implementer's
    context with room for its answer, naming the fix; None when they fit, and in agent mode, whose
    prompt holds no file (the model reads what it needs, and the loop keeps its turns in the window)."""
    if ctx.config.role("implementer").mode == "agent":
        return None
    run = Run(ctx, contract, "budget")
    system = prompts.template(ctx.repo_root, "implementer_system").strip()
    request = request_for(ctx.config, "implementer", build_prompt(run), system)
    fit = budget.plan(request.prompt, system, request.num_ctx, request.num_predict, scale=request.token_scale)
    target = contract["specification"].get("target_file")
    target_path = ctx.repo_root / target if target else None
    target_tokens = (
        budget.estimate_tokens(target_path.read_text(encoding="utf-8", errors="replace"), request.token_scale)
        if target_path is not None and target_path.is_file()
        else 0
    )
    problems = []
    if not fit.fits:
        outlined = build_prompt(run, outlines=True)
        smaller = budget.plan(
            outlined, system, request.num_ctx, request.num_predict, scale=request.token_scale
        )
        then = (
            "the hub will retry with the other source files as outlines, which fit"
            if smaller.fits
            else "even with the other source files as outlines it does not fit"
        )
        problems.append(
            f"the implementer's prompt (~{fit.prompt_tokens} tokens) and its answer ({fit.answer_tokens}) do not "
            f"fit num_ctx {fit.num_ctx} for {request.model}: {then}"
        )
    if target_tokens > fit.answer_tokens:
        problems.append(
            f"{target} (~{target_tokens} tokens) is larger than the answer's room ({fit.answer_tokens}): a "
            "whole-file answer would be cut off"
        )
    if not problems:
        return None
    return (
        "; ".join(problems)
        + ". Fix: name fewer source_files, ask for search/replace edits instead of whole files for large "
        f"files, or raise models.{request.model}.num_ctx (and roles.implementer.num_predict) in hub.yaml up to "
        "the model's context_length (`ollama show`)"
    )


def build_prompt(run: Run, outlines: bool = False) -> str:
    """The implementer's prompt; with `outlines`, the files other than the target as outlines only."""
    contract = run.contract
    spec, constraints = contract["specification"], contract["constraints"]
    # The task's files as the task sees them: its worktree (before setup-task, the user's checkout).
    files_root = run.worktree if run.worktree.is_dir() else run.ctx.repo_root
    paths = list(dict.fromkeys(p for p in [spec.get("target_file"), *spec.get("source_files", [])] if p))
    example = spec.get("target_file") or (paths[0] if paths else "path/to/file.py")

    forbidden = constraints["forbidden_paths"]
    # Templates from the trust root (the user's checkout), never from the task's files. The files are
    # what the model's code may have written: the user's own secrets in them are replaced (issue 28).
    known = user_secrets(run.ctx.config, run.worktree)
    return known.redact_known(
        prompts.render(
            run.ctx.config.trust_root,
            "implementer",
            task_id=contract["task_id"],
            title=contract.get("title", ""),
            allowed_paths=", ".join(constraints["allowed_paths"])
            or "none (the task names no target or allowed path)",
            forbidden_line=f"Never touch: {', '.join(forbidden)}.\n" if forbidden else "",
            requirements=prompts.bullets(spec["requirements"]),
            acceptance_criteria=prompts.bullets(spec.get("acceptance_criteria", [])),
            acceptance_commands=", ".join(f"`{c}`" for c in spec.get("acceptance_commands", [])) or "(none)",
            feedback=feedback_section(run),
            files="\n\n".join(
                outline_section(files_root, p)
                if outlines and p != spec.get("target_file")
                else file_section(files_root, p)
                for p in paths
            )
            or "(no files named in the contract)",
            example_path=example,
            example_lang=language_for(example) or "",
        )
    )


def file_section(repo_root: Path, rel: str) -> str:
    path = repo_root / rel
    if not path.resolve().is_relative_to(repo_root.resolve()):
        # A symlink in the repository pointing out of it: its target is never sent to the model.
        return f"### {rel}\n\n(outside the repository: not shown)"
    if not path.is_file():
        return f"### {rel}\n\n(does not exist yet: create it)"
    # Never more than the cap (4 bytes a character at most): a huge file is cut below all the same.
    text = read_text_capped(path, 4 * MAX_FILE_CHARS + 4) or ""
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + "\n... (cut: the file is longer)"
    shape = outline(rel, text)
    summary = f"\n{render_outline(shape)}\n" if shape else ""
    # A fence longer than any backtick run in the file, so a markdown file cannot close it early.
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"### {rel}\n{summary}\n{fence}{language_for(rel) or ''}\n{text.rstrip()}\n{fence}"


def outline_section(repo_root: Path, rel: str) -> str:
    """A source file as its outline (functions, classes, imports): what fits when the whole does not."""
    path = repo_root / rel
    if not path.is_file():
        return file_section(repo_root, rel)
    shape = outline(rel, read_text_capped(path) or "")
    body = render_outline(shape) if shape else "(no outline: the file's language is not parsed)"
    return f"### {rel} (outline only: the whole file did not fit the model's context)\n\n{body}"


def feedback_section(run: Run) -> str:
    """What the model must know from earlier: the judge's issues, its own last stall, a person's notes."""
    data, root = run.contract["handoff_data"], run.ctx.config.trust_root
    parts: list[str] = []
    if data.get("judge_verdict") in (Verdict.FAIL, Verdict.CONDITIONAL) and data.get("judge_blocking_issues"):
        issues = prompts.issue_lines(data["judge_blocking_issues"])
        parts.append(prompts.fragment(root, "judge_issues", verdict=data["judge_verdict"], issues=issues))
        if data.get("judge_suggestions"):
            suggestions = prompts.bullets(data["judge_suggestions"])
            parts.append(prompts.fragment(root, "judge_suggestions", suggestions=suggestions))
    stalls = [s for s in data.get("stalls", []) if s.get("role") == "implementer"]
    if stalls and stalls[-1].get("attempt") == run.contract["attempt"] - 1:
        last = stalls[-1]
        detail = last.get("detail", "")[:1500]
        parts.append(prompts.fragment(root, "previous_stall", reason=last["reason"], detail=detail))
    notes = list(data.get("resume_notes", []))
    notes += [
        f"({n.get('type', 'note')}) {n.get('content', '')}"
        for n in notes_for_prompt(run.ctx.handoff, run.task_id)
    ]
    if notes:
        parts.append(prompts.fragment(root, "notes", notes=prompts.bullets(notes)))
    return ("\n" + "\n\n".join(parts) + "\n") if parts else ""
