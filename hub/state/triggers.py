"""Why a task halted: the one list of halt triggers (`Trigger`).

A trigger is written into the contract (`breaker.trigger`, `handoff_data.halt.trigger`) and shown to a
person in ERIK_HALT.md and `hub status`, so the values never change: a contract on disk keeps its own.
A `StrEnum`: it equals (and is saved as) its plain string. tests/state/test_triggers.py fails when a
trigger is spelled as a free string anywhere else in hub/.
"""

from __future__ import annotations

from enum import StrEnum


class Trigger(StrEnum):
    """A halt's cause, as `hub.state.breakers.Trip.trigger` names it."""

    # The breakers (hub.state.breakers): limits a task ran into.
    REBUTTAL_LIMIT = "rebuttal_limit"
    REVIEW_CYCLES = "review_cycles"
    DESTRUCTIVE_DIFF = "destructive_diff"
    TOO_MANY_FILES = "too_many_files"
    HASH_LOOP = "hash_loop"
    TOKEN_BUDGET = "token_budget"
    COST_CEILING = "cost_ceiling"
    GLOBAL_TIMEOUT = "global_timeout"
    INTERRUPTIONS = "interruptions"
    # The models' work, as the reviewers and the judge saw it.
    STALL = "stall"
    REVIEW_STALL = "review_stall"
    CRITICAL_FLAW = "critical_flaw"
    CRITICAL_HALT = "critical_halt"
    SECRET_IN_CHANGE = "secret_in_change"
    LINK_IN_CHANGE = "link_in_change"
    JUDGE_TIMEOUT = "judge_timeout"
    # The workers and the tools the phases call.
    # Named `ollama_unavailable` before issue 33 (the server may as well be llama.cpp or vLLM). A contract
    # halted then keeps the old value on disk: it is a string there, which nothing reads back into this
    # enum, so such a task still loads, shows and resumes (tests/phases/test_server_halts.py).
    SERVER_UNAVAILABLE = "server_unavailable"
    MODEL_NOT_FOUND = "model_not_found"
    CONTEXT_OVERFLOW = "context_overflow"
    MCP_UNAVAILABLE = "mcp_unavailable"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    # An acceptance command that cannot run on the base (not found, not executable, no test runner): the
    # person's to fix, found before any model call (hub.phases.attempt_preflight).
    COMMAND_CANNOT_RUN = "command_cannot_run"
    # Git and the file system.
    GIT_ERROR = "git_error"
    OS_ERROR = "os_error"
    GIT_CONFLICT = "git_conflict"
    BASE_MISSING = "base_missing"
    NOT_IN_BASE = "not_in_base"
