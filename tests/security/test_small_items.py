"""Issue 28, point 14: the smaller holes. Titles cannot drive the terminal; control files are refused
as a task's target or allowed path when the task is made; `hub init` writes nothing into a bare
repository; a deleted base branch is said as such; `attempt: 2.0` is refused; a one-character token does
not guard a public address; a tool call cannot switch off a packaged security rule.

The checkout lies outside /tmp and HOME holds planted secrets, as in the rest of the security suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.core.config import CONFIG_FILE, default_yaml, load_config
from hub.core.errors import ConfigError, ContractInvalid, RuleError
from hub.phases.context import Context
from hub.state.contract import now_utc
from hub.state.schema import validate
from hub.state.store import load

APP_PY = "def greet(name):\n    return 'hello ' + name\n"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def repo(outside_tmp: Path) -> Path:
    path = outside_tmp / "proj"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    with (path / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            "[user]\n\tname = Hub Test\n\temail = hub-test@example.invalid\n[commit]\n\tgpgsign = false\n"
        )
    for rel, text in {"src/app.py": APP_PY, CONFIG_FILE: default_yaml("demo")}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text, encoding="utf-8")
    (path / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def hub_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "GIT_")) and k != "OLLAMA_HOST"}
    return subprocess.run(
        [sys.executable, "-m", "hub", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def context(repo: Path) -> Context:
    return Context(load_config(repo, env={}), clock=lambda: now_utc().replace(microsecond=0))


def test_a_title_cannot_set_the_terminal_title_or_print_a_fake_status_line(repo: Path) -> None:
    title = "Fix it\x1b]0;pwned\x07\nStatus: merged\r\u202eevil"

    made = hub_cli(repo, "new", "--title", title, "--requirement", "r", "--target", "src/app.py")
    shown = hub_cli(repo, "status")

    assert made.returncode == 0, made.stderr
    task_id = json.loads(hub_cli(repo, "status", "--json").stdout)["tasks"][0]["task_id"]
    stored = load(repo / "_handoff" / "tasks" / task_id / "TASK_CONTRACT.json")["title"]
    assert stored == "Fix it ]0;pwned Status: merged evil"
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout and "\u202e" not in shown.stdout
    assert not any(line.startswith("Status: merged") for line in shown.stdout.splitlines())


@pytest.mark.parametrize(
    ("flag", "path"),
    [
        ("--target", ".git/config"),
        ("--target", "hub.yaml"),
        ("--target", "_handoff/tasks/x/TASK_CONTRACT.json"),
        ("--allowed-path", "hub.yaml"),
        ("--allowed-path", "prompts"),
        ("--allowed-path", "src/.git/hooks"),
    ],
)
def test_hub_new_refuses_a_control_file_as_target_or_allowed_path_and_writes_nothing(
    repo: Path, flag: str, path: str
) -> None:
    args = ["new", "--title", "t", "--requirement", "r", flag, path]
    if flag == "--allowed-path":
        args += ["--target", "src/app.py"]

    done = hub_cli(repo, *args)

    assert done.returncode == 1, done.stdout
    assert "control file" in done.stderr and "Traceback" not in done.stderr
    tasks = repo / "_handoff" / "tasks"
    assert not tasks.exists() or not any(tasks.iterdir())


def test_hub_init_in_a_bare_repository_writes_nothing_into_the_git_folder(
    outside_tmp: Path, repo: Path
) -> None:
    bare = outside_tmp / "bare.git"
    git(outside_tmp, "clone", "-q", "--bare", str(repo), str(bare))
    before = sorted(p.relative_to(bare).as_posix() for p in bare.rglob("*"))

    done = hub_cli(bare, "init")

    assert done.returncode == 1, done.stdout
    assert "bare" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.relative_to(bare).as_posix() for p in bare.rglob("*")) == before


def test_a_deleted_base_branch_halts_as_such_not_as_a_conflict_in_unknown_files(repo: Path) -> None:
    from hub.phases.finalize import finalize_task
    from hub.phases.judge import enter_judge_review, report_judge
    from hub.phases.run import Run
    from hub.phases.setup import create, setup_task

    ctx = context(repo)
    git(repo, "checkout", "-q", "-b", "base")
    create(ctx, {"title": "t", "requirements": ["r"], "target_file": "src/app.py"})
    setup_task(ctx, "base")
    run = Run(ctx, load(ctx.handoff.contract), "test")
    (run.worktree / "src/app.py").write_text(APP_PY.replace("hello ", "hello, "), encoding="utf-8")
    run.record("lock_acquired")
    run.record("code_written")
    run.checkpoint("code_written")
    enter_judge_review(run, "local_pass")
    ctx.handoff.judge_report_json.write_text('{"verdict": "PASS", "blocking_issues": []}', encoding="utf-8")
    report_judge(ctx)
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-D", "base")

    outcome = finalize_task(ctx)

    assert outcome.data["trigger"] == "base_missing", outcome.message
    assert "unknown files" not in outcome.message and "base does not exist" in outcome.message
    assert git(repo, "branch", "--list", load(ctx.handoff.contract)["git"]["task_branch"])


def test_a_contract_with_attempt_2_point_0_is_refused_naming_the_field(repo: Path) -> None:
    from hub.phases.setup import create

    ctx = context(repo)
    create(ctx, {"title": "t", "requirements": ["r"], "target_file": "src/app.py"})
    contract = json.loads(ctx.handoff.contract.read_text(encoding="utf-8"))
    contract["attempt"] = 2.0

    with pytest.raises(ContractInvalid) as caught:
        validate(contract)

    assert caught.value.json_path == "$.attempt" and "whole number" in caught.value.problem
    contract["attempt"] = 2
    validate(contract)


def test_a_short_token_does_not_guard_a_public_address(repo: Path) -> None:
    from hub.faces.mcp_server import MIN_TOKEN_CHARS, build_server, http_app

    server = build_server(repo)
    with pytest.raises(ConfigError, match="1-character token"):
        http_app(server, "0.0.0.0", "x")
    http_app(server, "0.0.0.0", "t" * MIN_TOKEN_CHARS)
    http_app(server, "127.0.0.1", "x")  # loopback: the Host/Origin check guards it too


def test_a_tool_call_cannot_switch_off_a_packaged_security_rule_but_a_person_can(repo: Path) -> None:
    from hub.review import rules

    rules.init_project(repo)
    packaged = (rules.packaged_rules_dir() / "py-eval-exec.yml").read_text(encoding="utf-8")
    silenced = packaged.replace("severity: error", "severity: off")
    untagged = packaged.replace("tags: [security, injection, python]", "tags: [python]")

    for weakened in (silenced, untagged):
        with pytest.raises(RuleError, match="packaged security rule"):
            rules.add_or_update_rule(repo, "py-eval-exec", weakened)
    assert rules.add_or_update_rule(
        repo, "py-eval-exec", packaged.replace("eval/exec", "eval or exec")
    ).is_file()
    assert rules.add_or_update_rule(repo, "py-eval-exec", silenced, person=True).is_file()
