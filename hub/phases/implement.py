"""`hub run-implementer`: the local model writes the change.

pending_implementer -[lock_acquired]-> implementation_in_progress, then one attempt on the workbench
(workbench.py): health check, the change written by the implementer's mode, acceptance commands with up
to two in-attempt reflections, checkpoint -[code_written]-> pending_local_review. Every way the model can
fail ends in a stall strike (retry, or STALL_REPORT.md on the second) or a halt; nothing the model wrote
is thrown away.

The mode is chosen here and only here (`mode_for`): edit mode, the default, below (one answer of edits,
then answers to what was refused and to the failing commands; for a task that names no file, a call
before them finds its files with the repository map, attempt_files.py); agent mode in agent.py, imported
only when the role is in agent mode (its loop, tools and MCP cost start-up time edit mode need not pay).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hub.core.errors import ContextOverflow, EditError
from hub.core.log import get_logger
from hub.core.relpaths import is_glob
from hub.edits.answer import apply_answer, check_reply, not_made_good, unapplied, written_blocks
from hub.edits.feedback import answer_feedback, output_truncated
from hub.phases import prompt_parts
from hub.phases.attempt_commands import failures
from hub.phases.attempt_files import find_files, named_map, needs_files
from hub.phases.attempt_prompt import build_prompt
from hub.phases.attempt_refind import other_files, refind_due
from hub.phases.outcome import Outcome
from hub.phases.run import Run
from hub.phases.session import pre_phase_trip, require_setup, running
from hub.phases.stall import Failed, Stall, empty_answer, strike
from hub.phases.workbench import Mode, Reflected, Workbench
from hub.state.machine import PENDING_IMPLEMENTER, TIMEOUT_IMPLEMENTER, Event
from hub.workers import budget
from hub.workers.bridge import request_for

if TYPE_CHECKING:
    from hub.core.config import Config
    from hub.edits.answer import Block
    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult
    from hub.phases.acceptance import CommandResult
    from hub.phases.context import Context
    from hub.state.contract import Contract, StallRecord
    from hub.workers.base import Generation, Worker

    # What an answer became: how it parsed, and what was written, refused or failed.
    Answer = tuple[ParseResult, ApplyResult]

# The temperature of a reflection after an answer that changed nothing (see EditAttempt.reflect).
SAME_ANSWER_TEMPERATURE = 0.7

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
        return Workbench(run).execute(mode_for(run.ctx.config))


def mode_for(config: Config) -> Mode:
    """The implementer's mode (`roles.implementer.mode`): the one place it is chosen."""
    if config.role("implementer").mode == "agent":
        from hub.phases.agent import agent_mode  # the loop, its tools and MCP: agent mode's only

        return agent_mode
    return edit_mode


def edit_mode(bench: Workbench, worker: Worker) -> list[CommandResult]:
    """Edit mode: one answer of edits, one answer to what of it was refused, then the acceptance
    commands and answers to their failures."""
    return EditAttempt(bench, worker).run()


