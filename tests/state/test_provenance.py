"""Provenance: one JSON record per model call, diff and command, with credentials redacted."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hub.state.handoff import Handoff, set_aside
from hub.state.provenance import REDACTED, read_records, redact, write_record
from hub.testing import FakeOllama

KEY = "sk-live-0123456789abcdefABCDEF"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

Hub = Callable[..., "subprocess.CompletedProcess[str]"]


def test_values_under_credential_keys_are_redacted_at_any_depth() -> None:
    record = {
        "api_key": "abc",
        "headers": {"Authorization": "Basic Zm9vOmJhcg==", "Accept": "json"},
        "env": [{"DB_PASSWORD": "hunter2"}, {"HOME": "/root"}],
        "github_token": None,
    }

    assert redact(record) == {
        "api_key": REDACTED,
        "headers": {"Authorization": REDACTED, "Accept": "json"},
        "env": [{"DB_PASSWORD": REDACTED}, {"HOME": "/root"}],
        "github_token": None,
    }


def test_token_counts_are_numbers_not_credentials() -> None:
    counts = {"prompt_tokens": 120, "completion_tokens": 30, "tokens_in": 1, "max_tokens": 9}

    assert redact(counts) == counts


def test_timing_and_count_fields_survive_but_a_string_under_a_token_key_does_not() -> None:
    record = {
        "first_token_seconds": 2.5,
        "first_token_ms": 2500,
        "load_seconds": 31.0,
        "tokens_estimated": True,
        "token_budget": 500000,
        "api_token": "abc123",
        "auth_token": 12345678,
        "access_token_seconds": "not a number",
    }
    assert redact(record) == {
        **record,
        "api_token": "[REDACTED]",
        "auth_token": "[REDACTED]",
        "access_token_seconds": "[REDACTED]",
    }


def test_credential_shaped_strings_inside_text_are_redacted() -> None:
    prompt = f'CONFIG = {{}}\napi_key = "{KEY}"\nheaders = {{"Authorization": "Bearer abcdefghijklmnop"}}\n'

    cleaned = redact({"prompt": prompt})["prompt"]

    assert KEY not in cleaned and "abcdefghijklmnop" not in cleaned
    assert f'api_key = "{REDACTED}"' in cleaned
    assert "CONFIG = {}" in cleaned


def test_records_are_numbered_in_order_per_task_and_redacted_on_disk(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")

    first = write_record(hand, "t-1", "model-call", {"prompt": f"key {KEY}", "model": "m"}, NOW)
    second = write_record(hand, "t-1", "command", {"command": "pytest", "exit_code": 0}, NOW)
    other = write_record(hand, "t-2", "diff", {"path": "a.py"}, NOW)

    assert [first.name, second.name, other.name] == [
        "001-model-call.json",
        "002-command.json",
        "001-diff.json",
    ]
    on_disk = first.read_text(encoding="utf-8")
    assert KEY not in on_disk
    record = json.loads(on_disk)
    assert isinstance(record.pop("at_ns"), int)
    assert record == {
        "timestamp": "2026-01-02T03:04:05Z",
        "kind": "model-call",
        "task_id": "t-1",
        "prompt": f"key {REDACTED}",
        "model": "m",
    }
    assert [r["file"] for r in read_records(hand, "t-1")] == ["001-model-call.json", "002-command.json"]


def test_reading_records_skips_broken_files_and_lists_set_aside_reports(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    write_record(hand, "t-1", "model-call", {"model": "m"}, NOW)
    hand.runs("t-1").joinpath("002-model-call.json").write_text("{not json", encoding="utf-8")
    hand.judge_report_json.write_text(json.dumps({"verdict": "PASS", "api_key": "x"}), encoding="utf-8")
    set_aside(hand, hand.judge_report_json, "t-1", "judge-report")

    records = read_records(hand, "t-1")

    assert [(r["file"], r["kind"]) for r in records] == [
        ("001-model-call.json", "model-call"),
        ("003-judge-report.json", "judge-report"),
    ]
    assert records[1]["content"] == {"verdict": "PASS", "api_key": REDACTED}
    assert records[1]["timestamp"].endswith("Z")


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


def test_a_run_records_its_model_call_diff_and_command_and_hub_log_lists_them(
    git_repo: Path, hub: Hub, fake: FakeOllama, run_git: Callable[..., str]
) -> None:
    settings = f'API_KEY = "{KEY}"\n'
    (git_repo / "src" / "settings.py").write_text(settings, encoding="utf-8")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "settings")
    model = "qwen2.5-coder:7b"  # the default hub.yaml's model for every role
    fake.script(model, 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name\n```\n')
    env = {"OLLAMA_HOST": fake.url, "HUB_IMPLEMENTER_BACKEND": "ollama"}
    created = hub(
        "new",
        "--title",
        "Greet politely",
        "--requirement",
        "greet() says 'hello, NAME'",
        "--target",
        "src/app.py",
        "--source",
        "src/settings.py",
        "--acceptance-command",
        "echo acceptance-ran",
        "--json",
        env=env,
    )
    task_id = json.loads(created.stdout)["task_id"]
    assert hub("setup-task", env=env).returncode == 0
    assert hub("run-implementer", env=env).returncode == 0

    log = hub("log", "--task", task_id, "--json", env=env)

    assert KEY in fake.chat_requests(model)[0]["messages"][-1]["content"]  # the model did see the file
    runs = git_repo / "_handoff" / "tasks" / task_id / "runs"
    # The acceptance command is tried once on the base before the model is called (issue 36).
    assert sorted(p.name for p in runs.iterdir()) == [
        "001-preflight.json",
        "002-model-call.json",
        "003-diff.json",
        "004-command.json",
    ]
    assert all(KEY not in p.read_text(encoding="utf-8") for p in runs.iterdir())
    call = json.loads((runs / "002-model-call.json").read_text(encoding="utf-8"))
    assert call["model"] == model and call["role"] == "implementer" and call["outcome"] == "ok"
    assert f'API_KEY = "{REDACTED}"' in call["prompt"]
    assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0
    diff = json.loads((runs / "003-diff.json").read_text(encoding="utf-8"))
    assert diff["path"] == "src/app.py" and '+    return "hello, " + name' in diff["diff"]
    command = json.loads((runs / "004-command.json").read_text(encoding="utf-8"))
    assert (command["command"], command["exit_code"], command["stdout"]) == (
        "echo acceptance-ran",
        0,
        "acceptance-ran\n",
    )
    entries = json.loads(log.stdout)
    assert [e["file"] for e in entries if e["kind"] != "transition"] == sorted(p.name for p in runs.iterdir())
    assert [e["event"] for e in entries if e["kind"] == "transition"] == ["lock_acquired", "code_written"]
    contract = json.loads((runs.parent / "TASK_CONTRACT.json").read_text(encoding="utf-8"))
    assert contract["cost"]["implementer"]["tokens_in"] == call["prompt_tokens"]


def test_log_lists_a_model_call_between_the_transitions_around_it_within_one_second(tmp_path: Path) -> None:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.status import log_entries
    from hub.state.handoff import record
    from hub.state.new_task import new_contract
    from hub.state.store import save

    ctx = Context(load_config(tmp_path, handoff_dir=tmp_path / "_handoff", env={}), clock=lambda: NOW)
    hand = ctx.handoff
    hand.ensure()
    contract = new_contract(project="p", title="t", requirements=["r"], now=NOW, roles={})
    save(hand.contract, contract, NOW)
    record(hand, contract, "lock_acquired", NOW)
    write_record(hand, contract["task_id"], "model-call", {"model": "m"}, NOW)
    record(hand, contract, "code_written", NOW)

    kinds = [(e["kind"], e.get("event") or e.get("model")) for e in log_entries(ctx, contract["task_id"])]

    assert kinds == [("transition", "lock_acquired"), ("model-call", "m"), ("transition", "code_written")]


def test_records_past_999_keep_their_own_files_and_their_order(tmp_path: Path) -> None:
    hand = Handoff(tmp_path / "_handoff")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(1005):
        write_record(hand, "t-1", "command", {"i": i}, now)

    records = read_records(hand, "t-1")

    assert [r["i"] for r in records] == list(range(1005))
    assert records[-1]["file"] == "1005-command.json"
