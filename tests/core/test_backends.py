"""The backend table: the config check allows exactly its names, and reading it imports no provider."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub.core import backends
from hub.core.config import ConfigError, load_config


def write(repo: Path, text: str) -> None:
    (repo / ".git").mkdir(exist_ok=True)
    path = repo / "hub.yaml"
    path.write_text(text, encoding="utf-8")
    then = time.time() - 10  # older than the cache's settling time, as any hub.yaml a person wrote
    os.utime(path, (then, then))


@pytest.mark.parametrize("name", backends.NAMES)
def test_every_backend_of_the_table_is_a_value_hub_yaml_accepts_for_a_role_and_the_judge(
    tmp_path: Path, name: str
) -> None:
    write(tmp_path, f"roles:\n  implementer: {{backend: {name}}}\njudge: {{backend: {name}}}\n")

    config = load_config(tmp_path, env={})

    assert config.role("implementer").backend == name and config.judge.backend == name


def test_a_backend_not_in_the_table_is_refused_naming_every_one_it_has(tmp_path: Path) -> None:
    write(tmp_path, "roles:\n  implementer: {backend: carrier-pigeon}\n")

    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, env={})

    assert all(name in str(caught.value) for name in backends.NAMES)
    write(tmp_path, "project: p\n")
    with pytest.raises(
        ConfigError, match="HUB_IMPLEMENTER_BACKEND: 'vllm' is not one of mcp, ollama, openai"
    ):
        load_config(tmp_path, env={"HUB_IMPLEMENTER_BACKEND": "vllm"})


def test_an_unknown_name_is_a_config_error_not_a_key_error() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'vllm'"):
        backends.named("vllm")


def test_only_the_backends_on_ollama_tell_a_person_to_ollama_pull() -> None:
    assert backends.named("openai").missing_hint("m") == "serve m on the OpenAI-compatible server"
    assert all(backends.named(name).missing_hint("m") == "ollama pull m" for name in ("mcp", "ollama"))
    assert "ollama" not in backends.named("openai").unreachable_fix.lower()


def test_configuration_reads_the_table_without_importing_any_provider() -> None:
    # The providers load httpx or the MCP client at their top: `hub status` reads hub.yaml and must not.
    code = "import sys, hub.core.config; print(sorted(m for m in sys.modules if m.startswith('hub.workers')))"

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
