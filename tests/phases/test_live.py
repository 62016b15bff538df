"""The live view of a model call: one updating line on a terminal, nothing but the logs on a pipe, and
the same call in `hub status` from another process. Real `hub` processes against a FakeOllama that
streams slowly; a pseudo-terminal plays the person watching."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hub.testing import FakeOllama, Reply

if TYPE_CHECKING:
    from conftest import HubRunner

IMPL = "impl-model"
WAIT = 60.0  # a bound on every wait below
ANSWER = 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name\n```\n'


def set_up(git_repo: Path, hub: HubRunner, url: str) -> dict[str, str]:
    (git_repo / "hub.yaml").write_text(
        f"project: demo\nroles:\n  implementer: {{model: {IMPL}, backend: ollama}}\n", encoding="utf-8"
    )
    env = {"OLLAMA_HOST": url}
    assert hub("new", "--title", "Comma", "--requirement", "r", "--target", "src/app.py").returncode == 0
    assert hub("next", env=env).returncode == 0  # set up
    return env


def user_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
    return {**env, "TERM": "xterm", "COLUMNS": "160", **extra}


def test_on_a_terminal_a_model_call_shows_one_line_with_role_model_tokens_and_rate(
    git_repo: Path, hub: HubRunner
) -> None:
    slow = Reply(ANSWER, chunk_chars=1, chunk_delay=0.03)  # ~2 s of streaming, a token a piece
    with FakeOllama({IMPL: lambda _body: slow}) as fake:
        env = set_up(git_repo, hub, fake.url)
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "hub", "next"],
            cwd=git_repo,
            env=user_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=slave,
        )
        os.close(slave)
        shown = b""
        deadline = time.monotonic() + WAIT
        try:
            while True:
                ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, f"nothing more on the terminal within {WAIT} s: {shown[-500:]!r}"
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the process ended and closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            assert proc.wait(timeout=WAIT) == 0
            os.close(master)
    text = shown.decode(errors="replace")
    assert f"implementer {IMPL}" in text and " tokens/s" in text, text[-2000:]
    assert "phase" in text  # the log lines still print


def test_on_a_pipe_the_logs_stay_json_lines_and_no_line_is_drawn(git_repo: Path, hub: HubRunner) -> None:
    with FakeOllama({IMPL: lambda _body: Reply(ANSWER, chunk_chars=4, chunk_delay=0.01)}) as fake:
        env = set_up(git_repo, hub, fake.url)
        done = hub("next", env={**env, "HUB_LOG_FORMAT": "auto"})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(json.loads(line) for line in lines)
    assert "tokens/s" not in done.stderr and "\x1b[" not in done.stderr


def test_hub_status_shows_a_call_running_in_another_process(git_repo: Path, hub: HubRunner) -> None:
    asked = threading.Event()
    release = threading.Event()

    def answer(_body: object) -> Reply:
        asked.set()
        # Streams a few tokens at once, then waits (bounded) until the test has seen them.
        release.wait(WAIT)
        return Reply(ANSWER, chunk_chars=2)

    with FakeOllama({IMPL: answer}) as fake:
        env = set_up(git_repo, hub, fake.url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "hub", "next"],
            cwd=git_repo,
            env=user_env({**env, "HUB_LOG_FORMAT": "json"}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert asked.wait(WAIT)  # the implementer's call reached the model
            shown = hub("status").stdout
            call = json.loads(hub("status", "--json").stdout)["tasks"][0]["call"]
            release.set()
            assert proc.wait(timeout=WAIT) == 0
        finally:
            release.set()
            proc.kill()
            proc.wait(timeout=WAIT)
    assert (call["role"], call["model"]) == ("implementer", IMPL)
    assert f"calling  implementer {IMPL}  " in shown and "no tokens yet" in shown
    after = json.loads(hub("status", "--json").stdout)["tasks"][0]
    assert after["call"] is None  # the call is over: nothing left to show
