"""`hub eval --history` through the real CLI against FakeOllama: a small package's history built here
(two fix-with-test commits, and commits that make no task), each verified commit a task on its own
base, solved and not solved told apart, files found / needed, the skips with their reasons; and a
repository that is none, a history without a task, an environment that cannot be made refused with
exit 2, nothing written into the user's repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.testing import FakeOllama

from ..conftest import clean_env, git

CODER, REVIEWER = "coder:test", "reviewer:test"

CALC = "def clamp(x, lo, hi):\n    return x\n"
CALC_FIXED = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
TEXT = "def shout(s):\n    return s\n"
TEXT_FIXED = "def shout(s):\n    return s.upper() + '!'\n"
TEXT_WRONG = "def shout(s):\n    return s.upper()\n"  # forgets the '!': test_shout fails every time
TEST_CALC = "from pkg.calc import clamp\n\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n"
TEST_CALC_FIXED = TEST_CALC + "\n\ndef test_low():\n    assert clamp(-5, 0, 10) == 0\n"
TEST_TEXT = "from pkg.text import shout\n\n\ndef test_shout():\n    assert shout('hi') == 'HI!'\n"
PASSES = '{"passed": true, "critical": false, "issues": []}'


def commit(repo: Path, message: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def project(tmp_path: Path) -> Path:
    """Newest first in git: a docs change, shout's fix (the model gets it wrong), a test that passed
    already, clamp's fix (the model gets it right), the start."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Dev")
    git(repo, "config", "user.email", "dev@example.com")
    commit(
        repo,
        "Start",
        {"pkg/__init__.py": "", "pkg/calc.py": CALC, "pkg/text.py": TEXT, "tests/test_calc.py": TEST_CALC},
    )
    commit(
        repo,
        "Clamp keeps values in range\n\nclamp() returned values below lo unchanged.",
        {"pkg/calc.py": CALC_FIXED, "tests/test_calc.py": TEST_CALC_FIXED},
    )
    commit(
        repo, "Tidy calc", {"pkg/calc.py": CALC_FIXED + "\n", "tests/test_calc.py": TEST_CALC_FIXED + "\n"}
    )
    commit(repo, "Shout ends with a bang", {"pkg/text.py": TEXT_FIXED, "tests/test_text.py": TEST_TEXT})
    commit(repo, "Docs", {"README.md": "pkg\n"})
    return repo


