"""`scripts/real_model.sh write-config` (run by `make real-model` once its server answers): a hub.yaml
whose roles use the model it serves, which `hub doctor` passes, without writing the roles by hand.

The provisioning (a 1.1 GB download, a 20-minute build) is not run here: FakeOllama stands in for the
llama-server on the port the script is told."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.testing import FakeOllama

if TYPE_CHECKING:
    from conftest import HubRunner

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "real_model.sh"
NAME = "qwen2.5-coder-1.5b"


def write_config(cache: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_HUB_CACHE": str(cache), "PORT": str(port), "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPT), "write-config", *args], env=env, capture_output=True, text=True, timeout=30
    )


def test_the_written_config_points_the_roles_at_the_started_model_and_hub_doctor_passes(
    git_repo: Path, hub: HubRunner, run_git: Any, tmp_path: Path
) -> None:
    run_git(git_repo, "rm", "-q", "hub.yaml")
    with FakeOllama() as fake:
        fake.add_model(NAME)
        port = int(fake.url.rsplit(":", 1)[1])
        cached = write_config(tmp_path / "cache", port)
        in_repo = write_config(tmp_path / "cache", port, str(git_repo / "hub.yaml"))
        run_git(git_repo, "add", "hub.yaml")
        run_git(git_repo, "commit", "-q", "-m", "the real model's hub.yaml")
        # No Ollama anywhere: only the server the file names can make the models' checks pass.
        doctor = hub("doctor", "--json", env={"OLLAMA_HOST": "http://127.0.0.1:9"})

    assert cached.returncode == 0, cached.stderr
    path = tmp_path / "cache" / "hub.real-model.yaml"
    assert f"wrote {path}" in cached.stdout and f"hub eval --config {path}" in cached.stdout
    keys = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    assert keys == [
        "openai:",
        f"  base_url: http://127.0.0.1:{port}/v1",
        "models:",
        f"  {NAME}: {{num_ctx: 8192}}",
        "roles:",
        f"  implementer: {{backend: openai, model: {NAME}}}",
        f"  local_reviewer: {{backend: openai, model: {NAME}}}",
    ]
    assert (git_repo / "hub.yaml").read_text(encoding="utf-8").splitlines()[2:] == keys
    assert in_repo.returncode == 0, in_repo.stderr
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["ok"], doctor.stdout + doctor.stderr
    names = {c["name"] for c in report["checks"]}
    assert any(NAME in name and "implementer" in name and "local_reviewer" in name for name in names), names


def test_a_hub_yaml_the_script_did_not_write_is_left_as_it_was(tmp_path: Path) -> None:
    mine = tmp_path / "hub.yaml"
    mine.write_text("project: mine\n", encoding="utf-8")

    done = write_config(tmp_path / "cache", 8089, str(mine))

    assert done.returncode == 1
    assert "is not one this script wrote: nothing written" in done.stderr
    assert f"model: {NAME}" in done.stderr and "base_url: http://127.0.0.1:8089/v1" in done.stderr
    assert mine.read_text(encoding="utf-8") == "project: mine\n"


def test_a_second_write_config_rewrites_the_file_the_first_wrote_with_no_server_running(
    tmp_path: Path,
) -> None:
    # Port 9 (discard) has no server: writing the file must not need the model.
    target = tmp_path / "hub.yaml"
    first = write_config(tmp_path / "cache", 9, str(target))
    second = write_config(tmp_path / "cache", 8090, str(target))

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert f"wrote {target}" in second.stdout
    text = target.read_text(encoding="utf-8")
    assert "base_url: http://127.0.0.1:8090/v1" in text and ":9/" not in text
