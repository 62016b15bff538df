"""Agent mode's attempt (issue 19, `roles.implementer.mode: agent`): the implementer works through tool
calls (hub/agent) instead of one answer of edits: a mode over the attempt workbench (workbench.py),
which decides what it shares with edit mode.

The loop's model calls are `calls.generate`'s, so each is held to the role's three clocks and the
phase's, waits out an outage, and is costed and recorded; a worker error ends the attempt exactly as in
edit mode (`worker_failure`). Its writes are edit mode's (`hub.edits.apply`, recorded as `diff`
records), its run_tests the attempt's own acceptance commands (sandboxed, restored outside the allowed
paths, recorded as `command` records), every turn an `agent-turn` record. Its first observation is the
repository map (`hub.review.repomap`: the files and definitions that matter most to the task's words,
its named files pinned first, an eighth of the window at most) in the task's prompt, so a small model can
read the right file at once instead of spending turns on list_files and search. When the loop ends:

- `done` (a done call, or plain text after a write), `max_turns` or `context_full` with files written: the acceptance commands; failing, the model is told the
  failures and the loop goes on (up to the workbench's MAX_REFLECTIONS times, within the same turns),
  then the workbench's `tests_failed` / `resource_limit` stall; passing, the workbench's commit and
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
from hub.core import backends
from hub.core.errors import GitError, RuleError, describe
from hub.core.log import get_logger
from hub.core.redaction import user_secrets
from hub.core.templates import fragment, render
from hub.phases.acceptance import CommandResult
from hub.phases.attempt_commands import failures
from hub.phases.attempt_files import map_cache
from hub.phases.attempt_prompt import agent_prompt, named_files
from hub.phases.attempt_records import record_turn
from hub.phases.stall import Failed, Stall
from hub.phases.workbench import Reflected, Workbench
from hub.review.repomap import build_map, tracked_files
from hub.review.scan import scan_paths
from hub.state.breakers import Trip
from hub.state.triggers import Trigger
from hub.workers import budget
from hub.workers.base import ChatRequest, Generation, Worker
from hub.workers.bridge import log_dir_for, request_for

if TYPE_CHECKING:
    from hub.agent.builtin import Tool

log = get_logger(__name__)

# The loop's endings that are a stall strike of their own, and the reason each is recorded under.
STALLS = {"max_tokens": "agent_tokens", "repeated_call": "agent_repeat", "no_tool_call": "agent_no_call"}
FINDINGS_SHOWN = 40
# The map's share of the window (room stays for the task, the files the model reads and its answers), and
# its most: aider's default map size. Not yet measured on a real model (issue 34). The cap also keeps the
# map small where hub.yaml's num_ctx is above the model's trained length (the server's window is smaller).
MAP_SHARE = 8
MAP_MAX_TOKENS = 1024


def agent_mode(bench: Workbench, worker: Worker) -> list[CommandResult]:
    """The loop and the acceptance commands after it; their passing results, or `Failed`."""
    return AgentAttempt(bench, worker).run()


class AgentAttempt:
    """One attempt in agent mode, on the workbench it shares its writes and commands with edit mode on."""

    def __init__(self, bench: Workbench, worker: Worker) -> None:
        self.bench = bench
        self.worker = worker
        self.run_ = bench.run
        self.config = bench.config
        self.root = self.config.trust_root
        self.secrets = user_secrets(self.config, self.run_.worktree)

    def run(self) -> list[CommandResult]:
        workspace = Workspace(
            root=self.run_.worktree,
            policy=self.bench.policy(),
            run_tests=self._run_tests if self.bench.commands else None,
            scan=self._scan,
            on_write=self.bench.wrote,
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
            return self._loop(workspace, [*tools, *offered, done])
        finally:
            servers.stop()

    def _loop(self, workspace: Workspace, tools: list[Tool]) -> list[CommandResult]:
        system = render(self.root, "agent_system", tools=tool_lines(tools)).strip()
        lean = agent_prompt(self.run_)
        repo_map = self._map(workspace)
        prompt = agent_prompt(self.run_, repo_map=repo_map) if repo_map else lean
        request = request_for(self.config, "implementer", prompt, system)
        settings = self.config.agent
        loop = Loop(
            request,
            tools,
            self._call,
            lambda turn: record_turn(self.run_, turn),
            Bounds(settings.max_turns, settings.max_tokens, settings.max_repeats),
            write_answer=workspace.answer,
            version=lambda: workspace.version,
            # Full redaction, as command output: a tool's answer (an MCP server's, a tracked file) may hold
            # any token, not only the user's known ones (issue 38).
            redact=self.secrets.redact,
            trust_root=self.root,
            refusal=workspace.take_refusal,
            lean_prompt=lean if repo_map else None,
        )
        ending = loop.run()
        self._go_on(ending)

        def reflect(failed: list[CommandResult], _: int) -> Reflected:
            # The failures told, the loop goes on within the same turns; only after `done`.
            nonlocal ending
            if ending.reason != "done":
                return "stop"
            ending = loop.run(note=fragment(self.root, "agent_tests_failed", feedback=failures(failed)))
            self._go_on(ending)
            return "rerun"

        return self.bench.acceptance(reflect)

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
        if not self.bench.written:
            raise Failed(Stall("no_change", f"{ending.detail}, and no file was written"))

    def _map(self, workspace: Workspace) -> str:
        """The repository map as the prompt shows it (prompts/agent_map.md), of the files the model may
        read; empty when there is nothing to show or git cannot list the files (the tools still can)."""
        contract = self.run_.contract
        spec = contract["specification"]
        words = "\n".join(
            [contract.get("title", ""), *spec["requirements"], *spec.get("acceptance_criteria", [])]
        )
        num_ctx = self.config.num_ctx_for(self.config.role("implementer").model)
        try:
            files = [f for f in tracked_files(self.run_.worktree) if workspace.shown(f)]
            found = build_map(
                self.run_.worktree,
                files,
                words=words,
                budget_tokens=min(num_ctx // MAP_SHARE, MAP_MAX_TOKENS),
                pinned=named_files(contract),
                cache_dir=map_cache(self.run_),
                count_tokens=budget.estimate_tokens,
            )
        except GitError as exc:
            log.warning("agent.no_map", task=self.run_.task_id, error=str(exc))
            return ""
        log.info("agent.map", task=self.run_.task_id, files=len(found.files), tokens=found.tokens)
        if not found.text.strip():
            return ""
        # Signatures carry default values: the user's own secrets in them are replaced (issue 28).
        return self.secrets.redact_known(fragment(self.root, "agent_map", map=found.text.rstrip()))

    # -- what the loop and the tools are given ---------------------------------------------------------------

    def _call(self, request: ChatRequest, purpose: str) -> Generation:
        if not backends.named(self.config.role("implementer").backend).streams_tool_calls:
            # Ollama holds a tool call back until the model has written it whole (docs/ARCHITECTURE.md,
            # the model side), so a long write_file streams nothing for minutes: its first-token and stall
            # clocks would call that silence a stall. Behind Ollama (directly or through a worker) a turn
            # runs on its total clock, and the phase's.
            silent = max(request.first_token_timeout, request.stall_timeout, request.total_timeout)
            request = replace(request, first_token_timeout=silent, stall_timeout=silent)
        return self.bench.generate(self.worker, request, purpose, turns=True)

    def _run_tests(self) -> str:
        started = time.monotonic()
        results = self.bench.run_acceptance()
        self.bench.spent("run_tests", time.monotonic() - started)
        failed = [r for r in results if not r.ok]
        if not failed:
            return f"all {len(results)} acceptance command(s) passed:\n" + "\n".join(
                f"$ {r.command}" for r in results
            )
        return f"{len(failed)} of {len(results)} acceptance command(s) failed:\n\n" + failures(results)

    def _scan(self, paths: list[str]) -> str:
        try:
            found = scan_paths(self.run_.worktree, paths, config_root=self.run_.ctx.repo_root)
        except RuleError as exc:
            raise ToolRefused(f"the scan failed: {describe(exc)}") from None
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
