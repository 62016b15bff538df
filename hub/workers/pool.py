"""MCP worker connections shared by the phases of one process (`hub next`): each worker server is
spawned and initialised once per process instead of once per phase.

Its own module so that `hub next` with nothing to do does not import the bridge (hub.workers.bridge,
imported here only when a phase asks for a worker)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from hub.core import backends
from hub.workers.bridge import WorkerClient, log_dir_for, make_worker

if TYPE_CHECKING:
    from hub.core.config import Config, RoleConfig
    from hub.workers.base import ChatRequest, Generation, Health, Worker
    from hub.workers.bridge import WorkerClient


class WorkerPool:
    """MCP worker connections shared by every phase one process runs (`hub next --until-idle`, several
    tasks at once): each worker server is spawned and initialised once per process instead of once per
    phase. The server is stateless between calls (each tool call carries its whole request), so phases
    of different tasks can share it; what they cannot share is a crash: a server that dies fails every
    call in flight on it, and the next call starts a fresh one. Backends without a worker server are not
    pooled (an Ollama or OpenAI provider costs no process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[object, ...], WorkerClient] = {}

    def worker(self, config: Config, role: str | RoleConfig) -> Worker:
        role_config = config.role(role) if isinstance(role, str) else role
        if not backends.named(role_config.backend).worker_server:
            return make_worker(config, role_config)
        server = config.worker_server(role_config.worker)
        log_dir = log_dir_for(config)
        env = tuple(sorted(server.env.items()))
        key = (
            server.name,
            server.transport,
            server.command,
            server.url,
            env,
            config.ollama_host,
            str(log_dir),
        )
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = WorkerClient(server, config.ollama_host, log_dir=log_dir)
        return SharedWorker(client)

    def close(self) -> None:
        """Stop every server the pool started."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


class SharedWorker:
    """A phase's handle on a pooled WorkerClient: closing it leaves the server up for the next phase."""

    def __init__(self, client: WorkerClient) -> None:
        self.client = client

    def generate(self, request: ChatRequest) -> Generation:
        return self.client.generate(request)

    def list_models(self) -> list[str]:
        return self.client.list_models()

    def check_health(self, models: list[str]) -> Health:
        return self.client.check_health(models)

    def close(self) -> None:
        pass  # the pool's to stop
