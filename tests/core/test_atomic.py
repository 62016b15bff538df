"""hub.core.atomic: temp files a writer killed before its rename left are swept; others are kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hub.core.atomic import sweep_temps, write_atomic


def test_a_killed_writers_temp_file_is_swept_and_a_live_ones_and_others_are_kept(tmp_path: Path) -> None:
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    dead = tmp_path / f".STATUS.md.{dead_pid.pid}-0a1b2c3d.tmp"
    owner = tmp_path / f".hub.lock.owner.{dead_pid.pid}.tmp"
    live = tmp_path / f".STATUS.md.{os.getpid()}-0a1b2c3d.tmp"
    foreign = tmp_path / ".TASK_CONTRACT.json.killed.tmp"
    for path in (dead, owner, live, foreign):
        path.write_text("{half", encoding="utf-8")

    assert sorted(sweep_temps(tmp_path)) == sorted([dead, owner])

    assert live.exists() and foreign.exists()


def test_an_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    write_atomic(tmp_path / "STATUS.md", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["STATUS.md"]
