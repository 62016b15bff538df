"""Issue 38, points 6 and 8: under a broad policy (`allowed_paths: ["."]`) the files that configure tools
(by shape: dot-files, dot-folders, a few named tool files) and the acceptance tests (what the acceptance
commands run, their fixtures and conftest) are written only where `allowed_paths` names them; when named,
the review request shows a changed test first, in words. Against a checkout outside /tmp."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hub.core.relpaths import acceptance_file, behaviour_file, refusal
from hub.edits.apply import apply_edits
from hub.edits.edit import FileEdit, SearchReplace
from hub.edits.policy import Policy
from hub.phases.prompt_parts import render_review_request
from hub.repo import gitops
from hub.state.contract import now_utc
from hub.state.new_task import new_contract

CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
COMMANDS = ("python -m pytest -q tests/test_calc.py",)

# Files that make a tool act when the folder is opened, a command runs or CI starts (24, as the issue tried).
TOOL_FILES = [
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".devcontainer/devcontainer.json",
    ".devcontainer/post-create.sh",
    ".gitlab-ci.yml",
    ".github/workflows/ci.yml",
    ".github/actions/setup/action.yml",
    ".circleci/config.yml",
    ".envrc",
    ".lfsconfig",
    ".gitattributes",
    ".gitmodules",
    ".pre-commit-config.yaml",
    ".husky/pre-commit",
    "AGENTS.md",
    "CLAUDE.md",
    "src/CLAUDE.md",
    "GEMINI.md",
    ".cursor/rules/x.mdc",
    ".claude/settings.json",
    ".aider.conf.yml",
    ".idea/workspace.xml",
    "Jenkinsfile",
    "azure-pipelines.yml",
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def checkout(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Hub Test")
    git(path, "config", "user.email", "hub-test@example.invalid")
    git(path, "config", "commit.gpgsign", "false")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text, encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.mark.parametrize("path", TOOL_FILES)
def test_every_tool_file_is_refused_under_a_broad_policy_and_written_when_named(path: str) -> None:
    assert behaviour_file(path) is not None
    assert refusal(path, (".",)) is not None and "names it exactly" in (refusal(path, (".",)) or "")
    assert refusal(path, (".", path)) is None


@pytest.mark.parametrize("path", ["src/app.py", "README.md", "Makefile", "docs/guide.md", "pyproject.toml"])
def test_the_projects_own_files_stay_writable_under_a_broad_policy(path: str) -> None:
    assert refusal(path, (".",)) is None


def test_a_tool_folder_is_named_by_the_folder_that_holds_the_file_not_a_parent() -> None:
    assert refusal(".github/workflows/ci.yml", (".github/workflows",)) is None
    assert refusal(".github/workflows/ci.yml", (".github",)) is not None
    assert refusal(".vscode/tasks.json", (".vscode/*",)) is not None


@pytest.mark.parametrize(
    "path",
    ["tests/test_calc.py", "tests/conftest.py", "conftest.py", "tests/fixtures/data.json", "test_other.py"],
)
def test_the_acceptance_tests_and_their_fixtures_are_refused_unless_named(path: str) -> None:
    reason = refusal(path, (".",), commands=COMMANDS) or ""
    assert "acceptance tests" in reason
    assert refusal(path, (".", path), commands=COMMANDS) is None


def test_a_named_tests_folder_names_the_tests_in_it_and_a_broader_folder_does_not() -> None:
    assert refusal("tests/test_calc.py", ("src", "tests"), commands=COMMANDS) is None
    assert refusal("src/tests/test_x.py", ("src",), commands=COMMANDS) is not None


def test_what_a_command_runs_is_an_acceptance_file_and_so_is_the_makefile_behind_make() -> None:
    assert acceptance_file("check.py", ("python check.py",)) == "check.py"
    assert acceptance_file("Makefile", ("make test",)) is not None
    assert acceptance_file("Makefile", ("python check.py",)) is None
    assert acceptance_file("tests/test_calc.py", ()) is None  # no command: nothing decides by tests


def test_a_search_replace_on_the_failing_test_is_refused_with_the_reason_told(outside_tmp: Path) -> None:
    repo = checkout(
        outside_tmp / "repo",
        {"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": CALC_TEST},
    )
    edit = FileEdit("tests/test_calc.py", blocks=(SearchReplace("add(1, 2) == 3", "add(1, 2) == -1"),))

    result = apply_edits([edit], Policy(repo, (".",), acceptance_commands=COMMANDS))

    assert [r.path for r in result.refused] == ["tests/test_calc.py"]
    assert "acceptance tests" in result.refused[0].reason
    assert (repo / "tests" / "test_calc.py").read_text(encoding="utf-8") == CALC_TEST


def test_a_test_a_command_rewrote_is_put_back_and_never_committed(outside_tmp: Path) -> None:
    repo = checkout(outside_tmp / "repo", {"calc.py": "x = 1\n", "tests/test_calc.py": CALC_TEST})
    (repo / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n", encoding="utf-8")
    (repo / "tests" / "conftest.py").write_text("collect_ignore = ['test_calc.py']\n", encoding="utf-8")
    (repo / "calc.py").write_text("x = 2\n", encoding="utf-8")
    opened = gitops.open_repo(repo)

    restored = gitops.restore_outside(opened, ["."], commands=COMMANDS)
    gitops.checkpoint(opened, "work", ["."], commands=COMMANDS)

    assert restored == ["tests/conftest.py", "tests/test_calc.py"]
    assert (repo / "tests" / "test_calc.py").read_text(encoding="utf-8") == CALC_TEST
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["calc.py"]


def test_the_review_request_shows_a_named_test_change_first_in_words(outside_tmp: Path) -> None:
    contract = new_contract(
        project="demo",
        title="t",
        requirements=["r"],
        target_file="calc.py",
        now=now_utc(),
        roles={"implementer": "m", "local_reviewer": "m", "judge": "m"},
    )
    contract["specification"]["acceptance_commands"] = list(COMMANDS)
    contract["constraints"]["allowed_paths"] = ["calc.py", "tests/test_calc.py"]
    contract["handoff_data"]["changed_files"] = ["calc.py", "tests/test_calc.py"]

    text = render_review_request(
        outside_tmp, contract, "diff", report_path="_handoff/tasks/t1/JUDGE_REPORT.json"
    )

    changed = text.split("## Changed files", 1)[1].strip().splitlines()
    assert changed[0].startswith("- **tests/test_calc.py** (an acceptance test")
    assert "rewrites what decides whether the task passes" in changed[0]
    assert changed[1] == "- calc.py"
