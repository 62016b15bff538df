"""Every model backend in one table: a backend's name in hub.yaml (`roles.<role>.backend`,
`judge.backend`), the module that provides its worker, and what the rest of the hub must know about it.

Readers: the config check takes its allowed values from `NAMES` (`config_schema.BACKENDS`);
`workers.bridge.make_worker` imports `provider` and calls its `for_role(config, role) -> Worker`;
`WorkerPool` pools the backends with a `worker_server`; `hub doctor` groups, labels and checks by the
capabilities, and checks Ollama only when a role's backend is `on_ollama`; the halts for a missing
model or an unreachable server take their fix from here (`phases/stall.py`); agent mode reads
`streams_tool_calls`. None of them compares a backend's name.

A new backend is one entry here and a module in `hub/workers/` with `for_role` (plus FakeOllama's side
of its API for the tests). The table sits in core, under every floor that reads it, and imports no
provider: the direct providers load httpx at their top, and `hub status` must not (issue 25).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from hub.core.errors import ConfigError


class Addresses(Protocol):
    """What a backend's address is read from: `hub.core.config.Config` (named by its shape, not imported,
    since the config check imports this table)."""

    @property
    def ollama_host(self) -> str: ...

    @property
    def openai_base_url(self) -> str: ...


class Backend(NamedTuple):
    """One way a role reaches its model, and its capabilities."""

    name: str
    # The module with `for_role(config, role) -> Worker`, imported only when a role uses the backend.
    provider: str
    # It reaches the model through an MCP worker server (`roles.<role>.worker`, the bridge's WorkerClient):
    # one the phases of a process share (WorkerPool), and that `hub doctor` starts as a check of its own.
    worker_server: bool
    # Its models live on Ollama (`ollama.host`, `ollama.hosts`): `hub doctor` asks each of those servers
    # for its version.
    on_ollama: bool
    # Tool calls stream as they are written. Ollama holds a call back until it parses whole, so behind
    # it a long call is minutes of silence that the first-token and stall clocks must not call a stall.
    streams_tool_calls: bool
    # How a person gets a model the server lacks (`{model}` is the model's name).
    missing_fix: str
    # How a person brings back a server that does not answer.
    unreachable_fix: str
    # The server's address as configured, for what `hub doctor` shows.
    url: Callable[[Addresses], str]

    def missing_hint(self, model: str) -> str:
        return self.missing_fix.format(model=model)


_PULL = "ollama pull {model}"
_START_OLLAMA = "start Ollama (`ollama serve`) or point OLLAMA_HOST / ollama.host in hub.yaml at it"


def _on_ollama(name: str, provider: str, worker_server: bool) -> Backend:
    """A backend whose models live on Ollama, which holds a tool call back until it parses whole."""
    return Backend(
        name=name,
        provider=provider,
        worker_server=worker_server,
        on_ollama=True,
        streams_tool_calls=False,
        missing_fix=_PULL,
        unreachable_fix=_START_OLLAMA,
        url=lambda config: config.ollama_host,
    )


TABLE: dict[str, Backend] = {
    b.name: b
    for b in (
        # The default: the hub's own worker (in-process) or another MCP worker server in front of Ollama.
        _on_ollama("mcp", "hub.workers.bridge", worker_server=True),
        _on_ollama("ollama", "hub.workers.ollama", worker_server=False),
        # vLLM, llama.cpp's server, LM Studio, Ollama's /v1.
        Backend(
            name="openai",
            provider="hub.workers.openai",
            worker_server=False,
            on_ollama=False,
            streams_tool_calls=True,
            missing_fix="serve {model} on the OpenAI-compatible server",
            unreachable_fix="start the OpenAI-compatible server or point openai.base_url in hub.yaml at it",
            url=lambda config: config.openai_base_url,
        ),
    )
}
NAMES = tuple(TABLE)


def named(name: str) -> Backend:
    """The table's entry for `name`; an unknown name is a configuration error."""
    try:
        return TABLE[name]
    except KeyError:
        raise ConfigError(f"unknown backend '{name}' (one of {', '.join(NAMES)})") from None
