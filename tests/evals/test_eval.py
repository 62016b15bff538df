"""`hub eval` through the real CLI against FakeOllama: the shipped suite, solved, stalled and halted
tasks told apart, the tests checked on the merged base, and bad suites refused with a reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.testing import FakeOllama, Reply

from ..conftest import clean_env

SUITE = Path(__file__).resolve().parents[2] / "evals" / "python"
CODER, REVIEWER = "coder:test", "reviewer:test"

WRONG_TITLE_CASE = "def title_case(sentence):\n    return sentence.title()\n"
# A small reviewer's false alarm on correct code, with nothing it quotes from the change.
CRIES_WOLF = (
    '{"passed": false, "critical": true, "issues": [{"severity": "critical", "file": "running_total.py", '
    '"description": "The function does not check if the input is a list"}]}'
)
PASSES = '{"passed": true, "critical": false, "issues": []}'


def example(name: str) -> tuple[str, str]:
    config = json.loads((SUITE / name / ".meta" / "config.json").read_text(encoding="utf-8"))
    return config["files"]["solution"][0], (SUITE / name / ".meta" / "example.py").read_text(encoding="utf-8")


def prompt_of(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def implementer(body: dict[str, Any]) -> str:
    prompt = prompt_of(body)
    for name in ("vowel-count", "running-total", "title-case"):
        if f"Exercise {name}" in prompt:
            path, code = example(name)
            if name == "title-case":
                code = WRONG_TITLE_CASE  # fails test_small_words_stay_lower_case every time
            return f"exercises/{name}/{path}\n```python\n{code}```\n"
    raise AssertionError("a prompt that names no exercise")


def reviewer(body: dict[str, Any]) -> str:
    return f"```json\n{CRIES_WOLF if 'running_total' in prompt_of(body) else PASSES}\n```"


def config(tmp_path: Path, fake: FakeOllama) -> Path:
    path = tmp_path / "hub.yaml"
    path.write_text(
        f"""\
