"""The agent loop: chat turns with tools, bounded, until the model says `done` or a bound ends it.

Each turn sends the task's prompt, the turns so far and the tools; the model's calls are run in order
(the server's own `tool_calls` first; when there are none, calls written in its text, read by
`hub.agent.text_calls`), and their results go back as the next turns. Every call is held to its tool's
schema first (`hub.agent.arguments.checked`): a call with an unknown name or bad arguments is answered with what is wrong,
never run and never a crash. A reply with no call at all is read as an edit-mode answer (its edit
blocks written through `hub.edits.answer`, the result told); a reply with neither is reminded once how
to call tools, and the next such reply ends the loop.

The loop ends (`Ending.reason`):
- `done`: the model called done;
- `max_turns`, `max_tokens`: agent.max_turns turns, or agent.max_tokens tokens in and out, were spent;
- `repeated_call`: the same call (same arguments, nothing written between) came more than
  agent.max_repeats times: told at the limit, ended past it;
- `no_tool_call`: a second reply in a row with no call and no edit;
- `context_full`: the conversation no longer fits the window, even with old results dropped and the
  answer's room at its floor (what was written goes on to the acceptance commands, as at max_turns).
What each means for the attempt is the phase's to decide (hub/phases/agent.py). Worker errors (the
clocks, a broken server, an outage) are not caught here: they end the attempt as in edit mode.

The context is kept inside the window: before each call the whole request is estimated
(`hub.workers.budget`) and, when it would not fit with room for the answer, the oldest tool results
are replaced by a note saying so, oldest first; then the answer's room shrinks, down to
MIN_ANSWER_TOKENS (a turn's answer is mostly one call; a call cut there is told, never run); when even
that is not enough, the loop ends `context_full`, or, when the task's own prompt leaves no room,
`ContextOverflow`: never a silently cut prompt. A tool result is capped to the window too (a quarter of
it, about), so one test run's output cannot fill a small model's window by itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hub.agent.arguments import checked
from hub.agent.builtin import Tool, ToolRefused
from hub.agent.text_calls import calls_in_text
from hub.core.errors import ContextOverflow, EditError, HubError, WorkerError, describe
from hub.core.log import get_logger
from hub.core.templates import fragment
from hub.edits.answer import check_reply
from hub.workers import budget
from hub.workers.base import ChatRequest, Generation, ToolCall
from hub.workers.toolcalls import full_prompt

log = get_logger(__name__)

RESULT_CHARS = 8000  # one tool result, at most, as the model sees it (less in a small window)
# The least room a turn's answer is given when the window is tight (edit mode keeps num_predict).
# Measured: with 8k windows the real 1.5B's sixth turn, after a failing test run, left 3,800 tokens of
# room, and the halt that reserving num_predict made (context_overflow) stopped a task a person then had
# to resume.
MIN_ANSWER_TOKENS = 1024
KEEP_RESULTS = 1  # the latest tool result is never dropped to make room
SUMMARY_CHARS = 300  # what a turn record keeps of each result


@dataclass(frozen=True)
class Bounds:
    """agent.* in hub.yaml."""

    max_turns: int = 30
    max_tokens: int = 1_000_000
    max_repeats: int = 3


@dataclass(frozen=True)
class Ending:
    """How the loop ended: `reason` (see the module docstring), what to tell a person, the model's
    summary when it called done, and what the loop spent."""

    reason: str
    detail: str
    summary: str = ""
    turns: int = 0
    tokens: int = 0


# What the loop needs from the phase: one model call (held to the role's clocks, recorded), and a
# place for each turn's record.
Call = Callable[[ChatRequest, str], Generation]
Record = Callable[[dict[str, Any]], None]


class Loop:
    """One agent run over `tools`, from `request` (the task's prompt and system prompt)."""

    def __init__(
        self,
        request: ChatRequest,
        tools: list[Tool],
        call: Call,
        record: Record,
        bounds: Bounds,
        *,
        write_answer: Callable[[str, str], str | None],
        version: Callable[[], int] = lambda: 0,
        redact: Callable[[str], str] = lambda text: text,
        trust_root: Path | None = None,
    ) -> None:
        self.request = replace(request, tools=tuple(t.spec() for t in tools))
        self.tools = {t.name: t for t in tools}
        self.schemas: Mapping[str, dict[str, Any]] = {t.name: t.parameters for t in tools}
        self.call = call
        self.record = record
        self.bounds = bounds
        self.write_answer = write_answer
        self.version = version
        self.redact = redact
        self.trust_root = trust_root
        self.turns: list[dict[str, Any]] = []
        self.turn = 0
        self.tokens = 0
        self.seen: dict[str, int] = {}
        self.reminded = False
        self.done_refused = False  # a done before any write is told back once (prompts/agent_done_early.md)
        # The turns that carry tool results (those that may be dropped to make room), and those dropped:
        # kept apart from the turns themselves, which go on the wire as they are.
        self.results: list[int] = []
        self.dropped: set[int] = set()
        self.estimate = 0  # the last request's estimated tokens (prompt, tools, turns, template)
        self.answer_room: int | None = None  # num_predict of a turn whose window is tight
        # About a quarter of the window, at ~3 characters a token, and never more than RESULT_CHARS.
        self.result_chars = max(1000, min(RESULT_CHARS, request.num_ctx * 3 // 4))

    def run(self, note: str = "") -> Ending:
        """Turns until an ending; `note` (a user turn) first, when the loop goes on after one (the
        acceptance commands failed after done)."""
        if note:
            self.turns.append({"role": "user", "content": note})
        while True:
            if self.turn >= self.bounds.max_turns:
                return self._end(
                    "max_turns", f"the agent used all {self.bounds.max_turns} turns (agent.max_turns)"
                )
            if self.tokens >= self.bounds.max_tokens:
                return self._end(
                    "max_tokens",
                    f"the agent used {self.tokens} tokens, over agent.max_tokens ({self.bounds.max_tokens})",
                )
            ending = self._one_turn()
            if ending is not None:
                return ending

    def _end(self, reason: str, detail: str, summary: str = "") -> Ending:
        log.info("agent.end", reason=reason, turns=self.turn, tokens=self.tokens)
        return Ending(reason, detail, summary, self.turn, self.tokens)

    def _one_turn(self) -> Ending | None:
        self.turn += 1
        started = time.monotonic()
        try:
            dropped = self._fit()
        except _WindowFull as full:
            return self._end("context_full", str(full))
        while True:
            request = replace(self.request, turns=tuple(self.turns))
            if self.answer_room is not None:
                request = replace(request, num_predict=self.answer_room)
            try:
                generation = self.call(request, f"agent-turn-{self.turn}")
                break
            except ContextOverflow as exc:
                # The server's count (its tokenizer, its own window, the model's trained length) is
                # above the estimate: one more old result goes, or the conversation is full.
                if self._drop_oldest():
                    dropped += 1
                    continue
                if not self.turns:
                    raise
                return self._end(
                    "context_full", f"the server refused the conversation as too long: {describe(exc)}"
                )
        self.tokens += generation.prompt_tokens + generation.completion_tokens
        native = bool(generation.tool_calls)
        if native:
            calls = [checked(c, self.schemas) for c in generation.tool_calls]
        else:
            calls = list(calls_in_text(generation.text, self.schemas).calls)  # each checked as it is read
        results: list[tuple[ToolCall, str]] = []
        ending: Ending | None = None
        for call in calls:
            result, ending = self._run(call)
            results.append((call, result))
            if ending is not None:
                break
        if not calls:
            ending = self._no_call(generation)
        else:
            self.reminded = False
            self._answer(generation, results, native)
        self.record(
            {
                "turn": self.turn,
                "request_tokens": self.estimate,
                "turns_sent": len(request.turns),
                "dropped_results": dropped,
                "native_calls": native,
                "calls": [
                    {
                        "name": c.name,
                        "arguments": c.arguments,
                        "problem": c.problem,
                        "result": r[:SUMMARY_CHARS],
                    }
                    for c, r in results
                ],
                "text": generation.text[:2000],
                "prompt_tokens": generation.prompt_tokens,
                "completion_tokens": generation.completion_tokens,
                "tokens_so_far": self.tokens,
                "seconds": round(time.monotonic() - started, 3),
                "ending": ending.reason if ending else None,
                # What `hub log --task` shows of the turn.
                "outcome": f"turn {self.turn}: "
                + (", ".join(c.name + (" (refused)" if c.problem else "") for c in calls) or "no tool call")
                + (f"; {ending.reason}" if ending else ""),
            }
        )
        return ending

    def _run(self, call: ToolCall) -> tuple[str, Ending | None]:
        """One call's result for the model, and the ending it brings (done, or a repeat past the bound)."""
        if call.problem:
            return f"error: {call.problem}", None
        key = json.dumps([call.name, call.arguments, self.version()], sort_keys=True, default=str)
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] > self.bounds.max_repeats:
            detail = f"the agent called {call.name} with the same arguments {self.seen[key]} times"
            return "error: the same call again", self._end("repeated_call", detail)
        if self.seen[key] == self.bounds.max_repeats:
            return fragment(self.trust_root, "agent_repeat", tool=call.name, times=self.seen[key]), None
        if call.name == "done":
            if self.version() == 0 and not self.done_refused:
                # Measured: the real 1.5B called done before writing anything in 3 of 6 attempts.
                self.done_refused = True
                return fragment(self.trust_root, "agent_done_early"), None
            summary = str(call.arguments.get("summary") or "")
            return "done", self._end("done", "the agent called done", summary)
        try:
            result = self.tools[call.name].run(call.arguments)
        except ToolRefused as exc:
            result = f"error: {exc}"
        except (ValueError, TypeError) as exc:
            result = f"error: {call.name}: bad arguments ({exc})"
        except WorkerError:
            raise  # the phase's clock ran out in run_tests, a model-side failure: the attempt's to end
        except (HubError, OSError) as exc:
            # A tool that failed (a rule file that does not parse, a file that vanished): the model is
            # told, the loop goes on.
            log.warning("agent.tool_failed", tool=call.name, error=str(exc))
            said = describe(exc) if isinstance(exc, HubError) else str(exc)
            result = f"error: {call.name} failed: {said}"
        result = self.redact(result)
        if len(result) > self.result_chars:
            cut = len(result) - self.result_chars
            result = result[: self.result_chars] + f"\n... (cut: {cut} more characters)"
        return result, None

    def _answer(self, generation: Generation, results: list[tuple[ToolCall, str]], native: bool) -> None:
        """The turns that carry the model's calls and their results back to it: as tool turns when the
        server sent native calls, else (the calls were in its text) as one user turn it can read."""
        calls = tuple(c for c, _ in results)
        if native:
            self.turns.append({"role": "assistant", "content": generation.text, "tool_calls": calls})
            for n, (call, result) in enumerate(results):
                call_id = call.id or f"call_{self.turn}_{n}"
                self._result({"role": "tool", "content": result, "tool_call_id": call_id, "name": call.name})
            return
        self.turns.append({"role": "assistant", "content": generation.text})
        shown = "\n\n".join(f"### {c.name}\n{r}" for c, r in results)
        self._result({"role": "user", "content": fragment(self.trust_root, "agent_results", results=shown)})

    def _result(self, turn: dict[str, Any]) -> None:
        self.results.append(len(self.turns))
        self.turns.append(turn)

    def _no_call(self, generation: Generation) -> Ending | None:
        """A reply without any tool call: its edit blocks written as in edit mode, and the model told;
        with none, a reminder of how to call tools, once; the second such reply in a row ends the loop."""
        self.turns.append({"role": "assistant", "content": generation.text})
        told = self._edits(generation)
        if told is not None:
            self.reminded = False
            self._result({"role": "user", "content": told})
            return None
        if self.reminded:
            what = (
                "an empty reply" if not generation.text.strip() else "a reply without a tool call or an edit"
            )
            return self._end("no_tool_call", f"{what}, after being reminded how to call tools")
        self.reminded = True
        self.turns.append({"role": "user", "content": fragment(self.trust_root, "agent_remind")})
        return None

    def _edits(self, generation: Generation) -> str | None:
        try:
            check_reply(generation.text, RESULT_CHARS * 50)
        except EditError as exc:
            return f"error: {exc}"
        told = self.write_answer(generation.text, generation.done_reason)
        return None if told is None else self.redact(told)

    # -- the context window --------------------------------------------------------------------------------

    def _fit(self) -> int:
        """Make the next request fit the window with room for the answer, as the providers estimate it
        (`workers.toolcalls.full_prompt`: the prompt, the tools and the turns): the oldest tool results
        replaced by a note, oldest first (never the latest KEEP_RESULTS), then the answer's room down to
        MIN_ANSWER_TOKENS. Returns how many were dropped; `_WindowFull` when even that is not enough,
        ContextOverflow when the task's prompt alone leaves no room."""
        dropped = 0
        self.answer_room = None
        while True:
            request = replace(self.request, turns=tuple(self.turns))
            fit = budget.plan(
                full_prompt(request),
                request.system,
                request.num_ctx,
                request.num_predict,
                scale=request.token_scale,
                turns=len(request.turns),
            )
            if fit.fits:
                self.estimate = fit.prompt_tokens
                if dropped:
                    log.info(
                        "agent.results_dropped", turn=self.turn, dropped=dropped, tokens=fit.prompt_tokens
                    )
                return dropped
            if self._drop_oldest():
                dropped += 1
                continue
            room = fit.num_ctx - fit.prompt_tokens
            if self.turns and room >= MIN_ANSWER_TOKENS:
                self.answer_room, self.estimate = room, fit.prompt_tokens
                log.info("agent.answer_room", turn=self.turn, room=room, tokens=fit.prompt_tokens)
                return dropped
            if self.turns:
                raise _WindowFull(
                    f"the conversation no longer fits the window (~{fit.prompt_tokens} of {fit.num_ctx} "
                    f"tokens, {MIN_ANSWER_TOKENS} needed for the answer) with its older tool results dropped"
                )
            raise ContextOverflow(
                fit.prompt_tokens,
                fit.num_ctx,
                answer_tokens=fit.answer_tokens,
                configured_num_ctx=request.num_ctx,
                detail="the agent's task prompt does not fit with room for the answer",
            )

    def _drop_oldest(self) -> bool:
        """The oldest tool result still whole (but the latest KEEP_RESULTS) replaced by a note saying
        so; False when there is none."""
        left = [i for i in self.results if i not in self.dropped]
        if len(left) <= KEEP_RESULTS:
            return False
        index = left[0]
        chars = len(str(self.turns[index].get("content") or ""))
        self.turns[index] = {
            **self.turns[index],
            "content": fragment(self.trust_root, "agent_dropped", chars=chars),
        }
        self.dropped.add(index)
        return True


class _WindowFull(Exception):
    """The conversation does not fit the window any more (the loop ends `context_full`)."""
