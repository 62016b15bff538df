"""Issue 28, point 10: `hub mcp serve --transport http` closes idle connections after a timeout, and at
its descriptor limit answers 503 with one log line per minute instead of a flood of tracebacks.

The server is a real subprocess; its checkout lies outside /tmp and HOME holds planted secrets."""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hub.core.config import CONFIG_FILE, default_yaml

WAIT = 20.0  # the bound on every wait for the server


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(outside_tmp: Path) -> Path:
    path = outside_tmp / "proj"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / CONFIG_FILE).write_text(default_yaml("demo"), encoding="utf-8")
    (path / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "init")
    return path


class Server:
    """`hub mcp serve --transport http` in a subprocess, optionally with a low descriptor limit."""

    def __init__(self, repo: Path, *args: str, nofile: int | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(HUB_LOG_FORMAT="json", HOME=str(repo.parent / "home"))

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        argv = [sys.executable, "-m", "hub", "--repo", str(repo), "mcp", "serve", "--transport", "http"]
        self.process = subprocess.Popen(
            [*argv, "--port", str(self.port), *args],
            env=env,
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.ready.wait(60) and self.process.poll() is None, "".join(self.lines)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if "Uvicorn running on" in line:
                self.ready.set()
        self.ready.set()

    def connect(self) -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        conn.settimeout(WAIT)
        return conn

    def close(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return "".join(self.lines)


def test_an_idle_connection_and_a_half_sent_request_are_closed_after_the_idle_timeout(repo: Path) -> None:
    server = Server(repo, "--idle-timeout", "0.5")
    try:
        silent = server.connect()
        half = server.connect()
        half.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        # recv returns b"" once the server closes; a socket.timeout (the bound) fails the test.
        assert silent.recv(1024) == b""
        assert half.recv(1024) == b""
        # A client that asks is still served on a fresh connection.
        fresh = server.connect()
        fresh.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert fresh.recv(1024).startswith(b"HTTP/1.1 ")
        for conn in (silent, half, fresh):
            conn.close()
    finally:
        server.close()


def test_out_of_descriptors_answers_503_and_logs_one_line_not_a_flood(repo: Path) -> None:
    server = Server(repo, "--idle-timeout", "120", nofile=96)
    held: list[socket.socket] = []
    try:
        # Idle connections until the server has no descriptor left; the next ones wait in the backlog.
        for _ in range(140):
            held.append(server.connect())
        last = held[-1]

        answer = last.recv(1024)

        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable"), answer
        assert b"Retry-After" in answer
        # The clients go: each says so (FIN) and waits until the server has closed its side, so the
        # server's descriptors are free when the next client comes.
        for conn in held:
            conn.shutdown(socket.SHUT_WR)
        for conn in held:
            while conn.recv(4096):
                pass
        with server.connect() as again:
            again.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            served = again.recv(1024)
        assert served.startswith(b"HTTP/1.1 ") and not served.startswith(b"HTTP/1.1 503"), served
    finally:
        for conn in held:
            conn.close()
        text = server.close()
    assert len(re.findall(r"out_of_descriptors", text)) == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert len(text) < 20_000
