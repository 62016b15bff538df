"""hub.repo.leftovers: what a killed hub left running is ended by the task's next phase, and nothing else is."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.repo import leftovers


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    """A process leading a session (and group) of its own, as a judge command or a sandbox does."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_recorded_group_is_killed_and_its_file_removed(
    tmp_path: Path, group: subprocess.Popen[bytes]
) -> None:
    pidfile = tmp_path / ".judge.pid"
    leftovers.remember(pidfile, group.pid, group=True)

    assert leftovers.reap(pidfile) is True
    assert group.wait(timeout=10) == -9
    assert not pidfile.exists()


def test_a_pid_now_naming_another_process_is_not_killed(
    tmp_path: Path, group: subprocess.Popen[bytes]
) -> None:
    pidfile = tmp_path / ".judge.pid"
    leftovers.remember(pidfile, group.pid, group=True)
    record = json.loads(pidfile.read_text(encoding="utf-8"))
    pidfile.write_text(json.dumps({**record, "start": "1"}), encoding="utf-8")  # the pid reused since

    assert leftovers.reap(pidfile) is False
    assert group.poll() is None and not pidfile.exists()


def test_a_pid_recorded_on_another_host_is_not_killed(tmp_path: Path, group: subprocess.Popen[bytes]) -> None:
    pidfile = tmp_path / ".judge.pid"
    leftovers.remember(pidfile, group.pid, group=True)
    record = json.loads(pidfile.read_text(encoding="utf-8"))
    pidfile.write_text(json.dumps({**record, "host": "another-machine"}), encoding="utf-8")

    assert leftovers.reap(pidfile) is False
    assert group.poll() is None and not pidfile.exists()


def test_a_process_the_hub_may_not_kill_is_left_and_its_file_removed(
    tmp_path: Path, group: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another user's (a hub once run under sudo): raising would fail every later phase of the task.
    pidfile = tmp_path / ".judge.pid"
    leftovers.remember(pidfile, group.pid, group=True)

    def not_permitted(_pid: int, _sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "killpg", not_permitted)
    assert leftovers.reap(pidfile) is False
    assert group.poll() is None and not pidfile.exists()


def test_an_unreadable_file_kills_nothing_and_goes(tmp_path: Path) -> None:
    pidfile = tmp_path / ".judge.pid"
    pidfile.write_text("{not json", encoding="utf-8")
    assert leftovers.reap(pidfile) is False
    assert not pidfile.exists()
