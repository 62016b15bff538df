"""Issue 28, points 8 and 9: bounds in the sandbox (`sandbox.limits`), and acceptance that ended early
fails. Against a checkout outside /tmp (conftest.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import load_config
from hub.core.errors import ConfigError
from hub.phases.acceptance import CommandResult, jail_for, run_command
from hub.safety.limits import own_tasks

PY = shlex.quote(sys.executable)


def limited(ground: Any, **limits: int) -> Any:
    inline = ", ".join(f"{k}: {v}" for k, v in limits.items())
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  limits: {{{inline}}}\n", encoding="utf-8"
    )
    return jail_for(load_config(ground.checkout), ground.checkout)


def run(ground: Any, command: str, **limits: int) -> CommandResult:
    return run_command(command, ground.checkout, 120, limited(ground, **limits))


def py(code: str) -> str:
    return f"{PY} -c {shlex.quote(code)}"


def test_a_fork_bomb_ends_with_a_resource_limit_failure(ground: Any) -> None:
    result = run(ground, "for i in $(seq 200); do sleep 60 & done; wait", processes=20)

    assert not result.ok and not result.timed_out
    assert result.failure == "resource_limit: more than 20 processes (sandbox.limits.processes)"
    assert "resource_limit" in result.feedback()


def test_a_memory_hog_ends_with_a_resource_limit_failure(ground: Any) -> None:
    hog = "import time\nx = []\nfor i in range(40):\n    x.append(b'y' * (8 << 20)); time.sleep(0.02)\ntime.sleep(60)"

    result = run(ground, py(hog), memory_mb=64)

    assert not result.timed_out
    assert result.failure == "resource_limit: more than 64 MiB of memory (sandbox.limits.memory_mb)"


def test_a_disk_filler_ends_and_what_it_wrote_is_removed(ground: Any) -> None:
    (ground.checkout / "kept.txt").write_text("the model's own new file\n", encoding="utf-8")
    filler = (
        "import time\nfor i in range(60):\n    open(f'out{i}.bin', 'wb').write(b'x' * (1 << 20))\n"
        "open('src/app.py', 'a').write('# touched\\n')\ntime.sleep(60)"
    )

    result = run(ground, py(filler), disk_mb=16)

    assert not result.timed_out
    assert result.failure == "resource_limit: 16 MiB written or more (sandbox.limits.disk_mb)"
    assert sorted(p.name for p in ground.checkout.glob("out*.bin")) == []
    assert (ground.checkout / "kept.txt").exists()  # written before the command: not its doing
    assert (ground.checkout / "src" / "app.py").exists()  # tracked: the restore after each command's


def test_one_file_past_the_disk_limit_is_stopped_at_the_limit(ground: Any) -> None:
    result = run(ground, "head -c 50000000 /dev/zero > big.bin; echo after", disk_mb=8)

    assert (result.failure or "").startswith("resource_limit: ")
    assert not (ground.checkout / "big.bin").exists()


def test_a_command_within_its_limits_is_untouched(ground: Any) -> None:
    result = run(ground, py("x = b'y' * (4 << 20); open('small.bin', 'wb').write(x); print('fine')"))

    assert result.ok and "fine" in result.stdout and result.failure is None
    assert (ground.checkout / "small.bin").stat().st_size == 4 << 20


@pytest.mark.parametrize("value", ["0", "-1", "many", "true", "{x: 1}"])
def test_a_bad_limit_in_hub_yaml_is_a_clear_error(ground: Any, value: str) -> None:
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  limits: {{processes: {value}}}\n", encoding="utf-8"
    )

    with pytest.raises(ConfigError, match=r"sandbox\.limits\.processes"):
        load_config(ground.checkout)


# --- point 9: acceptance that ended early fails ------------------------------------------------------------


def commit(ground: Any, files: dict[str, str]) -> None:
    for name, text in files.items():
        (ground.checkout / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=ground.checkout, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "tests"], cwd=ground.checkout, check=True)


def pytest_run(ground: Any, *args: str) -> CommandResult:
    command = f"{PY} -m pytest -q -p no:cacheprovider {' '.join(args)}"
    return run_command(command, ground.checkout, 120, jail_for(load_config(ground.checkout), ground.checkout))


def test_code_calling_os_exit_zero_at_import_fails_though_pytest_exits_0(ground: Any) -> None:
    commit(ground, {"test_app.py": "import calc\n\ndef test_add():\n    assert calc.add(1, 2) == 4\n"})
    (ground.checkout / "calc.py").write_text("import os\nos._exit(0)\n", encoding="utf-8")

    result = pytest_run(ground, "test_app.py")

    assert result.exit_code == 0 and not result.ok
    assert (result.failure or "").startswith("no_tests_run: pytest exited 0 but wrote no report")


def test_a_conftest_that_empties_the_collection_fails(ground: Any) -> None:
    commit(ground, {"test_app.py": "def test_add():\n    assert 1 + 1 == 3\n"})
    # Nothing collected is exit 5; the hook turns that into 0, as the attack did.
    (ground.checkout / "conftest.py").write_text(
        "def pytest_collection_modifyitems(items):\n    items.clear()\n\n\n"
        "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n",
        encoding="utf-8",
    )

    result = pytest_run(ground)

    assert result.exit_code == 0 and not result.ok
    assert result.failure == "no_tests_run: pytest exited 0 but ran no test (none collected, or all skipped)"


def test_a_hook_that_hides_failures_from_the_exit_code_still_fails(ground: Any) -> None:
    commit(ground, {"test_app.py": "def test_add():\n    assert 1 + 1 == 3\n"})
    (ground.checkout / "conftest.py").write_text(
        "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n", encoding="utf-8"
    )

    result = pytest_run(ground)

    assert result.exit_code == 0 and not result.ok
    assert result.failure == "tests_failed: pytest exited 0 but its report shows 1 failed or erroring tests"


def test_a_real_passing_run_passes(ground: Any) -> None:
    commit(ground, {"test_app.py": "def test_add():\n    assert 1 + 1 == 2\n"})

    result = pytest_run(ground)

    assert result.ok, result.stdout + result.stderr
    assert not list(Path(ground.checkout).glob("*.xml"))  # the report is written outside the worktree


def test_the_process_limits_room_counts_threads_as_rlimit_nproc_does(tmp_path: Path) -> None:
    # /proc's shape: a process with 40 threads besides its main one, and one with none.
    for pid, threads in ((100, 41), (200, 1)):
        for tid in range(threads):
            (tmp_path / str(pid) / "task" / str(pid + tid)).mkdir(parents=True)
    (tmp_path / "self").mkdir()

    # The kernel counts 42 tasks against RLIMIT_NPROC, not 2 processes.
    assert own_tasks(os.getuid(), str(tmp_path)) == 42
    assert own_tasks(os.getuid() + 1, str(tmp_path)) == 0
    # This process is one of its user's, with its threads.
    assert own_tasks(os.getuid()) >= len(os.listdir("/proc/self/task"))
