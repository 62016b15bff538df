"""hub doctor and hub models: checks with fakes passed in, and once end to end through the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.core.config import Config, JudgeConfig, RoleConfig, WorkerServer
from hub.core.errors import MCPServerCrashed
from hub.faces.doctor import (
    Check,
    check_ast_grep,
    check_git,
    check_git_identity,
    check_ollama,
    check_task_commands,
    list_worker_models,
    render_checks,
    render_models,
    run_doctor,
)
from hub.testing import FakeOllama
from hub.workers.base import Health

if TYPE_CHECKING:
    # The fixtures' types (tests/conftest.py); pytest loads conftest, tests never import it.
    from conftest import HubRunner


@dataclass
class FakeWorker:
    """A worker with canned answers; `connect` present makes it look like an MCP worker."""

    models: tuple[str, ...] = ()
    reachable: bool = True
    start_error: Exception | None = None
    closed: bool = False
    asked: list[list[str]] = field(default_factory=list)
    tools: tuple[str, ...] = ("ollama_run", "ollama_list_models", "ollama_chat")

    def connect(self) -> str:
        if self.start_error is not None:
            raise self.start_error
        return "ollama_run"

    def generate(self, request: Any) -> Any:
        raise AssertionError("the doctor never generates")

    def list_models(self) -> list[str]:
        return list(self.models)

    def check_health(self, models: list[str]) -> Health:
        self.asked.append(models)
        if not self.reachable:
            return Health(ok=False, reached=False, detail="cannot reach Ollama at http://127.0.0.1:9")
        missing = tuple(m for m in models if m not in self.models)
        return Health(ok=not missing, models=self.models, missing=missing, detail="")

    def close(self) -> None:
        self.closed = True


def config(
    tmp_path: Path, ollama_host: str = "http://127.0.0.1:9", judge_backend: str | None = None
) -> Config:
    roles = {
        "implementer": RoleConfig(name="implementer", model="coder:7b"),
        "local_reviewer": RoleConfig(name="local_reviewer", model="reviewer:3b"),
        "judge": RoleConfig(name="judge", model="judge:70b"),
    }
    return Config(
        repo_root=tmp_path,
        handoff_dir=tmp_path / "_handoff",
        ollama_host=ollama_host,
        roles=roles,
        workers=(WorkerServer(name="hub", command=("python", "-m", "hub", "worker", "serve")),),
        judge=JudgeConfig(backend=judge_backend),
    )


def factory(worker: FakeWorker) -> Callable[[Config, RoleConfig], FakeWorker]:
    def make(cfg: Config, role: RoleConfig) -> FakeWorker:
        return worker

    return make


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_roles_sharing_a_worker_server_start_it_once_and_ask_for_both_models(tmp_path: Path) -> None:
    worker = FakeWorker(models=("coder:7b", "reviewer:3b"))

    groups = list_worker_models(config(tmp_path), make=factory(worker))

    assert len(groups) == 1 and groups[0].roles == ("implementer", "local_reviewer")
    assert worker.asked == [["coder:7b", "reviewer:3b"]] and worker.closed
    assert groups[0].ok and groups[0].server_started


def test_the_judge_is_checked_only_when_it_has_a_backend(tmp_path: Path) -> None:
    worker = FakeWorker(models=("coder:7b", "reviewer:3b", "judge:70b"))

    groups = list_worker_models(config(tmp_path, judge_backend="ollama"), make=factory(worker))

    assert [g.roles for g in groups] == [("implementer", "local_reviewer"), ("judge",)]
    assert groups[1].backend == "ollama" and groups[1].label == "judge via ollama"


def test_a_missing_model_fails_with_the_pull_command_as_fix_naming_only_the_role_that_uses_it(
    tmp_path: Path,
) -> None:
    worker = FakeWorker(models=("coder:7b",))

    checks = by_name(run_doctor(config(tmp_path), make=factory(worker)))

    assert checks["model coder:7b (implementer)"].ok
    missing = checks["model reviewer:3b (local_reviewer)"]
    assert not missing.ok and missing.hint == "ollama pull reviewer:3b"


def test_a_misspelt_model_is_answered_with_the_model_the_server_has_before_any_pull(tmp_path: Path) -> None:
    worker = FakeWorker(models=("coder:7b", "reviewer:3b-instruct", "qwen2.5-coder:32b"))
    cfg = config(tmp_path)
    cfg = cfg._replace(
        roles={**cfg.roles, "implementer": cfg.roles["implementer"]._replace(model="qwen2.5-codr:32b")}
    )

    checks = by_name(run_doctor(cfg, make=factory(worker)))

    typo = checks["model qwen2.5-codr:32b (implementer)"]
    assert not typo.ok
    assert (
        typo.hint
        == "did you mean qwen2.5-coder:32b, which it has? (set it in hub.yaml); else ollama pull qwen2.5-codr:32b"
    )
    listed = render_models(list_worker_models(cfg, make=factory(worker)))
    assert "missing: qwen2.5-codr:32b (did you mean qwen2.5-coder:32b, which it has?" in listed


def on_backend(cfg: Config, backend: str, *roles: str) -> Config:
    """`cfg` with `roles` (every role when none is named) reaching their models through `backend`."""
    named = roles or tuple(cfg.roles)
    return cfg._replace(
        roles={n: r._replace(backend=backend) if n in named else r for n, r in cfg.roles.items()},
        openai_base_url="http://127.0.0.1:9/v1",
    )


def test_a_configuration_with_no_role_on_ollama_neither_checks_nor_fails_ollama(tmp_path: Path) -> None:
    worker = FakeWorker(models=("coder:7b", "reviewer:3b"))
    vllm_only = on_backend(config(tmp_path, ollama_host="http://127.0.0.1:9"), "openai")

    checks = run_doctor(vllm_only, make=factory(worker))

    assert "ollama" not in by_name(checks)
    assert all(c.ok for c in checks if c.name.startswith(("model", "models"))), render_checks(checks)
    # One role on Ollama brings its check back (and its failure: nothing listens there).
    mixed = on_backend(vllm_only, "ollama", "local_reviewer")
    assert not by_name(run_doctor(mixed, make=factory(worker)))["ollama"].ok


def test_an_openai_compatible_role_is_never_told_to_pull_from_ollama(tmp_path: Path) -> None:
    vllm_only = on_backend(config(tmp_path), "openai")

    missing = by_name(run_doctor(vllm_only, make=factory(FakeWorker(models=("coder:7b",)))))
    unreached = by_name(run_doctor(vllm_only, make=factory(FakeWorker(reachable=False))))
    listed = render_models(list_worker_models(vllm_only, make=factory(FakeWorker(models=("coder:7b",)))))

    assert (
        missing["model reviewer:3b (local_reviewer)"].hint
        == "serve reviewer:3b on the OpenAI-compatible server"
    )
    fix = unreached["models for implementer, local_reviewer via openai"].hint
    assert "openai.base_url" in fix and "http://127.0.0.1:9/v1" in fix
    assert "missing: reviewer:3b (serve reviewer:3b on the OpenAI-compatible server)" in listed
    assert "ollama" not in (fix + listed).lower()


def test_doctor_checks_ast_grep_where_the_scans_find_it(tmp_path: Path) -> None:
    from hub.review.rules import ast_grep_binary

    on_path = str(tmp_path / "elsewhere" / "ast-grep")
    check = check_ast_grep(which=lambda name: on_path)

    assert check.detail.startswith("ast-grep") and ast_grep_binary() != on_path


def test_a_worker_server_that_does_not_start_fails_once_and_skips_the_model_lines(tmp_path: Path) -> None:
    worker = FakeWorker(start_error=MCPServerCrashed("MCP server 'hub' exited with code 1", exit_code=1))

    checks = run_doctor(config(tmp_path), make=factory(worker))

    server = by_name(checks)["worker server 'hub'"]
    assert not server.ok and "exited with code 1" in server.detail and "hub.yaml" in server.hint
    assert not [c for c in checks if c.name.startswith("model")]


def test_a_started_server_that_cannot_reach_ollama_is_told_apart_from_one_that_did_not_start(
    tmp_path: Path,
) -> None:
    checks = by_name(run_doctor(config(tmp_path), make=factory(FakeWorker(reachable=False))))

    assert checks["worker server 'hub'"].ok
    unreached = checks["models for implementer, local_reviewer via MCP worker 'hub'"]
    assert not unreached.ok and "OLLAMA_HOST" in unreached.hint
    assert not checks["ollama"].ok and "ollama serve" in checks["ollama"].hint


def test_no_git_on_path_fails_with_an_install_hint() -> None:
    check = check_git(which=lambda name: None)

    assert not check.ok and "install git" in check.hint


def test_a_git_too_old_to_merge_without_the_checkout_fails_naming_the_version(tmp_path: Path) -> None:
    old_git = tmp_path / "git"
    old_git.write_text("#!/bin/sh\necho 'git version 2.34.1'\n", encoding="utf-8")
    old_git.chmod(0o755)

    check = check_git(which=lambda name: str(old_git))

    assert not check.ok and "2.34.1" in check.detail and "2.38" in check.detail


def test_git_and_ast_grep_report_their_versions() -> None:
    assert check_git().ok and check_git().detail.startswith("git version")
    assert check_ast_grep().ok and "ast-grep" in check_ast_grep().detail


def test_ollama_is_reachable_when_it_answers_its_version() -> None:
    with FakeOllama() as fake:
        check = check_ollama(fake.url)

    assert check.ok and fake.url in check.detail


def test_the_report_prints_a_line_per_check_and_a_fix_under_each_failure() -> None:
    text = render_checks([Check("git", True, "git version 2"), Check("ollama", False, "refused", "start it")])

    assert text.splitlines() == [
        "ok    git: git version 2",
        "FAIL  ollama: refused",
        "      fix: start it",
        "1 of 2 checks failed",
    ]


def test_models_marks_the_configured_ones_and_names_the_missing(tmp_path: Path) -> None:
    worker = FakeWorker(models=("coder:7b", "other:1b"))

    text = render_models(list_worker_models(config(tmp_path), make=factory(worker)))

    assert text.splitlines() == [
        "implementer, local_reviewer via MCP worker 'hub': 2 models",
        "  * coder:7b",
        "    other:1b",
        "  missing: reviewer:3b (ollama pull reviewer:3b)",
    ]


@pytest.fixture
def scripted_ollama() -> Any:
    with FakeOllama() as fake:
        fake.add_model("qwen2.5-coder:7b")
        yield fake


def test_hub_doctor_passes_end_to_end_with_the_default_config(
    hub: HubRunner, scripted_ollama: FakeOllama
) -> None:
    done = hub("doctor", "--json", env={"OLLAMA_HOST": scripted_ollama.url})

    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["ok"] and {c["name"] for c in report["checks"]} >= {
        "git",
        "ast-grep",
        "ollama",
        "worker server 'hub'",
    }
    assert "model qwen2.5-coder:7b (implementer, local_reviewer)" in {c["name"] for c in report["checks"]}


def test_hub_models_lists_what_the_worker_sees(hub: HubRunner, scripted_ollama: FakeOllama) -> None:
    scripted_ollama.add_model("llama3")

    done = hub("models", "--role", "implementer", env={"OLLAMA_HOST": scripted_ollama.url})

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "implementer via MCP worker 'hub': 2 models",
        "  * qwen2.5-coder:7b",
        "    llama3:latest",
    ]


def test_hub_doctor_exits_1_naming_the_fix_when_ollama_is_down(hub: HubRunner) -> None:
    # Direct backends: no worker server to start, the Ollama checks are the point here.
    env = {
        "OLLAMA_HOST": "http://127.0.0.1:9",
        "HUB_IMPLEMENTER_BACKEND": "ollama",
        "HUB_LOCAL_REVIEWER_BACKEND": "ollama",
    }
    done = hub("doctor", env=env)

    assert done.returncode == 1
    assert "FAIL  ollama" in done.stdout and "fix: start Ollama" in done.stdout
    assert "no GPU: the stand-in model `hub-standin`" in done.stdout
    assert "FAIL  models for implementer, local_reviewer via ollama" in done.stdout


def test_hub_doctor_checks_every_server_of_a_pool(
    hub: HubRunner, scripted_ollama: FakeOllama, git_repo: Path
) -> None:
    dead = "http://127.0.0.1:9"
    config = git_repo / "hub.yaml"
    text = config.read_text(encoding="utf-8")
    assert "ollama:\n  host: " in text
    config.write_text(
        text.replace("ollama:\n", f"ollama:\n  hosts: [{scripted_ollama.url}, {dead}]\n", 1), encoding="utf-8"
    )
    done = hub("doctor", "--json", env={"OLLAMA_HOST": scripted_ollama.url})

    checks = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "ollama"]
    assert [c["ok"] for c in checks] == [True, False], done.stdout
    assert dead in checks[1]["detail"]


def test_doctor_says_whether_acceptance_commands_are_sandboxed(tmp_path: Path) -> None:
    from hub.faces.doctor import check_sandbox
    from hub.safety.sandbox import SandboxMode, SandboxSettings

    base = config(tmp_path)
    found = check_sandbox(base)
    assert found.ok and "acceptance commands run in bwrap" in found.detail

    missing = check_sandbox(base, which=lambda _: None)
    assert missing.ok and "auto: UNSANDBOXED" in missing.detail

    required = base._replace(sandbox=SandboxSettings(SandboxMode.REQUIRED))
    failed = check_sandbox(required, which=lambda _: None)
    assert not failed.ok and "apt-get install -y bubblewrap" in (failed.hint or "")


def test_hub_doctor_fails_a_mistyped_hub_variable_and_every_command_warns_of_it(
    hub: HubRunner, scripted_ollama: FakeOllama
) -> None:
    env = {"OLLAMA_HOST": scripted_ollama.url, "HUB_IMPLEMENTOR_MODEL": "qwen2.5-coder:32b"}

    done = hub("doctor", env=env)
    other = hub("next", env=env)

    assert done.returncode == 1
    assert (
        "FAIL  environment: HUB_IMPLEMENTOR_MODEL is set, but agent-hub reads no such variable" in done.stdout
    )
    assert "did you mean HUB_IMPLEMENTER_MODEL?" in done.stdout
    warnings = [json.loads(line) for line in other.stderr.splitlines() if "config.mistyped_env" in line]
    assert [w["variable"] for w in warnings] == ["HUB_IMPLEMENTOR_MODEL"], other.stderr


def test_an_acceptance_command_whose_program_is_not_found_fails_naming_it_and_its_tasks(
    tmp_path: Path,
) -> None:
    commands = {
        "demo-1": ["PYTHONDONTWRITEBYTECODE=1 python -m pytest -q", "make test"],
        "demo-2": ["python -m pytest -q", "cd sub && ./missing.sh", "./run.sh"],
    }
    for task_id, listed in commands.items():
        folder = tmp_path / "_handoff" / "tasks" / task_id
        folder.mkdir(parents=True)
        contract = {"specification": {"acceptance_commands": listed}}
        (folder / "TASK_CONTRACT.json").write_text(json.dumps(contract), encoding="utf-8")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "run.sh").chmod(0o755)

    checks = check_task_commands(
        config(tmp_path), which=lambda name: "/usr/bin/make" if name == "make" else None
    )

    assert [(c.name, c.ok) for c in checks] == [("acceptance command of demo-1, demo-2", False)]
    assert "`python -m pytest -q`" not in checks[0].detail  # the first spelling found names it
    assert "python is not found" in checks[0].detail
    assert "python-is-python3" in checks[0].hint


def test_the_git_identity_check_names_who_the_hubs_commits_are_by(git_repo: Path) -> None:
    check = check_git_identity(git_repo)

    assert check.ok and check.detail.startswith("Hub Test <hub-test@example.invalid>")
