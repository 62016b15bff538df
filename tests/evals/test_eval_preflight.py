"""`hub eval` before its first task (issue 36): a model server that does not answer, or an interpreter
for the tests without pytest, is said with its fix, exit 2, nothing created; `--python` picks the
interpreter the tests run with; a terminal shows the model calls as they run; and a wait for the
server is not the hub's own time."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from hub.evals.runner import Hub
from hub.testing import FakeOllama, Reply

from ..conftest import clean_env
from .test_eval import CODER, REVIEWER, SUITE, config, example, hub_eval, reviewer

WAIT = 300.0  # a bound on the terminal test's wait for the run to end


def solve(body: dict[str, object]) -> str:
    path, code = example("vowel-count")
    return f"exercises/vowel-count/{path}\n```python\n{code}```\n"


def bare_venv(folder: Path, with_hubs_packages: bool = False) -> Path:
    """A new venv without pip (so without pytest); with the hub's site-packages on its path when asked
    (an interpreter other than the hub's own that has pytest). Its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    if with_hubs_packages:
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(site, "hub_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def test_no_model_server_stops_hub_eval_before_anything_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text(
        'project: x\nollama: {host: "http://127.0.0.1:9"}\nroles: {implementer: {model: "coder:test"}}\n',
        encoding="utf-8",
    )
    started = time.monotonic()
    done = hub_eval(tmp_path, str(SUITE), "--workdir", str(tmp_path / "run"))

    assert done.returncode == 2, done.stderr[-2000:]
    assert "hub eval cannot start, nothing was created" in done.stderr
    assert "no Ollama at http://127.0.0.1:9" in done.stderr and "fix: start Ollama" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 60  # not the minutes of a server wait per task


def test_an_interpreter_without_pytest_stops_hub_eval_naming_how_to_get_it(tmp_path: Path) -> None:
    python = bare_venv(tmp_path / "venv")
    with FakeOllama({CODER: solve, REVIEWER: reviewer}) as fake:
        done = hub_eval(
            tmp_path,
            str(SUITE),
            "--config",
            str(config(tmp_path, fake)),
            "--python",
            str(python),
            "--workdir",
            str(tmp_path / "run"),
        )
        calls = [r for r in fake.requests if r.path == "/api/chat"]

    assert done.returncode == 2, done.stderr[-2000:]
    assert f"test runner: {python} cannot import pytest" in done.stderr
    assert "agent-hub[eval]" in done.stderr and "--python" in done.stderr
    assert not (tmp_path / "run").exists() and calls == []


def test_python_picks_the_interpreter_the_exercises_tests_run_with(tmp_path: Path) -> None:
    python = bare_venv(tmp_path / "venv", with_hubs_packages=True)
    with FakeOllama({CODER: solve, REVIEWER: reviewer}) as fake:
        done = hub_eval(
            tmp_path,
            str(SUITE),
            "--only",
            "vowel-count",
            "--config",
            str(config(tmp_path, fake)),
            "--python",
            str(python),
            "--workdir",
            str(tmp_path / "run"),
            "--json",
        )

    assert done.returncode == 0, done.stderr[-3000:]
    (task,) = json.loads(done.stdout)["tasks"]
    assert task["solved"], task
    (contract,) = (tmp_path / "run" / "repo" / "_handoff" / "archive").glob("*/TASK_CONTRACT.json")
    (command,) = json.loads(contract.read_text(encoding="utf-8"))["specification"]["acceptance_commands"]
    assert f"{python} -m pytest" in command


def test_on_a_terminal_hub_eval_draws_the_live_line_of_its_model_calls(tmp_path: Path) -> None:
    slow = Reply(solve({}), chunk_chars=1, chunk_delay=0.02)  # a few seconds of streaming
    with FakeOllama({CODER: lambda _body: slow, REVIEWER: reviewer}) as fake:
        master, slave = pty.openpty()
        env = {**clean_env(), "TERM": "xterm", "COLUMNS": "160"}
        env.pop("HUB_LOG_FORMAT", None)
        args = [
            "--only",
            "vowel-count",
            "--config",
            str(config(tmp_path, fake)),
            "--workdir",
            str(tmp_path / "run"),
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "hub", "eval", str(SUITE), *args],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=slave,
        )
        os.close(slave)
        shown = b""
        deadline = time.monotonic() + WAIT
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    shown += os.read(master, 65536)
                except OSError:
                    break
        proc.kill()
        proc.wait()
        os.close(master)

    text = shown.decode("utf-8", "replace")
    assert f"implementer {CODER}" in text and "tokens" in text, text[-3000:]


def test_a_wait_for_the_model_server_outside_a_call_is_not_the_hubs_time(tmp_path: Path) -> None:
    lines = [
        {"event": "phase", "task": "t1", "seconds": 100.0},
        {"event": "server.waited", "task": "t1", "during": "health check", "seconds": 60.0},
        {"event": "server.waited", "task": "t1", "during": "model call", "seconds": 5.0},
        {"event": "phase", "task": "t2", "seconds": 7.5},
    ]
    log = tmp_path / "hub-next.log"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n", encoding="utf-8")

    seconds = Hub(tmp_path, log).phase_seconds()

    # The call's own wait is already in its record's seconds (the model's time), so only the health
    # check's comes off the phases' time.
    assert seconds == {"t1": 40.0, "t2": 7.5}