project: evaltest
ollama: {{host: "{fake.url}"}}
roles:
  implementer: {{model: "{CODER}", backend: ollama, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
  local_reviewer: {{model: "{REVIEWER}", backend: ollama, timeouts: {{first_token: 30, stall: 30, total: 60}}}}
models:
  "{CODER}": {{num_ctx: 8192}}
  "{REVIEWER}": {{num_ctx: 8192}}
""",
        encoding="utf-8",
    )
    return path


def hub_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub", "eval", *args],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def fake() -> Any:
    with FakeOllama({CODER: implementer, REVIEWER: reviewer}) as server:
        yield server


def test_the_shipped_suite_is_solved_stalled_and_reported_per_task(tmp_path: Path, fake: FakeOllama) -> None:
    workdir = tmp_path / "run"
    done = hub_eval(
        tmp_path, str(SUITE), "--config", str(config(tmp_path, fake)), "--workdir", str(workdir), "--json"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert tasks["vowel-count"]["solved"] and tasks["vowel-count"]["tests_pass"]
    # The reviewer's "critical" names no line of the change: the judge weighs it, nobody is halted.
    assert tasks["running-total"]["solved"], tasks["running-total"]
    wrong = tasks["title-case"]
    # Both attempts went to stashes (their tests failed): nothing of the model's is on the branch to test.
    assert not wrong["solved"] and wrong["halted"] and wrong["tests_pass"] is None
    assert wrong["halt_trigger"] == "stall" and wrong["stalls"] == 2
    assert doc["totals"]["solved"] == 2
    assert doc["totals"]["halts_of_passing_work"] == 0
    assert doc["totals"]["merged_with_failing_tests"] == 0
    for task in tasks.values():
        assert task["model_calls"] >= 2 and task["tokens_in"] > 0 and task["tokens_out"] > 0
    # Progress went to stderr as the tasks moved; the same report lies in the workdir.
    assert "vowel-count: pending_implementer -[lock_acquired]-> implementation_in_progress" in done.stderr
    assert json.loads((workdir / "report.json").read_text(encoding="utf-8"))["totals"] == doc["totals"]
    assert "| title-case | halted: stall | - |" in (workdir / "report.md").read_text(encoding="utf-8")
    # The merged base holds the two solutions, and the model never saw a test file.
    repo = workdir / "repo"
    assert (repo / "exercises" / "vowel-count" / "vowel_count.py").read_text(encoding="utf-8") == example(
        "vowel-count"
    )[1]
    prompts = [json.dumps(r.body) for r in fake.requests if r.body and r.path == "/api/chat"]
    assert prompts and not any("class VowelCountTest" in p or "def test_" in p for p in prompts)


def test_a_folder_without_exercises_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    done = hub_eval(tmp_path, str(tmp_path), "--workdir", str(tmp_path / "w"))
    assert done.returncode == 2
    assert f"{tmp_path}: no exercise in it" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "w").exists()


def test_one_exercises_folder_is_refused_with_its_suite_and_only_as_the_fix(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    one = SUITE / "vowel-count"
    done = hub_eval(tmp_path, str(one), "--workdir", str(tmp_path / "w"))
    assert done.returncode == 2
    assert f"{one}: one exercise, not a suite of them" in done.stderr
    assert f"fix: give its suite and name it: `hub eval {SUITE.resolve()} --only vowel-count`" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "w").exists()


def test_an_exercise_naming_a_missing_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "suite" / "broken"
    (broken / ".meta").mkdir(parents=True)
    (broken / ".meta" / "config.json").write_text(
        '{"files": {"solution": ["broken.py"], "test": ["broken_test.py"]}}', encoding="utf-8"
    )
    (broken / "broken.py").write_text("def f():\n    pass\n", encoding="utf-8")
    (tmp_path / "hub.yaml").write_text("project: x\n", encoding="utf-8")
    done = hub_eval(tmp_path, str(tmp_path / "suite"))
    assert done.returncode == 2
    assert (
        "config.json: 'broken_test.py' is not a file inside" in done.stderr and "Traceback" not in done.stderr
    )


def test_letters_and_only_choose_the_exercises(tmp_path: Path) -> None:
    from hub.evals.suite import load_suite

    assert [e.name for e in load_suite(SUITE)] == ["running-total", "title-case", "vowel-count"]
    assert [e.name for e in load_suite(SUITE, ["vowel-count"])] == ["vowel-count"]
    done = hub_eval(tmp_path, str(SUITE), "--letters", "x-z", "--config", "nope.yaml")
    assert done.returncode == 2 and "no exercise starts with a letter in x-z" in done.stderr


def test_the_repository_gets_the_helpers_a_test_imports_but_never_the_example(tmp_path: Path) -> None:
    from hub.evals.runner import exercise_files, make_repo
    from hub.evals.suite import load_exercise

    folder = tmp_path / "suite" / "error-handling"
    (folder / ".meta").mkdir(parents=True)
    (folder / ".docs").mkdir()
    (folder / ".meta" / "config.json").write_text(
        '{"files": {"solution": ["eh.py"], "test": ["eh_test.py"], "example": [".meta/example.py"]}}',
        encoding="utf-8",
    )
    (folder / ".meta" / "example.py").write_text("SOLVED = True\n", encoding="utf-8")
    (folder / ".docs" / "instructions.md").write_text("Handle errors.\n", encoding="utf-8")
    (folder / "eh.py").write_text("def f():\n    pass\n", encoding="utf-8")
    (folder / "eh_test.py").write_text("from test_utils import FileLike\n", encoding="utf-8")
    (folder / "test_utils.py").write_text("class FileLike:\n    pass\n", encoding="utf-8")
    ex = load_exercise(folder)
    assert exercise_files(ex) == ["eh.py", "eh_test.py", "test_utils.py"]
    make_repo(tmp_path / "repo", [ex], "project: x\n")
    copied = tmp_path / "repo" / "exercises" / "error-handling"
    assert sorted(p.name for p in copied.iterdir()) == ["eh.py", "eh_test.py", "test_utils.py"]


def agent(body: dict[str, Any]) -> Reply:
    """An implementer in agent mode that must find its file: list the exercise's folder, write the
    example into the one file that is not a test, say done."""
    messages = body["messages"]
    folder = re.search(r"in the folder (exercises/[\w-]+)", messages[1]["content"])
    assert folder, "the task names the exercise's folder"
    step = sum(1 for m in messages if m["role"] == "assistant")
    if step == 0:
        return Reply(tool_calls=({"name": "list_files", "arguments": {"path": folder[1]}},))
    if step == 1:
        listed = messages[-1]["content"].splitlines()
        [stub] = [p for p in listed if p.endswith(".py") and not p.endswith("_test.py")]
        code = example(stub.split("/")[1])[1]
        return Reply(tool_calls=({"name": "write_file", "arguments": {"path": stub, "content": code}},))
    return Reply(tool_calls=({"name": "done", "arguments": {"summary": "solved"}},))


def test_agent_mode_with_hidden_files_finds_the_file_and_reports_its_turns(tmp_path: Path) -> None:
    with FakeOllama({CODER: agent, REVIEWER: reviewer}) as fake:
        done = hub_eval(
            tmp_path,
            str(SUITE),
            "--only",
            "vowel-count",
            "--config",
            str(config(tmp_path, fake)),
            "--workdir",
            str(tmp_path / "run"),
            "--mode",
            "agent",
            "--hide-files",
            "--json",
        )
        first = next(
            r.body for r in fake.requests if r.body and r.path == "/api/chat" and r.body["model"] == CODER
        )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    [task] = doc["tasks"]
    assert doc["mode"] == "agent" and doc["hidden_files"] is True
    assert task["solved"] and task["agent_turns"] == 3 and doc["totals"]["agent_turns"] == 3
    # The task names no file (the model is not told which to change); the hub's map shows where the code is.
    prompt = first["messages"][1]["content"]
    assert "The task names" not in prompt
    assert "vowel_count.py" not in prompt.split("The repository's map", 1)[0]
    assert "def count_vowels(text)" in prompt.split("The repository's map", 1)[1]
    assert "| vowel-count | solved | pass | 0 |" in (tmp_path / "run" / "report.md").read_text(
        encoding="utf-8"
    )
    assert "implementer mode agent, the tasks naming only the exercise's folder" in (
        tmp_path / "run" / "report.md"
    ).read_text(encoding="utf-8")
