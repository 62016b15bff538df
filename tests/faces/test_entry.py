"""`hub`'s entry point: a plain `hub status` runs without click and prints, byte for byte, what the
click command prints; everything else (help, group options, usage errors) is click's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import HubRunner, TaskDriver

ROOT = Path(__file__).resolve().parents[2]

# A group option with its default value: click parses the command line, the command is the same.
THROUGH_CLICK = ("--log-format", "json")


def imported_packages(stderr: str) -> set[str]:
    return {
        line.split("|")[2].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_the_hub_console_script_is_the_entry_point() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["hub"] == "hub.faces.entry:main"


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("status", "--json"),
        ("status", "--task", "TASK"),
        ("status", "--json", "--task", "TASK"),
        ("status", "--task", "no-such-task"),
    ],
)
def test_a_plain_status_imports_no_click_and_prints_what_click_prints(
    args: tuple[str, ...], hub: HubRunner, task: TaskDriver
) -> None:
    task_id = task.new()
    task.setup()
    task.new(title="A second task", target="src/app.py")
    args = tuple(task_id if a == "TASK" else a for a in args)

    plain = hub(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    clicked = hub(*THROUGH_CLICK, *args)

    imported = imported_packages(plain.stderr)
    assert "hub" in imported  # the profile was read
    assert "click" not in imported
    assert (plain.returncode, plain.stdout) == (clicked.returncode, clicked.stdout)
    profile_free = "\n".join(
        line for line in plain.stderr.splitlines() if not line.startswith("import time:")
    )
    assert profile_free.strip() == clicked.stderr.strip()


def test_a_title_click_would_change_prints_the_same_both_ways(hub: HubRunner, task: TaskDriver) -> None:
    # Not ASCII, and a colour code (the hub's own guard or click's takes it off): the plain path hands
    # such text to click.echo.
    task.new(title="Grüße \x1b[31mrouge\x1b[0m für alle")

    plain, clicked = hub("status"), hub(*THROUGH_CLICK, "status")

    assert plain.returncode == clicked.returncode == 0
    assert plain.stdout == clicked.stdout
    assert "Grüße" in plain.stdout and "für alle" in plain.stdout
    assert "\x1b" not in plain.stdout


def test_status_errors_and_warnings_are_the_same_both_ways(hub: HubRunner, git_repo: Path) -> None:
    typo = {"HUB_IMPLEMENTOR_MODEL": "qwen2.5-coder:32b"}
    plain, clicked = hub("status", env=typo), hub(*THROUGH_CLICK, "status", env=typo)
    assert (plain.returncode, plain.stdout, plain.stderr) == (
        clicked.returncode,
        clicked.stdout,
        clicked.stderr,
    )
    assert "did you mean HUB_IMPLEMENTER_MODEL?" in plain.stderr

    (git_repo / "hub.yaml").write_text("project: demo\nroles: [\n", encoding="utf-8")
    plain, clicked = hub("status"), hub(*THROUGH_CLICK, "status")
    assert plain.returncode == clicked.returncode == 1
    assert plain.stderr == clicked.stderr and "hub.yaml" in plain.stderr
    assert "Traceback" not in plain.stderr


@pytest.mark.parametrize(
    ("args", "env", "code", "says"),
    [
        (("status", "--help"), {}, 0, "Show the task, its state"),
        (("status", "-h"), {}, 0, "--json"),
        (("status", "--jsn"), {}, 2, "No such option"),
        (("status", "--task"), {}, 2, "requires an argument"),
        (("status", "extra"), {}, 2, "unexpected extra argument"),
        (("status",), {"HUB_LOG_LEVEL": "verbose"}, 2, "'verbose' is not one of"),
        (("status",), {"HUB_LOG_FORMAT": "xml"}, 2, "'xml' is not one of"),
    ],
)
def test_anything_but_a_plain_status_is_clicks_to_parse(
    args: tuple[str, ...], env: dict[str, str], code: int, says: str, hub: HubRunner
) -> None:
    done = hub(*args, env={"PYTHONPROFILEIMPORTTIME": "1", **env})

    assert done.returncode == code
    assert says in done.stdout + done.stderr
    assert "click" in imported_packages(done.stderr)


def test_status_with_the_handoff_variable_reads_that_folder(
    hub: HubRunner, task: TaskDriver, git_repo: Path
) -> None:
    task_id = task.new()
    handoff = git_repo / "_handoff"

    plain = hub("status", "--json", env={"HUB_HANDOFF_DIR": str(handoff), "PYTHONPROFILEIMPORTTIME": "1"})
    clicked = hub("--handoff", str(handoff), "status", "--json")

    assert "click" not in imported_packages(plain.stderr)
    assert plain.stdout == clicked.stdout
    assert [t["task_id"] for t in json.loads(plain.stdout)["tasks"]] == [task_id]


def test_a_file_named_as_the_handoff_folder_is_refused_as_click_refuses_it(
    hub: HubRunner, git_repo: Path
) -> None:
    done = hub("status", env={"HUB_HANDOFF_DIR": str(git_repo / "README.md")})
    assert done.returncode == 2
    assert "is a file" in done.stderr


def test_a_reader_that_went_away_ends_status_quietly_both_ways(task: TaskDriver, git_repo: Path) -> None:
    # `hub status | head -1`: the pipe closes before status writes; click exits 1 saying nothing more.
    task.new()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    done = []
    for args in (("status",), (*THROUGH_CLICK, "status")):
        read, write = os.pipe()
        os.close(read)
        try:
            run = subprocess.run(
                [sys.executable, "-m", "hub", *args],
                cwd=git_repo,
                env=env,
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            os.close(write)
        done.append((run.returncode, run.stderr))

    assert done == [(1, ""), (1, "")]
