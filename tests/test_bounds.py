"""Issue 11, bounded input: every path from outside stays in the repository, every number in range, and
bad input is a clear error (exit 1, no traceback, nothing changed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import load_config
from hub.core.errors import ConfigError, ContractInvalid, RuleError
from hub.state.handoff import Handoff


def no_traceback(done: Any) -> None:
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--source", "/etc/passwd"),
        ("--source", "../outside.py"),
        ("--target", "~/.ssh/id_rsa"),
        ("--allowed-path", "/etc"),
    ],
)
def test_a_contract_path_outside_the_repository_is_refused_naming_the_field(
    hub: Any, git_repo: Path, flag: str, value: str
) -> None:
    done = hub("new", "--title", "t", "--requirement", "r", flag, value)

    assert done.returncode == 1, done.stderr
    # Refused by the contract's own check ("is not inside the repository") or, for a file that must
    # exist, earlier by `hub new` ("no such file in <repo>"); either way naming the path.
    assert value in done.stderr
    assert "is not inside the repository" in done.stderr or "no such file in" in done.stderr
    no_traceback(done)
    assert not list((git_repo / "_handoff").glob("**/TASK_CONTRACT.json"))


def _contract(hub: Any, git_repo: Path) -> Path:
    done = hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py")
    assert done.returncode == 0, done.stderr
    (path,) = (git_repo / "_handoff" / "tasks").glob("*/TASK_CONTRACT.json")
    return path


@pytest.mark.parametrize("value", [1e300, float("inf")], ids=["1e300", "infinity"])
def test_an_absurd_clock_in_the_contract_is_refused_without_a_traceback(
    hub: Any, git_repo: Path, value: float
) -> None:
    path = _contract(hub, git_repo)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["limits"]["timeout_minutes"]["judge"] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    before = path.read_bytes()

    done = hub("status")

    # The task is shown damaged, naming the field, and `hub status` goes on for the others (issue 35).
    assert done.returncode == 0, done.stderr
    assert "damaged" in done.stdout and "$.limits.timeout_minutes.judge" in done.stdout
    no_traceback(done)
    assert path.read_bytes() == before


def test_a_contract_that_is_not_utf8_is_a_clear_error(hub: Any, git_repo: Path) -> None:
    path = _contract(hub, git_repo)
    path.write_bytes(b'{"title": "\xff\xfe"}')

    done = hub("status")

    assert done.returncode == 0, done.stderr
    assert "damaged" in done.stdout and "not UTF-8 text" in done.stdout
    no_traceback(done)


def test_log_task_id_cannot_climb_out_of_the_runs_folder(hub: Any, tmp_path: Path) -> None:
    with pytest.raises(ContractInvalid, match="is not a task id"):
        Handoff(tmp_path).runs("../../../etc")

    done = hub("log", "--task", "../../../etc")

    assert done.returncode == 1
    no_traceback(done)


@pytest.mark.parametrize("name", ["../../evil.md", "/tmp/evil.md", "sub/halt.md"])
def test_a_halt_file_outside_the_handoff_folder_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "hub.yaml").write_text(f"halt_file: {name}\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="halt_file"):
        load_config(tmp_path, env={})


def test_remove_rule_never_deletes_outside_the_repository(tmp_path: Path) -> None:
    from hub.review import rules

    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    rule = outside / "victim.yml"
    rule.write_text(
        "id: victim\nlanguage: python\nseverity: error\nmessage: m\nrule:\n  pattern: eval($A)\n",
        encoding="utf-8",
    )
    (repo / "sgconfig.yml").write_text(f"ruleDirs:\n  - {outside}\n", encoding="utf-8")

    with pytest.raises(RuleError, match="outside the repository"):
        rules.remove_rule(repo, "victim")

    assert rule.exists()
