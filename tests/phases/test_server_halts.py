"""The halts for a model server that cannot be reached or lacks the model name the backend in use: a
person whose roles are on an OpenAI-compatible server (llama.cpp, vLLM) is never told to `ollama pull`.
And a task halted under the trigger's old name (`ollama_unavailable`, before issue 33) still loads,
shows and resumes."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

from .conftest import IMPL, Pipeline

if TYPE_CHECKING:
    from conftest import HubRunner


def behind_v1(pipe: Pipeline, base_url: str, model: str = IMPL) -> None:
    """Both roles on the OpenAI-compatible API at `base_url`; the implementer asks for `model`."""
    pipe.configure(extra_yaml=f'openai: {{base_url: "{base_url}"}}\n')
    text = (pipe.repo / "hub.yaml").read_text(encoding="utf-8")
    text = text.replace("backend: ollama", "backend: openai").replace(f"model: {IMPL}", f"model: {model}")
    pipe.commit("the roles behind /v1", {"hub.yaml": text})


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_unreachable_openai_compatible_server_halts_with_how_to_start_it_not_ollama(
    pipe: Pipeline,
) -> None:
    behind_v1(pipe, closed_url() + "/v1")
    pipe.start()

    outcome = pipe.implement()

    assert outcome.exit_code == 4
    breaker = pipe.contract()["breaker"]
    assert breaker["trigger"] == "server_unavailable"
    assert breaker["reason"].endswith(
        "; fix: start the OpenAI-compatible server or point openai.base_url in hub.yaml at it"
    )
    halt = pipe.halt_text()
    assert "`server_unavailable`" in halt and "ollama serve" not in halt and "ollama pull" not in halt


def test_a_model_the_openai_compatible_server_lacks_halts_with_how_to_serve_it_not_ollama_pull(
    pipe: Pipeline,
) -> None:
    behind_v1(pipe, pipe.fake.url + "/v1", model="nowhere-7b")
    pipe.start()

    outcome = pipe.implement()

    assert outcome.exit_code == 4
    breaker = pipe.contract()["breaker"]
    assert breaker["trigger"] == "model_not_found"
    assert breaker["reason"].endswith("; fix: serve nowhere-7b on the OpenAI-compatible server")
    assert "ollama pull" not in pipe.halt_text()
    assert pipe.pauses == []  # a missing model is not an outage: no wait


def test_a_task_halted_as_ollama_unavailable_before_the_rename_still_loads_shows_and_resumes(
    pipe: Pipeline, hub: HubRunner
) -> None:
    pipe.start()
    pipe.fake.stop()
    assert pipe.implement().exit_code == 4
    # What a hub from before issue 33 wrote for the same halt.
    path = pipe.ctx.handoff.contract
    contract = json.loads(path.read_text(encoding="utf-8"))
    assert (
        contract["breaker"]["trigger"] == contract["handoff_data"]["halt"]["trigger"] == "server_unavailable"
    )
    contract["breaker"]["trigger"] = contract["handoff_data"]["halt"]["trigger"] = "ollama_unavailable"
    path.write_text(json.dumps(contract, indent=2), encoding="utf-8")

    shown = hub("status")
    as_json = hub("status", "--json")
    resumed = hub("resume", "--to", "pending_implementer")

    assert shown.returncode == 0 and "TRIPPED ollama_unavailable" in shown.stdout, shown.stderr
    (task,) = json.loads(as_json.stdout)["tasks"]
    assert task["breaker"]["trigger"] == "ollama_unavailable" and task["status"] == "erik_consultation"
    assert resumed.returncode == 0, resumed.stderr
    assert pipe.contract()["status"] == "pending_implementer"