def implementer(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    # The tests are the check, never shown up front; the repository map may name their functions (a
    # forbidden file is read-only, not hidden), but no test's body reaches the model.
    assert "assert clamp(" not in prompt and "assert shout(" not in prompt, "a test file reached the model"
    if "## The repository's map" in prompt:  # a task that names no file: the hub asks which it needs
        return "pkg/calc.py\n" if "Clamp keeps values in range" in prompt else "pkg/text.py\n"
    if "Clamp keeps values in range" in prompt:
        return f"pkg/calc.py\n```python\n{CALC_FIXED}```\n"
    if "Shout ends with a bang" in prompt:
        return f"pkg/text.py\n```python\n{TEXT_WRONG}```\n"
    raise AssertionError("a prompt that names no commit")


def config(tmp_path: Path, fake: FakeOllama) -> Path:
    path = tmp_path / "hub.yaml"
    timeouts = "timeouts: {first_token: 30, stall: 30, total: 60}"
    path.write_text(
        f"""\
project: historytest
ollama: {{host: "{fake.url}"}}
roles:
  implementer: {{model: "{CODER}", backend: ollama, {timeouts}}}
  local_reviewer: {{model: "{REVIEWER}", backend: ollama, {timeouts}}}
models:
  "{CODER}": {{num_ctx: 8192}}
  "{REVIEWER}": {{num_ctx: 8192}}
""",
        encoding="utf-8",
    )
    return path


def hub_eval(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub", "eval", *args],
        cwd=cwd,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def state_of(repo: Path) -> tuple[str, str, str]:
    """What the user's repository holds: its refs, its work tree's status, its worktrees."""
    return (
        git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(repo, "status", "--porcelain", "--ignored"),
        git(repo, "worktree", "list", "--porcelain"),
    )


@pytest.fixture
def fake() -> Any:
    with FakeOllama({CODER: implementer, REVIEWER: f"```json\n{PASSES}\n```"}) as server:
        yield server


def test_a_history_is_solved_and_not_solved_per_commit_with_files_and_skips_reported(
    tmp_path: Path, fake: FakeOllama
) -> None:
    repo = project(tmp_path)
    before = state_of(repo)
    workdir = tmp_path / "run"
    done = hub_eval(
        tmp_path,
        "--history",
        str(repo),
        "--config",
        str(config(tmp_path, fake)),
        "--workdir",
        str(workdir),
        "--name-files",
        "--python",
        sys.executable,
        "--json",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    tasks = {t["name"].split("-", 1)[1]: t for t in doc["tasks"]}
    assert sorted(tasks) == ["clamp-keeps-values-in-range", "shout-ends-with-a-bang"]
    right, wrong = tasks["clamp-keeps-values-in-range"], tasks["shout-ends-with-a-bang"]
    assert right["solved"] and right["tests_pass"] and right["status"] == "merged"
    assert (right["files_found"], right["files_needed"]) == (1, 1)
    # Both attempts failed the commit's test and went to stashes: no change of the model's to count.
    assert not wrong["solved"] and wrong["halted"] and wrong["halt_trigger"] == "stall"
    assert wrong["files_needed"] is None
    assert (
        doc["totals"] | {"solved": 1, "halted": 1, "files_found": 1, "files_needed": 1, "skipped": 3}
        == doc["totals"]
    )
    reasons = {s["subject"]: s["reason"] for s in doc["skipped"]}
    assert reasons == {
        "Docs": "no test module added or changed",
        "Tidy calc": "the touched tests did not fail on the parent",
        "Start": "root commit: no parent to start from",
    }
    assert doc["mode"] == "edit" and doc["hidden_files"] is False
    # The merged fix is on the commit's base in the clone; the user's repository is as it was.
    clone = workdir / "repo"
    sha = git(repo, "rev-parse", right["name"].split("-", 1)[0])
    assert git(clone, "show", f"hub-eval/base/{sha}:pkg/calc.py") == CALC_FIXED.strip()
    assert state_of(repo) == before
    report = (workdir / "report.md").read_text(encoding="utf-8")
    assert "files found/needed |" in report and "| 1/1 |" in report
    assert (
        "- " + git(repo, "rev-parse", "--short=10", "HEAD") + " Docs: no test module added or changed"
        in report
    )
    # The model saw the commit's message and the file named; never a test (implementer asserts it).
    prompts = [json.dumps(r.body) for r in fake.requests if r.body and r.body.get("model") == CODER]
    assert any("clamp() returned values below lo unchanged." in p and "pkg/calc.py" in p for p in prompts)


def test_a_folder_that_is_no_git_repository_is_refused_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    (tmp_path / "plain").mkdir()
    done = hub_eval(tmp_path, "--history", str(tmp_path / "plain"), "--workdir", str(tmp_path / "w"))
    assert done.returncode == 2, done.stderr
    assert f"{tmp_path / 'plain'}: not a git repository" in done.stderr and "Traceback" not in done.stderr
    assert list((tmp_path / "plain").iterdir()) == [] and not (tmp_path / "w").exists()


def test_a_workdir_inside_the_repository_or_a_missing_interpreter_is_refused(tmp_path: Path) -> None:
    repo = project(tmp_path)
    (tmp_path / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    before = state_of(repo)
    done = hub_eval(tmp_path, "--history", str(repo), "--workdir", str(repo / "run"))
    assert done.returncode == 2, done.stderr
    assert f"{repo / 'run'}: inside {repo};" in done.stderr and "Traceback" not in done.stderr
    done = hub_eval(
        tmp_path, "--history", str(repo), "--python", "no-such-python", "--workdir", str(tmp_path / "w")
    )
    assert done.returncode == 2 and "--python no-such-python: no such interpreter" in done.stderr
    assert state_of(repo) == before and not (tmp_path / "w").exists()


def test_a_history_without_a_candidate_is_refused_naming_why(tmp_path: Path, fake: FakeOllama) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Dev")
    git(repo, "config", "user.email", "dev@example.com")
    commit(repo, "Start", {"pkg/calc.py": CALC})
    commit(repo, "Docs", {"README.md": "pkg\n"})
    config(tmp_path, fake)  # servers that answer: `hub eval` checks them before it walks the history
    before = state_of(repo)
    done = hub_eval(tmp_path, "--history", str(repo), "--workdir", str(tmp_path / "w"))
    assert done.returncode == 2, done.stderr
    assert f"{repo}: no commit qualifies as a task (2 commits walked;" in done.stderr
    assert "1: no test module added or changed" in done.stderr and "Traceback" not in done.stderr
    assert state_of(repo) == before


def test_an_environment_pip_cannot_install_is_refused_naming_pip(tmp_path: Path, fake: FakeOllama) -> None:
    repo = project(tmp_path)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\nversion = "0"\ndependencies = ["no-such-package-hub-eval"]\n',
        encoding="utf-8",
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Packaging")
    config(tmp_path, fake)
    before = state_of(repo)
    # Offline: pip may look at no index, so the dependency cannot be found.
    done = hub_eval(
        tmp_path, "--history", str(repo), "--workdir", str(tmp_path / "w"), env={"PIP_NO_INDEX": "1"}
    )
    assert done.returncode == 2, done.stderr
    assert "could not install its test environment" in done.stderr and "--python" in done.stderr
    assert "-m pip install" in done.stderr and "Traceback" not in done.stderr
    assert state_of(repo) == before


def test_suite_and_history_are_one_or_the_other(tmp_path: Path) -> None:
    done = hub_eval(tmp_path)
    assert done.returncode == 2 and "give a SUITE folder or --history REPO" in done.stderr


def test_without_name_files_the_task_names_no_file_and_the_hub_finds_it_with_the_map(
    tmp_path: Path, fake: FakeOllama
) -> None:
    repo = project(tmp_path)
    workdir = tmp_path / "run"
    done = hub_eval(
        tmp_path,
        "--history",
        str(repo),
        "--paths",
        "pkg/calc.py",
        "--config",
        str(config(tmp_path, fake)),
        "--workdir",
        str(workdir),
        "--python",
        sys.executable,
        "--json",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    [task] = doc["tasks"]
    assert task["name"].endswith("clamp-keeps-values-in-range") and task["solved"]
    assert (task["files_found"], task["files_needed"]) == (1, 1)
    assert doc["hidden_files"] is True
    assert {s["subject"] for s in doc["skipped"]} == {"Tidy calc", "Start"}
    asked = [r.body for r in fake.requests if r.body and r.path == "/api/chat" and r.body["model"] == CODER]
    # The first call shows the map and asks for the files; the task itself names none.
    first = json.dumps(asked[0]["messages"])
    assert "## The repository's map" in first and "pkg/calc.py" in first
    contract = json.loads(
        next((workdir / "repo" / "_handoff").rglob("TASK_CONTRACT.json")).read_text(encoding="utf-8")
    )
    assert contract["specification"].get("find_files") is True
    assert contract["handoff_data"]["found_files"]["files"] == ["pkg/calc.py"]
