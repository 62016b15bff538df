"""Agent mode's attempt (issue 19, `roles.implementer.mode: agent`): the implementer works through tool
calls (hub/agent) instead of one answer of edits, then the attempt ends as edit mode's does.

The loop's model calls are `calls.generate`'s, so each is held to the role's three clocks and the
phase's, waits out an outage, and is costed and recorded; a worker error ends the attempt exactly as in
edit mode (`worker_failure`). Its writes are edit mode's (`hub.edits.apply`, recorded as `diff`
records), its run_tests the attempt's own acceptance commands (sandboxed, restored outside the allowed
paths, recorded as `command` records), every turn an `agent-turn` record. When the loop ends:

- `done`, `max_turns` or `context_full` with files written: the acceptance commands; failing, the model is told the
  failures and the loop goes on (up to MAX_REFLECTIONS times, within the same turns), then the same
  `tests_failed` / `resource_limit` stall as edit mode; passing, the caller's checkpoint and
  code_written;
- nothing written: a `no_change` stall;
- `max_tokens`, `repeated_call`, `no_tool_call`: a stall strike of its own (`agent_tokens`,
  `agent_repeat`, `agent_no_call`), the work kept in the stash like every stall's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hub.agent.builtin import ToolRefused, Workspace
from hub.agent.loop import Bounds, Ending, Loop
from hub.agent.mcp import MCPTools
from hub.core.errors import ContextOverflow, RuleError
from hub.core.log import get_logger
from hub.core.prompts import fragment, render
from hub.phases import prompts
from hub.phases.acceptance import CommandResult, user_secrets
from hub.phases.calls import generate
from hub.phases.stall import Failed, Stall
from hub.review.scan import scan_paths
from hub.state.breakers import Trip
from hub.state.provenance import write_record
from hub.state.triggers import Trigger
from hub.workers.base import ChatRequest, Generation, Worker
from hub.workers.bridge import log_dir_for, request_for

if TYPE_CHECKING:
    from hub.agent.builtin import Tool
    from hub.edits.apply import ApplyResult
    from hub.edits.edit import ParseResult
    from hub.phases.implement import Attempt

log = get_logger(__name__)

MAX_REFLECTIONS = 2  # as edit mode's (hub/phases/implement.py): the failures told, the model goes on
# The loop's endings that are a stall strike of their own, and the reason each is recorded under.
STALLS = {"max_tokens": "agent_tokens", "repeated_call": "agent_repeat", "no_tool_call": "agent_no_call"}
FINDINGS_SHOWN = 40


def agent_attempt(attempt: Attempt, worker: Worker, feedback: str = "") -> list[CommandResult]:
    """The loop and the acceptance commands after it; their passing results, or `Failed`. `feedback`
    is what the model must know from earlier (the judge's issues, its last stall, a person's notes)."""
    return AgentAttempt(attempt, worker).run(feedback)


class AgentAttempt:
    """One attempt in agent mode, on the edit-mode `Attempt` it shares its writes and commands with."""

    def __init__(self, attempt: Attempt, worker: Worker) -> None:
        self.attempt = attempt
        self.worker = worker
        self.run_ = attempt.run
        self.config = attempt.config
        self.root = self.config.trust_root
        self.commands: list[str] = list(attempt.contract["specification"].get("acceptance_commands") or [])
        self.secrets = user_secrets(self.config, self.run_.worktree)

    def run(self, feedback: str) -> list[CommandResult]:
        workspace = Workspace(
            root=self.run_.worktree,
            policy=self.attempt._policy(),
            run_tests=self._run_tests if self.commands else None,
            scan=self._scan,
            on_write=self._written,
            trust_root=self.root,
        )
        servers = MCPTools(self.config.mcp_servers, cwd=self.run_.worktree, log_dir=log_dir_for(self.config))
        try:
            offered = servers.start()
        except ToolRefused as exc:
            raise Failed(
                Trip(
                    Trigger.MCP_UNAVAILABLE,
                    str(exc),
                    hint="check mcp_servers in hub.yaml (command, url, allow)",
                )
            ) from None
        *tools, done = workspace.tools()
        try:
            return self._loop(workspace, [*tools, *offered, done], feedback)
        finally:
            servers.stop()

    def _loop(self, workspace: Workspace, tools: list[Tool], feedback: str) -> list[CommandResult]:
        system = render(self.root, "agent_system", tools=tool_lines(tools)).strip()
        request = request_for(self.config, "implementer", agent_prompt(self.attempt, feedback), system)
        settings = self.config.agent
        loop = Loop(
            request,
            tools,
            self._call,
            self._record,
            Bounds(settings.max_turns, settings.max_tokens, settings.max_repeats),
            write_answer=workspace.answer,
            version=lambda: workspace.version,
            redact=self.secrets.redact_known,
            trust_root=self.root,
        )
        ending = loop.run()
        results: list[CommandResult] = []
        for reflection in range(MAX_REFLECTIONS + 1):
            self._go_on(ending)
            self.attempt._clean_state()
            results = [self.attempt._command(c) for c in self.commands]
            failed = [r for r in results if not r.ok]
            if not failed:
                return results
            if reflection == MAX_REFLECTIONS or ending.reason != "done":
                break
            told = fragment(
                self.root, "agent_tests_failed", feedback="\n\n".join(r.feedback() for r in failed)
            )
            ending = loop.run(note=told)
        self.attempt.run.task.record_acceptance([r.summary() for r in results])
        failed = [r for r in results if not r.ok]
        limited = any((r.failure or "").startswith("resource_limit") for r in failed)
        reason = "resource_limit" if limited else "tests_failed"
        raise Failed(Stall(reason, "\n\n".join(r.feedback() for r in failed)[-3000:]))

    def _go_on(self, ending: Ending) -> None:
        """Whether the attempt goes on to the acceptance commands after `ending`; else `Failed`."""
        log.info(
            "agent.ended",
            task=self.run_.task_id,
            reason=ending.reason,
            turns=ending.turns,
            tokens=ending.tokens,
        )
        if ending.reason in STALLS:
            raise Failed(Stall(STALLS[ending.reason], ending.detail))
        if not self.attempt.written:
            raise Failed(Stall("no_change", f"{ending.detail}, and no file was written"))

    # -- what the loop and the tools are given ---------------------------------------------------------------

    def _call(self, request: ChatRequest, purpose: str) -> Generation:
        if self.config.role("implementer").backend != "openai":
            # Ollama holds a tool call back until the model has written it whole (docs/ARCHITECTURE.md,
            # the model side), so a long write_file streams nothing for minutes: its first-token and stall
            # clocks would call that silence a stall. Behind Ollama (directly or through a worker) a turn
            # runs on its total clock, and the phase's.
            silent = max(request.first_token_timeout, request.stall_timeout, request.total_timeout)
            request = replace(request, first_token_timeout=silent, stall_timeout=silent)
        generation = generate(self.run_, self.worker, "implementer", request, purpose)
        if generation.truncated and generation.prompt_tokens >= request.num_ctx:
            # Only a count that filled the window is a sure cut: every turn shares its start with the last,
            # and a server's prompt cache lowers the count of the rest.
            raise ContextOverflow(
                generation.prompt_tokens,
                request.num_ctx,
                source="server",
                detail=f"the server read {generation.prompt_tokens} prompt tokens, its whole window: the start "
                "of the agent's conversation was silently dropped",
                configured_num_ctx=request.num_ctx,
            )
        self.attempt.raw = generation.raw or generation.text
        timings = self.attempt.timings
        timings["model calls"] = round(timings.get("model calls", 0.0) + generation.seconds, 3)
        timings["first token"] = round(generation.first_token_seconds, 3)
        return generation

    def _record(self, turn: dict[str, Any]) -> None:
        payload = {"role": "implementer", "attempt": self.attempt.contract["attempt"], **turn}
        write_record(self.run_.ctx.handoff, self.run_.task_id, "agent-turn", payload, self.run_.now)

    def _written(self, parsed: ParseResult, result: ApplyResult) -> None:
        self.attempt._record_edits(parsed, result)
        self.attempt.written.update(result.changed_files)
        self.attempt.applied_any = self.attempt.applied_any or bool(result.changed_files)

    def _run_tests(self) -> str:
        started = time.monotonic()
        self.attempt._clean_state()
        results = [self.attempt._command(c) for c in self.commands]
        self.attempt.timings["run_tests"] = round(
            self.attempt.timings.get("run_tests", 0.0) + time.monotonic() - started, 3
        )
        failed = [r for r in results if not r.ok]
        if not failed:
            return f"all {len(results)} acceptance command(s) passed:\n" + "\n".join(
                f"$ {r.command}" for r in results
            )
        return f"{len(failed)} of {len(results)} acceptance command(s) failed:\n\n" + "\n\n".join(
            r.feedback() for r in failed
        )

    def _scan(self, paths: list[str]) -> str:
        try:
            found = scan_paths(self.run_.worktree, paths, config_root=self.run_.ctx.repo_root)
        except RuleError as exc:
            raise ToolRefused(f"the scan failed: {exc}") from None
        if not found:
            return f"no findings in {', '.join(paths)}"
        lines = [f"{f.file}:{f.line}: {f.severity} {f.rule_id}: {f.message}" for f in found[:FINDINGS_SHOWN]]
        more = f"\n... and {len(found) - FINDINGS_SHOWN} more" if len(found) > FINDINGS_SHOWN else ""
        return "\n".join(lines) + more


def tool_lines(tools: list[Tool]) -> str:
    """The tools as text for the system prompt (a server without native tool calling sees only this)."""
    lines = []
    for tool in tools:
        props: Mapping[str, Any] = tool.parameters.get("properties") or {}
        required = set(tool.parameters.get("required") or ())
        args = ", ".join(name if name in required else f"{name}?" for name in props)
        lines.append(f"- {tool.name}({args}): {tool.description}")
    return "\n".join(lines)


def agent_prompt(attempt: Attempt, feedback: str) -> str:
    """The task as agent mode tells it: the requirements and the files the task names, not their text
    (the model reads what it needs)."""
    contract = attempt.contract
    spec, constraints = contract["specification"], contract["constraints"]
    named = list(dict.fromkeys(p for p in [spec.get("target_file"), *spec.get("source_files", [])] if p))
    files = (
        "The task names these files: " + ", ".join(named) + ". Read them before you change them."
        if named
        else "The task names no file: find the code it is about with list_files and search."
    )
    forbidden = constraints["forbidden_paths"]
    return render(
        attempt.config.trust_root,
        "agent",
        task_id=contract["task_id"],
        title=contract.get("title", ""),
        allowed_paths=", ".join(constraints["allowed_paths"]) or "none (the task names no allowed path)",
        forbidden_line=f"Never touch: {', '.join(forbidden)}.\n" if forbidden else "",
        requirements=prompts.bullets(spec["requirements"]),
        acceptance_criteria=prompts.bullets(spec.get("acceptance_criteria", [])),
        acceptance_commands=", ".join(f"`{c}`" for c in spec.get("acceptance_commands", [])) or "(none)",
        feedback=feedback,
        files=files,
    )
