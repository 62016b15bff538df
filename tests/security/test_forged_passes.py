"""Issue 38, point 5: a failing suite never passes. The JUnit report comes back through a pipe only the
command's processes hold (no path of the hub's in the sandbox or its environment), every pytest behind
`make test` reports into it, `python -m unittest` passes only with its closing `OK`, and what the code under
test can still do in pytest's own process (write the pipe, then `os._exit(0)`) halts at the static gate.
Against a checkout outside /tmp (conftest.py)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.phases.acceptance import CommandResult, jail_for, run_command
from hub.review.scan import is_blocking, scan_paths

PY = shlex.quote(sys.executable)
FAILING = "def test_add():\n    assert 1 + 1 == 3\n"


def sandboxed(ground: Any, command: str) -> CommandResult:
    (ground.checkout / "hub.yaml").write_text("project: p\n", encoding="utf-8")
    return run_command(command, ground.checkout, 120, jail_for(load_config(ground.checkout), ground.checkout))


def write(ground: Any, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ground.checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (ground.checkout / rel).write_text(text, encoding="utf-8")


def test_the_command_sees_no_path_of_the_hubs_for_the_report(ground: Any) -> None:
    result = sandboxed(ground, 'echo "$PYTEST_ADDOPTS"')

    assert "--junitxml=/dev/fd/" in result.stdout
    assert "hub-pytest" not in result.stdout and "/tmp/" not in result.stdout


def test_a_report_forged_beside_pytests_own_does_not_hide_its_failures(ground: Any) -> None:
    # The old attack: the report's path was in PYTEST_ADDOPTS; a test wrote a passing report there. Now the
    # forged report joins pytest's own, which still counts the failure.
    forger = (
        "import os, re\n"
        "def test_forge():\n"
        "    fd = re.search(r'/dev/fd/(\\d+)', os.environ['PYTEST_ADDOPTS']).group(1)\n"
        '    os.write(int(fd), b\'<?xml version="1.0"?><testsuites><testsuite tests="9" failures="0"\'\n'
        '             b\' errors="0" skipped="0"/></testsuites>\')\n'
    )
    write(ground, {"tests/test_calc.py": FAILING, "tests/test_forge.py": forger})

    result = sandboxed(ground, f"{PY} -m pytest -q tests; exit 0")

    assert not result.ok
    assert (result.failure or "").startswith("tests_failed: ")


def test_pytest_behind_make_test_that_ends_early_fails(ground: Any) -> None:
    write(
        ground,
        {
            "Makefile": f"test:\n\t{sys.executable} -m pytest -q tests\n",
            "tests/test_calc.py": "import os\n" + FAILING + "os._exit(0)\n",
        },
    )

    result = sandboxed(ground, "make test")

    assert not result.ok and (result.failure or "").startswith("no_tests_run: ")


def test_pytest_behind_make_test_reports_its_failures(ground: Any) -> None:
    write(
        ground,
        {"Makefile": f"test:\n\t-{sys.executable} -m pytest -q tests\n", "tests/test_calc.py": FAILING},
    )

    result = sandboxed(ground, "make test")  # the recipe's `-` makes make ignore pytest's exit code

    assert not result.ok and (result.failure or "").startswith("tests_failed: ")


def test_unittest_that_ends_early_with_exit_0_fails(ground: Any) -> None:
    write(
        ground,
        {
            "test_calc.py": "import os, unittest\nclass T(unittest.TestCase):\n"
            "    def test_add(self):\n        os._exit(0)\n",
        },
    )

    result = sandboxed(ground, f"{PY} -m unittest test_calc")

    assert result.exit_code == 0 and not result.ok
    assert (result.failure or "").startswith("no_tests_run: unittest")


def test_unittest_that_passes_passes(ground: Any) -> None:
    write(
        ground,
        {
            "test_calc.py": "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        pass\n"
        },
    )

    result = sandboxed(ground, f"{PY} -m unittest test_calc")

    assert result.ok, result.feedback()


def test_a_test_run_no_runner_reported_on_says_so(ground: Any) -> None:
    write(ground, {"Makefile": "test:\n\ttrue\n"})

    result = sandboxed(ground, "make test")

    assert result.ok and "the pass rests on the exit code alone" in result.stderr


def test_the_static_gate_halts_on_an_early_exit_and_on_naming_the_report(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("import os\n\ndef add(a, b):\n    os._exit(0)\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(
        "import os\nTARGET = os.environ['PYTEST_ADDOPTS']\nopen('/dev/fd/3', 'w').write('<testsuites/>')\n",
        encoding="utf-8",
    )
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    findings = [f for f in scan_paths(tmp_path, ["calc.py", "conftest.py"]) if is_blocking(f)]

    assert {(f.rule_id, f.file) for f in findings} >= {
        ("py-os-exit", "calc.py"),
        ("py-test-report", "conftest.py"),
    }
