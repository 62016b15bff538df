"""The hub.yaml `hub init` writes: a layout with comments, whose values are the keys' declared defaults.

A `{key}` in `TEMPLATE` is the default `config_schema` declares for that key (README's spelling:
`limits.server_wait_minutes`, `roles.<role>.worker`); `{project}`, `{model}` and the few values that are a
suggestion rather than a default (the roles' `num_predict` and clocks) are filled in by `render`. So a
default changes in one place, and hub.yaml says what a key left out would be.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hub.core.config_schema import default

TEMPLATE = """\
# agent-hub configuration. Environment variables (OLLAMA_HOST, HUB_*) override these values.
project: {project}

ollama:
  host: {ollama.host}

# Which model plays each role, and how it is reached:
#   backend: mcp    -> through an MCP worker server (below), the default
#   backend: ollama -> straight to Ollama's HTTP API
#   backend: openai -> an OpenAI-compatible /v1/chat/completions server (vLLM, llama.cpp, LM Studio)
# Timeouts are seconds: loading the model (its own clock), then to the first token, the longest gap
# between tokens (a stall), and in total. num_predict is the room kept for the answer in num_ctx.
roles:
  implementer:
    model: {model}
    backend: {roles.<role>.backend}
    worker: {roles.<role>.worker}
    timeouts: {timeouts.implementer}
    num_predict: {num_predict.implementer}
  local_reviewer:
    model: {model}
    backend: {roles.<role>.backend}
    worker: {roles.<role>.worker}
    timeouts: {timeouts.local_reviewer}
    num_predict: {num_predict.local_reviewer}
  judge:
    model: {model}

# num_ctx is fixed per model: a value that changes between calls makes Ollama reload the model.
models:
  {model}:
    num_ctx: {default_num_ctx}

# MCP worker servers. "hub" is this package's own, run inside each hub process (no process per phase);
# as a process of its own:  {name: hub, transport: stdio, command: [{python}, -m, hub, worker, serve]}
# npm ollama-mcp 2.x works too:  {name: npm, transport: stdio, command: [npx, -y, ollama-mcp@2]}
workers:
  - name: hub
    transport: inprocess

# The judge: a command given REVIEW_REQUEST.md on stdin (e.g. "claude -p ..."), or a model (backend).
judge:
  command: {judge.command}
  backend: {judge.backend}

# An unreachable or restarting model server is waited out this long (with back-off) before a halt.
limits:
  server_wait_minutes: {limits.server_wait_minutes}

acceptance_timeout_seconds: {acceptance_timeout_seconds}
halt_file: {halt_file}

# A word when a task merges, halts for you or waits for your verdict: apprise URLs and/or a command
# given each event as JSON on stdin (README, "Notifications"; `hub doctor --notify` sends a test).
# notify:
#   urls: [ntfy://ntfy.sh/your-topic]
#   command: [notify-me]
"""

# `{key}`: a name, dotted, maybe with <role> or []; a YAML flow mapping (`{name: hub, ...}`) is no key.
PLACEHOLDER = re.compile(r"\{([a-z_<>\[\].]+)\}")
CLOCKS = ("load", "first_token", "stall", "total")
# A review's answer is a short list of findings: its whole-answer clock is suggested shorter.
REVIEW_TOTAL_SECONDS = 600


def render(project: str, model: str, num_predict: Mapping[str, int], python: str = "python") -> str:
    """hub.yaml for a new repository: `TEMPLATE` with every `{key}` filled in."""
    clocks = {clock: default(f"roles.<role>.timeouts.{clock}") for clock in CLOCKS}
    values = {
        "project": project,
        "model": model,
        "python": python,
        "timeouts.implementer": flow(clocks),
        "timeouts.local_reviewer": flow({**clocks, "total": REVIEW_TOTAL_SECONDS}),
        **{f"num_predict.{role}": str(tokens) for role, tokens in num_predict.items()},
    }
    return PLACEHOLDER.sub(lambda m: values[m[1]] if m[1] in values else scalar(default(m[1])), TEMPLATE)


def flow(mapping: Mapping[str, Any]) -> str:
    """A one-line YAML mapping: {load: 600, first_token: 180}."""
    return "{" + ", ".join(f"{key}: {scalar(value)}" for key, value in mapping.items()) + "}"


def scalar(value: Any) -> str:
    """A default as YAML writes it (the values declared are plain: no quoting needed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