class EditAttempt:
    """One attempt in edit mode, on the workbench."""

    def __init__(self, bench: Workbench, worker: Worker) -> None:
        self.bench = bench
        self.worker = worker
        self.run_ = bench.run
        self.config = bench.config
        self.system = prompt_parts.template(self.config.trust_root, "implementer_system").strip()
        self.outlines = False  # the prompt shows the files other than the target as outlines
        self.same = False  # the last answer changed nothing: the same code, failing the same way
        self.repo_map = ""  # the map beside a task's named files (attempt_files.named_map)

    def run(self) -> list[CommandResult]:
        if needs_files(self.bench):
            # A task that named no file: the model picks them from the repository map first.
            find_files(self.bench, self.worker)
        elif (again := refind_due(self.bench)) is not None:
            self._find_again(again)
        else:
            self.repo_map = named_map(self.bench)
        prompt, generation = self._first_call()
        answer = self._apply(generation, feedback_due=True)
        feedback = answer_feedback(*answer, self.config.trust_root)
        if feedback:
            self._feedback_round(prompt + "\n\n" + feedback, answer)
        return self.bench.acceptance(self.reflect)

    def _find_again(self, again: StallRecord) -> None:
        """The files chosen once more after an attempt whose choice failed (attempt_refind.py); an answer
        naming none the hub can take keeps the last choice: the retry still has files to edit."""
        try:
            find_files(self.bench, self.worker, again)
        except Failed as exc:
            if not isinstance(exc.failure, Stall) or exc.failure.reason != "files_not_found":
                raise
            log.warning("implement.refind_kept", task=self.run_.task_id, detail=exc.failure.detail)

    def _first_call(self) -> tuple[str, Generation]:
        """The prompt the model answered, and its answer. A prompt that does not fit is retried smaller,
        never unchanged: the files other than the target as outlines."""
        prompt = build_prompt(self.run_, repo_map=self.repo_map)
        try:
            return prompt, self._call(prompt, "implement")
        except ContextOverflow as exc:
            smaller = build_prompt(self.run_, outlines=True)
            if smaller == prompt:
                raise
            self.repo_map = ""  # the map goes before any file does
            log.warning("implement.outlines", task=self.run_.task_id, reason=str(exc))
            self.outlines = True
            while True:
                try:
                    return smaller, self._call(smaller, "implement-outlines")
                except ContextOverflow as cut:
                    if not self._drop_a_found_file(cut):
                        raise
                    smaller = build_prompt(self.run_, outlines=True)

    def _drop_a_found_file(self, cut: ContextOverflow) -> bool:
        """For a task whose files the hub found: the model's last choice dropped, when it chose more than
        one, so that a prompt too large even with outlines becomes one that fits rather than a halt
        (the files were the hub's choice, not a person's). False when there is nothing to drop."""
        spec = self.run_.contract["specification"]
        files = spec.get("source_files", [])
        if not spec.get("find_files") or len(files) < 2:
            return False
        dropped = files[-1]
        log.warning("implement.found_file_dropped", task=self.run_.task_id, path=dropped, reason=str(cut))
        self.run_.task.drop_found_file(dropped)
        self.run_.save()
        return True

    def _feedback_round(self, prompt: str, first: Answer) -> None:
        """The one answer to the feedback on what of the first answer was refused. Some of the change
        written and some still refused after it is a partial_change stall: a change only partly made
        must not go on to review as if whole (issue 12)."""
        root = self.config.trust_root
        retry = self._call(prompt, "block-feedback")
        refused: list[str] = []
        try:
            # The blocks already written, sent again with the fixed ones, are not applied twice.
            again = self._apply(retry, written=written_blocks(*first, self.bench.policy()))
        except Failed as exc:
            if not self.bench.applied_any or not isinstance(exc.failure, Stall):
                raise
            stall, missing = exc.failure, unapplied(*first)
            why = prompt_parts.fragment(
                root, "partial_change_refused", reason=stall.reason, detail=stall.detail
            )
            refused = [why]
        else:
            missing = unapplied(*again) + not_made_good(first[1], *again, self.bench.policy())
        if missing:
            detail = prompt_parts.fragment(root, "partial_change", unapplied="; ".join(missing + refused))
            raise Failed(Stall("partial_change", detail))

    def _call(self, prompt: str, purpose: str, temperature: float | None = None) -> Generation:
        request = request_for(self.config, "implementer", prompt, self.system)
        if temperature is not None:
            request = replace(request, temperature=temperature)
        # The first call retries smaller when cut (the caller); later ones go on, on record.
        return self.bench.generate(self.worker, request, purpose, first=purpose == "implement")

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
        policy = self.bench.policy()
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
        applied_before = self.bench.applied_any
        self.bench.wrote(parsed, result)
        if not parsed.edits and not parsed.truncated:
            if not applied_before:
                self._wrong_files(text, None)
            why = "; ".join(parsed.problems) or "no file path followed by a fenced code block was found"
            raise Failed(Stall("malformed_output", why))
        if not result.changed_files and not applied_before:
            if feedback_due and answer_feedback(parsed, result, root):
                return parsed, result
            parts = result.not_applied()
            if result.unchanged:
                parts.append(f"{', '.join(result.unchanged)}: the new content is the same as the old")
            if parsed.truncated:
                raise Failed(Stall("output_truncated", "; ".join(parsed.problems) or output_truncated(root)))
            self._wrong_files(text, result)
            why = "no edit could be applied: " + ("; ".join(parts) or "nothing parsed")
            raise Failed(Stall("malformed_output", why))
        return parsed, result

    def _wrong_files(self, text: str, result: ApplyResult | None) -> None:
        """A `wrong_files` stall for an answer that wrote nothing and went for other files than the ones
        the hub chose for it: the retry chooses them again (attempt_refind.py)."""
        others = other_files(self.bench, text, result)
        if others:
            given = ", ".join(self.run_.contract["constraints"]["allowed_paths"])
            verb = "changed" if result is not None else "asked for"
            detail = (
                f"the answer {verb} only files it was not given ({', '.join(others)}); it was given {given}"
            )
            raise Failed(Stall("wrong_files", detail))

    def reflect(self, failed: list[CommandResult], reflection: int) -> Reflected:
        """An answer to the failing acceptance commands."""
        root = self.config.trust_root
        # The prompt again, built from the worktree as the answer left it: the model must see the code
        # the failures are about (issue 18: shown the stub it had replaced, a real 1.5B sent the same
        # answer back word for word).
        reflect = prompt_parts.render(
            root,
            "reflection",
            prompt=build_prompt(self.run_, outlines=self.outlines, repo_map=self.repo_map),
            feedback=failures(failed),
        )
        if self.same:
            reflect += "\n\n" + prompt_parts.fragment(root, "reflection_same")
        # A small model at a low temperature answers the same prompt with the same code (the real
        # 1.5B sent one wrong answer back word for word through every reflection): after an answer
        # that changed nothing, the next is sampled warmer.
        warmer = (
            max(self.config.role("implementer").temperature, SAME_ANSWER_TEMPERATURE) if self.same else None
        )
        generation = self._call(reflect, f"reflection-{reflection + 1}", warmer)
        _, result = self._apply(generation)
        self.same = not result.changed_files
        return "unchanged" if self.same else "rerun"


def budget_warning(ctx: Context, contract: Contract) -> str | None:
    """What `hub new` and `hub setup-task` say when the task's files will not fit the implementer's
    context with room for its answer, naming the fix; None when they fit, and in agent mode, whose
    prompt holds no file (the model reads what it needs, and the loop keeps its turns in the window)."""
    if ctx.config.role("implementer").mode == "agent":
        return None
    run = Run(ctx, contract, "budget")
    system = prompt_parts.template(ctx.repo_root, "implementer_system").strip()
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
