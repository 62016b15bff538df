"""WorkerClient over our own worker server (a real stdio subprocess), the result unwrapping, and the factory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import Config, RoleConfig, Timeouts, WorkerServer
from hub.core.errors import (
    ConfigError,
    ContextOverflow,
    MalformedStream,
    MCPServerCrashed,
    ModelNotFound,
    WorkerError,
    WorkerTimeout,
)
from hub.testing import FakeOllama, Reply
from hub.workers.base import ChatRequest
from hub.workers.bridge import (
    HUB_DIALECT,
    WorkerClient,
    make_worker,
    pick_dialect,
    request_for,
    unwrap_run_result,
)
from hub.workers.ollama import OllamaProvider
from hub.workers.openai import OpenAIProvider


@pytest.fixture(scope="module")
def worker(
    fake: FakeOllama, hub_serve: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerClient]:
    server = WorkerServer(name="hub", command=hub_serve)
    with WorkerClient(server, fake.url, log_dir=tmp_path_factory.mktemp("logs")) as client:
        yield client


def test_generation_through_our_server_unwraps_stdout_and_strips_thinking(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script(
        "coder", Reply("print('hi')", thinking="the user wants hi", prompt_eval_count=30, eval_count=5)
    )

    generation = worker.generate(ChatRequest(model="coder", prompt="say hi", num_ctx=4096))

    assert worker.dialect == HUB_DIALECT
    assert generation.text == "print('hi')"
    assert generation.thinking == "the user wants hi"
    assert (generation.prompt_tokens, generation.completion_tokens) == (30, 5)
    assert generation.done_reason == "stop" and generation.model == "coder"
    assert fake.chat_requests("coder")[-1]["options"]["num_ctx"] == 4096


def test_the_servers_first_token_clock_arrives_as_a_worker_timeout(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("sleepy", Reply("late", first_token_delay=5))

    with pytest.raises(WorkerTimeout) as caught:
        worker.generate(ChatRequest(model="sleepy", prompt="hi", first_token_timeout=0.2))

    assert (caught.value.clock, caught.value.seconds) == ("first_token", 0.2)


def test_a_stall_mid_stream_arrives_as_a_stall_timeout_with_the_partial_text(
    worker: WorkerClient, fake: FakeOllama
) -> None:
    fake.script("staller", Reply("abcdefghijkl", stall_after_chars=4, stall_seconds=5, chunk_chars=2))

    with pytest.raises(WorkerTimeout) as caught:
        worker.generate(ChatRequest(model="staller", prompt="hi", stall_timeout=0.3))

    assert caught.value.clock == "stall"
    assert caught.value.partial_text == "abcd"


def test_a_missing_model_is_model_not_found(worker: WorkerClient) -> None:
    with pytest.raises(ModelNotFound) as caught:
        worker.generate(ChatRequest(model="absent", prompt="hi"))

    assert caught.value.model == "absent"


def test_a_prompt_larger_than_num_ctx_is_refused(worker: WorkerClient, fake: FakeOllama) -> None:
    before = len(fake.chat_requests("coder"))

    with pytest.raises(ContextOverflow) as caught:
        worker.generate(ChatRequest(model="coder", prompt="x" * 20_000, num_ctx=1024))

    assert caught.value.num_ctx == 1024
    assert len(fake.chat_requests("coder")) == before


def test_health_lists_models_and_names_the_missing_ones(worker: WorkerClient, fake: FakeOllama) -> None:
    fake.add_model("qwen2.5-coder:7b")

    health = worker.check_health(["qwen2.5-coder:7b", "llama3"])

    assert "qwen2.5-coder:7b" in health.models
    assert health.missing == ("llama3",)
    assert not health.ok and "llama3" in health.detail


def test_after_a_crash_the_next_call_starts_a_fresh_server(worker: WorkerClient, fake: FakeOllama) -> None:
    worker.connect()
    assert worker._client is not None
    pid = worker._client.pid
    assert pid is not None

    def kill_server(body: dict[str, Any]) -> Reply:
        os.kill(pid, signal.SIGKILL)
        return Reply("never", first_token_delay=30)

    fake.respond_with("phoenix", kill_server)
    with pytest.raises(MCPServerCrashed):
        worker.generate(ChatRequest(model="phoenix", prompt="hi"))
    fake.script("phoenix", "risen")

    assert worker.generate(ChatRequest(model="phoenix", prompt="hi")).text == "risen"
    assert worker._client is not None and worker._client.pid != pid


# -- the ollama_run result, as the original ollama-mcp and this server write it ----------------------------

REQUEST = ChatRequest(model="m", prompt="hi", total_timeout=120)


def original(**fields: Any) -> str:
    result = {"stdout": "", "stderr": "", "exitCode": 0, "metadata": {"model_used": "m", "timed_out": False}}
    return json.dumps({**result, **fields})


def test_the_reply_is_stdout_not_the_json_around_it() -> None:
    reply = unwrap_run_result(original(stdout="def f(): pass\n"), "s", REQUEST)

    assert reply.text == "def f(): pass\n"


def test_the_originals_timeout_shape_becomes_a_total_worker_timeout_with_partial_output() -> None:
    text = original(
        stdout="half",
        stderr="\nProcess timed out",
        exitCode=-1,
        error="Timeout exceeded",
        metadata={"timed_out": True},
    )

    with pytest.raises(WorkerTimeout) as caught:
        unwrap_run_result(text, "s", REQUEST)

    assert (caught.value.clock, caught.value.seconds, caught.value.partial_text) == ("total", 120, "half")


def test_the_originals_missing_model_stderr_becomes_model_not_found() -> None:
    text = original(stderr="Error: pull model manifest: file does not exist\nmodel 'm' not found", exitCode=1)

    with pytest.raises(ModelNotFound):
        unwrap_run_result(text, "s", REQUEST)


def test_an_unexplained_nonzero_exit_is_a_worker_error_quoting_stderr() -> None:
    with pytest.raises(WorkerError, match="GPU on fire"):
        unwrap_run_result(original(stderr="GPU on fire", exitCode=2), "s", REQUEST)


@pytest.mark.parametrize("text", ["plain words", "[1, 2]", json.dumps({"result": "no stdout"})])
def test_a_result_that_is_not_the_run_shape_is_malformed(text: str) -> None:
    with pytest.raises(MalformedStream):
        unwrap_run_result(text, "s", REQUEST)


def test_an_unknown_tool_set_is_an_error_naming_the_tools_found() -> None:
    with pytest.raises(WorkerError, match="found: echo, get-sum"):
        pick_dialect("odd", ("get-sum", "echo"))


def test_ollama_run_is_preferred_when_a_server_offers_both_dialects() -> None:
    assert pick_dialect("hub", ("ollama_chat", "ollama_run")) == HUB_DIALECT


# -- choosing a worker per role ----------------------------------------------------------------------------


def config_with(tmp_path: Path, **backends: str) -> Config:
    roles = {
        name: RoleConfig(
            name=name,
            model="qwen2.5-coder:7b",
            backend=backend,
            temperature=0.4,
            num_predict=256,
            timeouts=Timeouts(first_token=11, stall=7, total=99),
        )
        for name, backend in backends.items()
    }
    return Config(
        repo_root=tmp_path,
        handoff_dir=tmp_path / "_handoff",
        ollama_host="http://127.0.0.1:9",
        roles=roles,
        num_ctx={"qwen2.5-coder:7b": 16384},
        workers=(WorkerServer(name="hub", command=("python", "-m", "hub", "worker", "serve")),),
    )


def test_each_backend_gets_its_worker(tmp_path: Path) -> None:
    config = config_with(tmp_path, implementer="mcp", local_reviewer="ollama", judge="openai")

    workers = [make_worker(config, role) for role in ("implementer", "local_reviewer", "judge")]
    try:
        assert [type(w) for w in workers] == [WorkerClient, OllamaProvider, OpenAIProvider]
        mcp = workers[0]
        assert isinstance(mcp, WorkerClient) and mcp.server.name == "hub" and mcp._client is None
    finally:
        for w in workers:
            w.close()


def test_every_backend_of_the_table_has_a_provider_that_builds_a_worker_for_a_role(tmp_path: Path) -> None:
    from hub.core.backends import NAMES

    config = config_with(tmp_path, **{f"role_{name}": name for name in NAMES})

    for name in NAMES:
        worker = make_worker(config, f"role_{name}")
        try:
            assert all(
                callable(getattr(worker, m, None)) for m in ("generate", "list_models", "check_health")
            )
        finally:
            worker.close()


def test_only_the_provider_of_the_backend_in_use_is_imported(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from hub.core.config import Config, RoleConfig\n"
        "from hub.workers.bridge import make_worker\n"
        "role = RoleConfig(name='implementer', model='m', backend='openai')\n"
        "make_worker(Config(repo_root=Path('.'), handoff_dir=Path('_handoff')), role).close()\n"
        "print(sorted(m for m in ('hub.workers.ollama', 'hub.workers.openai') if m in sys.modules))\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['hub.workers.openai']"


def test_an_mcp_role_naming_an_unknown_worker_server_is_a_config_error(tmp_path: Path) -> None:
    config = config_with(tmp_path, implementer="mcp")
    config = config._replace(roles={"implementer": RoleConfig(name="implementer", model="m", worker="x")})

    with pytest.raises(ConfigError, match="no worker server named 'x'"):
        make_worker(config, "implementer")


def test_a_roles_request_carries_its_model_num_ctx_temperature_and_clocks(tmp_path: Path) -> None:
    request = request_for(config_with(tmp_path, implementer="mcp"), "implementer", "do it", system="sys")

    assert request == ChatRequest(
        model="qwen2.5-coder:7b",
        prompt="do it",
        system="sys",
        temperature=0.4,
        num_ctx=16384,
        num_predict=256,
        first_token_timeout=11,
        stall_timeout=7,
        total_timeout=99,
        max_chars=400_000,  # limits.max_reply_chars: the stream is cut there
    )


def test_a_broken_answer_reported_by_the_worker_server_stays_a_broken_answer_not_an_outage() -> None:
    from hub.core.errors import ServerFailed
    from hub.workers.base import ChatRequest
    from hub.workers.bridge import run_error

    error = run_error(
        {"stderr": "Ollama reported an error mid-stream: out of memory", "stdout": "half"},
        {"error_type": "ServerFailed"},
        ChatRequest(model="m", prompt="p"),
    )
    assert isinstance(error, ServerFailed) and error.partial_text == "half"
