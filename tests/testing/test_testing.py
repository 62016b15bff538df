"""FakeOllama speaks Ollama's API over a real socket, and injects the faults it promises."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hub.testing import FakeOllama, Reply, load_script

ROOT = Path(__file__).resolve().parents[2]


def chat(model: str = "m", stream: bool | None = None, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "say hello please"}]}
    if stream is not None:
        body["stream"] = stream
    body.update(extra)
    return body


def ndjson(client: httpx.Client, path: str, body: dict[str, object]) -> list[dict[str, object]]:
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        return [json.loads(line) for line in response.iter_lines() if line]


def test_root_and_version_answer_like_ollama(fake: FakeOllama, client: httpx.Client) -> None:
    assert fake.url == f"http://127.0.0.1:{fake.port}"
    assert client.get("/").text == "Ollama is running"
    assert client.head("/").status_code == 200
    assert "version" in client.get("/api/version").json()


def test_tags_list_scripted_and_added_models_with_details(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("qwen2.5-coder:7b", "hi")
    fake.add_model("tiny")
    models = client.get("/api/tags").json()["models"]
    assert [m["name"] for m in models] == ["qwen2.5-coder:7b", "tiny:latest"]
    entry = models[0]
    assert entry["model"] == entry["name"]
    assert {"modified_at", "size", "digest", "details"} <= set(entry)
    assert entry["details"]["format"] == "gguf"


def test_chat_streams_ndjson_chunks_and_a_final_chunk_with_metrics(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script("m", Reply(text="hello there, world", chunk_chars=5))
    lines = ndjson(client, "/api/chat", chat())
    pieces = [line["message"]["content"] for line in lines[:-1]]  # type: ignore[index]
    assert pieces == ["hello", " ther", "e, wo", "rld"]
    assert all(line["done"] is False for line in lines[:-1])
    final = lines[-1]
    assert final["done"] is True
    assert final["done_reason"] == "stop"
    for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(final[key], int) and final[key] > 0
    # Qwen2.5's tokenizer: 3 tokens, and the chat template around the one message.
    assert final["prompt_eval_count"] == 3 + 20 + 5
    assert final["eval_count"] == len("hello there, world") // 4 + 1


def test_chat_without_stream_answers_one_json_object(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="whole answer", done_reason="length", prompt_eval_count=7, eval_count=3))
    response = client.post("/api/chat", json=chat(stream=False))
    body = response.json()
    assert response.headers["content-type"].startswith("application/json")
    assert body["message"] == {"role": "assistant", "content": "whole answer"}
    assert (body["done"], body["done_reason"], body["prompt_eval_count"], body["eval_count"]) == (
        True,
        "length",
        7,
        3,
    )


def test_thinking_is_a_think_prefix_unless_asked_apart(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="answer", thinking="hmm"), Reply(text="answer", thinking="hmm"))
    inline = client.post("/api/chat", json=chat(stream=False)).json()["message"]
    assert inline == {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer"}
    apart = client.post("/api/chat", json=chat(stream=False, think=True)).json()["message"]
    assert apart == {"role": "assistant", "content": "answer", "thinking": "hmm"}


def test_generate_streams_response_fields(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", "abcdefghij", "whole")
    lines = ndjson(client, "/api/generate", {"model": "m", "prompt": "go"})
    assert "".join(str(line["response"]) for line in lines) == "abcdefghij"
    assert lines[-1]["done"] is True and "context" in lines[-1]
    whole = client.post("/api/generate", json={"model": "m", "prompt": "go", "stream": False}).json()
    assert whole["response"] == "whole" and whole["done"] is True


def test_unknown_model_is_404_with_ollamas_message(client: httpx.Client) -> None:
    for path in ("/api/chat", "/api/generate"):
        response = client.post(path, json={"model": "nope", "prompt": "x", "messages": []})
        assert response.status_code == 404
        assert response.json() == {"error": "model 'nope' not found, try pulling it first"}
    show = client.post("/api/show", json={"model": "nope"})
    assert (show.status_code, show.json()) == (404, {"error": "model 'nope' not found"})


def test_a_model_with_nothing_left_to_say_fails_loudly(fake: FakeOllama, client: httpx.Client) -> None:
    fake.add_model("m")
    response = client.post("/api/chat", json=chat())
    assert response.status_code == 500
    assert response.json() == {"error": "FakeOllama: no scripted reply left for model 'm'"}


def test_a_scripted_status_is_sent_as_an_ollama_error(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(status=500), Reply(status=503, error="server busy"))
    first = client.post("/api/chat", json=chat())
    assert first.status_code == 500 and "llama runner" in first.json()["error"]
    second = client.post("/api/chat", json=chat())
    assert (second.status_code, second.json()) == (503, {"error": "server busy"})


def test_an_error_mid_stream_replaces_the_final_chunk(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="partial", error="out of memory"))
    lines = ndjson(client, "/api/chat", chat())
    assert lines[-1] == {"error": "out of memory"}
    assert not any(line.get("done") for line in lines)


def test_a_truncated_line_is_not_json(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="abcdefghijklmnop", truncate_line=True))
    with client.stream("POST", "/api/chat", json=chat()) as response:
        lines = [line for line in response.iter_lines() if line]
    broken = []
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            broken.append(line)
    assert len(broken) == 1 and lines.index(broken[0]) == 1
    assert json.loads(lines[-1])["done"] is True


def test_a_dropped_connection_cuts_the_body_after_the_given_characters(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.script("m", Reply(text="0123456789abcdef", chunk_chars=4, drop_after_chars=6))
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/api/chat", json=chat()) as response,
    ):
        for line in response.iter_lines():
            received.append(json.loads(line)["message"]["content"])
    assert received == ["0123", "45"]


def test_replies_come_from_the_queue_then_the_function(fake: FakeOllama, client: httpx.Client) -> None:
    seen: list[dict[str, object]] = []

    def echo(body: dict[str, object]) -> str:
        seen.append(body)
        return f"echo {body['model']}"

    fake.respond_with("m", echo)
    fake.script("m", "queued first")
    answers = [
        client.post("/api/chat", json=chat(stream=False)).json()["message"]["content"] for _ in range(2)
    ]
    assert answers == ["queued first", "echo m"]
    assert seen == [chat(stream=False)]


def test_a_responder_that_raises_is_a_loud_500(fake: FakeOllama, client: httpx.Client) -> None:
    def broken(body: dict[str, object]) -> str:
        raise KeyError("prompt")

    fake.respond_with("m", broken)
    response = client.post("/api/chat", json=chat())
    assert response.status_code == 500
    assert "responder for model 'm' raised KeyError('prompt')" in response.json()["error"]


def test_early_headers_arrive_before_the_first_token(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="late", first_token_delay=30, early_headers=True))
    started = time.monotonic()
    with client.stream("POST", "/api/chat", json=chat()) as response:
        assert response.status_code == 200
        assert time.monotonic() - started < 2


def test_models_given_to_the_constructor_are_scripted() -> None:
    models = {"a": ["one", Reply(text="two")], "b": "single", "c": lambda body: "computed"}
    with FakeOllama(models) as fake, httpx.Client(base_url=fake.url, timeout=5) as c:
        texts = [
            c.post("/api/chat", json=chat(m, stream=False)).json()["message"]["content"]
            for m in ("a", "a", "b", "c", "c")
        ]
    assert texts == ["one", "two", "single", "computed", "computed"]


def test_model_names_match_with_or_without_latest(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("tiny", "a")
    fake.script("tiny:latest", "b")
    texts = [
        client.post("/api/chat", json=chat(name, stream=False)).json()["message"]["content"]
        for name in ("tiny:latest", "tiny")
    ]
    assert texts == ["a", "b"]


def test_requests_are_recorded_with_bodies_and_headers(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("a", "1")
    fake.script("b", "2")
    client.get("/api/tags")
    client.post("/api/chat", json=chat("a", stream=False), headers={"X-Test": "yes"})
    client.post("/api/generate", json={"model": "b", "prompt": "p", "stream": False})
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", "/api/tags"),
        ("POST", "/api/chat"),
        ("POST", "/api/generate"),
    ]
    assert fake.requests[0].body is None
    assert fake.requests[1].headers["x-test"] == "yes"
    assert [b["model"] for b in fake.chat_requests()] == ["a", "b"]
    assert fake.chat_requests("a:latest") == [chat("a", stream=False)]


def test_ps_shows_called_models_with_their_context_length(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", "x")
    fake.add_model("idle")
    assert client.get("/api/ps").json() == {"models": []}
    client.post("/api/chat", json=chat(stream=False, options={"num_ctx": 16384}))
    running = client.get("/api/ps").json()["models"]
    assert [(m["name"], m["context_length"]) for m in running] == [("m:latest", 16384)]
    assert "expires_at" in running[0]


def test_ps_honours_keep_alive_as_ollama_does(fake: FakeOllama, client: httpx.Client) -> None:
    from datetime import datetime, timedelta

    fake.script("m", "x", "y", "z")
    client.post("/api/chat", json=chat(stream=False, keep_alive="10m"))
    [entry] = client.get("/api/ps").json()["models"]
    expires = datetime.fromisoformat(entry["expires_at"].replace("Z", "+00:00"))
    assert timedelta(minutes=9) < expires - datetime.now(expires.tzinfo) <= timedelta(minutes=10)
    client.post("/api/chat", json=chat(stream=False, keep_alive=-1))  # for good
    [entry] = client.get("/api/ps").json()["models"]
    assert datetime.fromisoformat(entry["expires_at"].replace("Z", "+00:00")).year > 2050
    client.post("/api/chat", json=chat(stream=False, keep_alive=0.000001))  # gone by the next request
    assert client.get("/api/ps").json() == {"models": []}


def test_slots_show_the_generations_in_progress_as_llama_server_does() -> None:
    import threading

    with FakeOllama({"m": [Reply(text="done", first_token_delay=1.0)]}, llama_cpp=True) as llama:
        c = httpx.Client(base_url=llama.url)
        assert c.get("/slots").json() == [{"id": 0, "is_processing": False}]
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        worker = threading.Thread(target=lambda: httpx.post(f"{llama.url}/v1/chat/completions", json=body))
        worker.start()
        assert llama.wait_generating(1)
        assert c.get("/slots").json() == [{"id": 0, "is_processing": True}]
        worker.join()
        assert llama.wait_generating(0)  # a moment after its last bytes reach the client
        assert c.get("/slots").json() == [{"id": 0, "is_processing": False}]
        c.close()


def test_ollama_has_none_of_llama_servers_own_routes(fake: FakeOllama, client: httpx.Client) -> None:
    assert client.get("/slots").status_code == 404
    assert client.post("/tokenize", json={"content": "hi"}).status_code == 404


def test_show_describes_a_known_model(fake: FakeOllama, client: httpx.Client) -> None:
    fake.add_model("m")
    shown = client.post("/api/show", json={"model": "m"}).json()
    assert {"modelfile", "parameters", "template", "details", "model_info", "capabilities"} <= set(shown)


def test_openai_chat_streams_sse_ending_with_done_and_usage(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", Reply(text="hello world", chunk_chars=6, prompt_eval_count=12, eval_count=4))
    body = chat(stream=True, stream_options={"include_usage": True})
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"] == "text/event-stream"
        events = [line for line in response.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks if c["choices"])
    assert text == "hello world"
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1]["usage"] == {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}


def test_openai_chat_without_stream_answers_one_completion(fake: FakeOllama, client: httpx.Client) -> None:
    fake.script("m", "plain")
    body = client.post("/v1/chat/completions", json=chat()).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "plain"
    assert body["usage"]["completion_tokens"] >= 1
    missing = client.post("/v1/chat/completions", json=chat("nope"))
    assert missing.status_code == 404 and missing.json()["error"] == {
        "message": "model 'nope' not found, try pulling it first",
        "type": "not_found_error",
        "param": None,
        "code": None,
    }


def test_openai_models_lists_every_model(fake: FakeOllama, client: httpx.Client) -> None:
    fake.add_model("a:7b")
    data = client.get("/v1/models").json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == ["a:7b"]


def test_a_stall_does_not_block_other_requests_and_stop_ends_it_at_once(fake: FakeOllama) -> None:
    fake.script("m", Reply(text="abcdefgh" * 4, stall_after_chars=8, stall_seconds=30))
    with (
        httpx.Client(base_url=fake.url, timeout=5) as streaming,
        httpx.Client(base_url=fake.url, timeout=5) as other,
        pytest.raises(httpx.TransportError),
        streaming.stream("POST", "/api/chat", json=chat()) as response,
    ):
        lines = response.iter_lines()
        assert json.loads(next(lines))["message"]["content"] == "abcdefgh"
        started = time.monotonic()
        assert other.get("/api/tags").status_code == 200
        assert time.monotonic() - started < 1
        fake.stop()
        assert time.monotonic() - started < 2
        list(lines)


def test_a_stall_ends_early_when_the_client_hangs_up(fake: FakeOllama) -> None:
    fake.script("m", Reply(text="abcdefgh" * 4, stall_after_chars=8, stall_seconds=30))
    with (
        httpx.Client(base_url=fake.url, timeout=5) as client,
        client.stream("POST", "/api/chat", json=chat()) as response,
    ):
        next(response.iter_lines())
    assert fake._server is not None
    handlers = [thread for thread, _ in fake._server.connections()]
    for thread in handlers:
        thread.join(timeout=2)
    assert not any(thread.is_alive() for thread in handlers)


def test_script_file_accepts_texts_replies_and_repeats() -> None:
    script = load_script(
        "models:\n  a: [hello, {text: slow, first_token_delay: 0.5}]\n  b: {repeat: again}\n  c: []\n"
    )
    assert script["a"] == [Reply(text="hello"), Reply(text="slow", first_token_delay=0.5)]
    assert script["b"] == Reply(text="again")
    with pytest.raises(ValueError, match="unknown reply field"):
        load_script('{"models": {"a": [{"txt": "typo"}]}}')


def test_the_stand_in_answers_a_broken_script_and_a_busy_port_in_one_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    script = tmp_path / "standin.yaml"
    script.write_text("models:\n  m: [one\n  r: two\n", encoding="utf-8")
    standin = [sys.executable, "-m", "hub.testing"]

    broken = subprocess.run([*standin, "--script", str(script)], capture_output=True, text=True, timeout=30)

    assert broken.returncode == 2
    assert broken.stderr.startswith(f"hub-standin: {script}: script: not valid YAML or JSON at line ")
    assert "Traceback" not in broken.stderr and len(broken.stderr.splitlines()) == 1
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        busy = subprocess.run([*standin, "--port", str(port)], capture_output=True, text=True, timeout=30)
    assert busy.returncode == 1
    assert busy.stderr.startswith(f"hub-standin: cannot listen on 127.0.0.1:{port}: Address already in use")
    assert "--port (0 takes a free one)" in busy.stderr and "Traceback" not in busy.stderr


def test_module_runs_standalone_prints_its_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(
        json.dumps({"models": {"m": ["from the script"], "r": {"repeat": "again"}}}), encoding="utf-8"
    )
    command = [sys.executable, "-m", "hub.testing", "--port", "0", "--script", str(script)]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 15)
            assert ready, "no URL printed within 15 s"
            line = proc.stdout.readline().strip()
            assert line.startswith("FakeOllama listening on http://127.0.0.1:")
            url = line.rsplit(" ", 1)[1]
            with httpx.Client(base_url=url, timeout=5) as client:
                answer = client.post("/api/chat", json=chat(stream=False)).json()
                assert answer["message"]["content"] == "from the script"
                for _ in range(2):
                    again = client.post("/api/chat", json=chat("r", stream=False)).json()
                    assert again["message"]["content"] == "again"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_with_the_prompt_cache_a_prompt_counts_only_what_follows_the_start_an_earlier_one_shared() -> None:
    files = "def f(x):\n    return x + 1\n" * 60
    prompts = [
        files + "attempt 1",
        "an unrelated prompt",
        files + "attempt 2 failed: fix it",
        files + "attempt 1",
    ]

    def counts(fake: FakeOllama) -> list[int]:
        fake.script("m", *["ok"] * len(prompts))
        out = []
        with httpx.Client(base_url=fake.url) as client:
            for prompt in prompts:
                body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "stream": False}
                out.append(int(client.post("/api/chat", json=body).json()["prompt_eval_count"]))
        return out

    with FakeOllama(prompt_cache=True) as cached, FakeOllama() as plain:
        seen, whole = counts(cached), counts(plain)

    # Ollama's prompt_eval_count: the files, evaluated once, are left out of the later prompts' counts,
    # whichever prompt came between; without the cache every prompt counts whole.
    assert whole[0] > 300 and whole[2] > 300
    assert seen[0] == whole[0] and seen[1] == whole[1]
    assert seen[2] < whole[2] - 300 and seen[3] < whole[3] - 300


def test_the_stand_in_with_prompt_cache_counts_a_repeated_prompt_start_as_cached(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps({"models": {"m": {"repeat": "ok"}}}), encoding="utf-8")
    command = [sys.executable, "-m", "hub.testing", "--port", "0", "--prompt-cache", "--script", str(script)]
    prompt = "def f(x):\n    return x + 1\n" * 60
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 15)
            assert ready, "no URL printed within 15 s"
            url = proc.stdout.readline().strip().rsplit(" ", 1)[1]
            with httpx.Client(base_url=url, timeout=5) as client:
                counts = [
                    client.post(
                        "/api/chat", json=chat(stream=False, messages=[{"role": "user", "content": p}])
                    ).json()["prompt_eval_count"]
                    for p in (prompt + "first", prompt + "second")
                ]
        finally:
            proc.kill()
            proc.wait()

    assert counts[1] < counts[0] // 4
