"""The implementer's two modes over one workbench: the mode is chosen in one place, edit mode never pays
for agent mode's imports, and agent mode reaches nothing private of the workbench or of edit mode."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import GREET_FIXED, IMPL, Pipeline, whole_file
from .test_agent import FIX, agent_mode, call

PHASES = Path(__file__).resolve().parents[2] / "hub" / "phases"


def imported_modules(stderr: str) -> set[str]:
    """The modules named in `-X importtime` lines (PYTHONPROFILEIMPORTTIME)."""
    return {
        line.split("|")[2].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def run_implementer_process(pipe: Pipeline) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    environment.update(OLLAMA_HOST=pipe.fake.url, PYTHONPROFILEIMPORTTIME="1")
    return subprocess.run(
        [sys.executable, "-m", "hub", "run-implementer"],
        cwd=pipe.repo,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("mode", ["edit", "agent"])
def test_run_implementer_imports_agent_mode_only_when_the_role_is_in_agent_mode(
    pipe: Pipeline, mode: str
) -> None:
    if mode == "agent":
        agent_mode(pipe)
        pipe.fake.script(IMPL, FIX, call("done", summary="greet adds a comma"))
    else:
        pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()

    done = run_implementer_process(pipe)

    assert done.returncode == 0, done.stderr[-3000:]
    assert pipe.contract()["status"] == "pending_local_review"
    modules = imported_modules(done.stderr)
    assert "hub.phases.workbench" in modules  # the profile was read
    assert ("hub.phases.agent" in modules) == (mode == "agent")
    assert ("hub.agent.loop" in modules) == (mode == "agent")


def private_reaches(path: Path) -> list[str]:
    """`x._name` in a module for any `x` but `self`: a reach into another object's privates."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.name}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]


def test_agent_mode_imports_the_workbench_never_edit_mode_and_reaches_no_private() -> None:
    agent = PHASES / "agent.py"
    imports = {
        node.module
        for node in ast.walk(ast.parse(agent.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "hub.phases.workbench" in imports
    assert "hub.phases.implement" not in imports
    assert private_reaches(agent) == []
    assert private_reaches(PHASES / "implement.py") == []
