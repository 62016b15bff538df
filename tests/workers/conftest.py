"""Shared pieces for the worker tests: a FakeOllama per module, and HTTP MCP servers run as subprocesses."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from hub.testing import FakeOllama

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
OLLAMA_MCP = NODE_MODULES / "ollama-mcp" / "dist" / "index.js"
HUB_SERVE = (sys.executable, "-m", "hub", "worker", "serve")
READY_SECONDS = 30.0


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOllama]:
    """One FakeOllama for the module; tests script their own model names so they do not collide."""
    with FakeOllama() as server:
        yield server


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def hub_serve() -> tuple[str, ...]:
    """The command that runs this package's worker server over stdio."""
    return HUB_SERVE


@pytest.fixture(scope="session")
def node_server() -> Callable[[str], Path]:
    """Path of an npm-installed server's entry point; a missing one fails (CI runs `npm ci`)."""

    def path(which: str) -> Path:
        entry = {"everything": EVERYTHING, "ollama-mcp": OLLAMA_MCP}[which]
        assert entry.is_file(), f"{entry} is missing: run `npm ci` (make install does)"
        return entry

    return path


class ServerProcess:
    """A server subprocess whose output is read by a thread; ready once a line matches `ready`."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], ready: str) -> None:
        self.lines: list[str] = []
        self._ready = re.compile(ready)
        self._seen = threading.Event()
        self.process = subprocess.Popen(
            list(argv),
            env={**os.environ, **env},
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if self._ready.search(line):
                self._seen.set()
        self._seen.set()  # EOF: stop waiting, the caller sees the process has exited

    def wait_ready(self, timeout: float = READY_SECONDS) -> None:
        if not self._seen.wait(timeout) or self.process.poll() is not None:
            self.stop()
            raise AssertionError(f"server did not become ready: {''.join(self.lines)[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self._reader.join(timeout=5)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def spawn_server() -> Iterator[Callable[[Sequence[str], Mapping[str, str], str], ServerProcess]]:
    """Start HTTP servers for a module (waiting for their ready line) and stop them all at its end."""
    started: list[ServerProcess] = []

    def spawn(argv: Sequence[str], env: Mapping[str, str], ready: str) -> ServerProcess:
        server = ServerProcess(argv, env, ready)
        started.append(server)
        server.wait_ready()
        return server

    yield spawn
    for server in started:
        server.stop()
