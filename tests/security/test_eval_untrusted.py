"""Issue 38, points 1 and 11: `hub eval` runs the code it checks in the sandbox, and reads a suite
without following links and within bounds. The suite and the eval's folder lie outside /tmp, HOME holds
planted secrets (conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.core.errors import SuiteInvalid
from hub.evals.runner import make_repo, run_tests
from hub.evals.suite import load_exercise, load_suite

from ..conftest import clean_env


def exercise(suite: Path, name: str = "greet") -> Path:
    folder = suite / name
    (folder / ".meta").mkdir(parents=True)
    (folder / ".docs").mkdir()
    (folder / ".meta" / "config.json").write_text(
        '{"files": {"solution": ["greet.py"], "test": ["greet_test.py"]}}', encoding="utf-8"
    )
    (folder / ".docs" / "instructions.md").write_text("Greet.\n", encoding="utf-8")
    (folder / "greet.py").write_text("def greet():\n    return 'hi'\n", encoding="utf-8")
    (folder / "greet_test.py").write_text(
        "from greet import greet\n\ndef test_greet():\n    assert greet() == 'hi'\n", encoding="utf-8"
    )
    return folder


def test_the_re_run_of_the_tests_is_sandboxed(outside_tmp: Path) -> None:
    home = Path(os.environ["HOME"])
    folder = exercise(outside_tmp / "suite")
    # A solution that behaved in the pipeline's sandbox and, re-run, reads the home folder and writes
    # outside every repository.
    (folder / "greet.py").write_text(
        "import pathlib\n"
        f"try:\n    STOLEN = pathlib.Path({str(home / '.netrc')!r}).read_text()\n"
        "except OSError:\n    STOLEN = ''\n"
        f"try:\n    pathlib.Path({str(outside_tmp / 'escaped.txt')!r}).write_text(STOLEN or 'x')\n"
        "except OSError:\n    pass\n"
        "def greet():\n    return 'hi'\n",
        encoding="utf-8",
    )
    repo = outside_tmp / "eval" / "repo"
    make_repo(repo, [load_exercise(folder)], "project: eval\n")
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider exercises/greet/greet_test.py"

    assert run_tests(command, repo) is True

    assert not (outside_tmp / "escaped.txt").exists()


def test_a_linked_file_in_a_suite_is_refused_naming_it(outside_tmp: Path) -> None:
    home = Path(os.environ["HOME"])
    folder = exercise(outside_tmp / "suite")
    (folder / ".docs" / "instructions.md").unlink()
    (folder / ".docs" / "instructions.md").symlink_to(home / ".bash_history")

    with pytest.raises(SuiteInvalid, match=r"instructions\.md: a symbolic link"):
        load_exercise(folder)

    (folder / ".docs" / "instructions.md").unlink()
    (folder / ".docs" / "instructions.md").write_text("Greet.\n", encoding="utf-8")
    (folder / "helper.py").symlink_to(home / ".ssh" / "id_rsa")
    with pytest.raises(SuiteInvalid, match=r"helper\.py: a symbolic link"):
        load_exercise(folder)


def test_a_linked_exercise_folder_or_config_is_refused_naming_it(outside_tmp: Path) -> None:
    suite = outside_tmp / "suite"
    exercise(suite)
    exercise(outside_tmp / "elsewhere", "linked")
    (suite / "linked").symlink_to(outside_tmp / "elsewhere" / "linked")

    with pytest.raises(SuiteInvalid, match=r"linked: a symbolic link"):
        load_suite(suite)
    assert [e.name for e in load_suite(suite, ["greet"])] == ["greet"]


def test_a_config_that_is_dev_zero_or_huge_is_a_clear_error_without_traceback(outside_tmp: Path) -> None:
    suite = outside_tmp / "suite"
    folder = exercise(suite)
    (folder / ".meta" / "config.json").write_text(" " * 300_000 + "{}", encoding="utf-8")
    with pytest.raises(SuiteInvalid, match=r"config\.json: larger than"):
        load_exercise(folder)

    (folder / ".meta" / "config.json").unlink()
    (folder / ".meta" / "config.json").symlink_to("/dev/zero")
    (outside_tmp / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "hub", "eval", str(suite), "--workdir", str(outside_tmp / "w")],
        cwd=outside_tmp,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2, done.stderr
    assert "config.json: a symbolic link" in done.stderr and "Traceback" not in done.stderr
