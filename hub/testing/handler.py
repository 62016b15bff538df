"""FakeOllama's HTTP side: the threading server that tracks its connections, the request handler, the
routes of Ollama's and the OpenAI-compatible API, and how a scripted reply goes out (streamed or whole,
with its faults)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hub.testing import tool_shapes
from hub.testing import window as ctxsim
from hub.testing.replies import Reply
from hub.testing.state import GENERATING_PATHS, FakeState, is_load
from hub.testing.wire import (
    VERSION,
    Chat,
    Completion,
    Format,
    OpenAI,
    Timing,
    default_error,
    details,
    dumps,
    model_entry,
    not_found,
    openai_model,
    split_at,
    tagged,
    timestamp,
)


class _Abort(Exception):
    """The reply ends here: the connection is closed without finishing (a drop, a gone client, a stop)."""


class Server(ThreadingHTTPServer):
    """A thread per connection, each connection's socket kept so that `FakeOllama.stop` can wake and end it;
    its handlers answer from `state`."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], state: FakeState
    ) -> None:
        self.state = state
        self._conn_lock = threading.Lock()
        self._conns: dict[threading.Thread, socket.socket] = {}
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="fake-ollama-conn",
            daemon=True,
        )
        with self._conn_lock:
            self._conns[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._conns.pop(threading.current_thread(), None)

    def connections(self) -> list[tuple[threading.Thread, socket.socket]]:
        with self._conn_lock:
            return list(self._conns.items())

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-reply is routine here (timeouts under test); anything else is a bug.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """One connection's requests: each read, recorded and routed; the ways the routes answer."""

    protocol_version = "HTTP/1.1"
    server_version = "FakeOllama"
    # Go's net/http (Ollama) sets TCP_NODELAY; without it Nagle + delayed ACK add ~40 ms per reply.
    disable_nagle_algorithm = True
    sys_version = ""
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        raw = self._read_body()
        body: dict[str, Any] | None = None
        bad_json: str | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                bad_json = str(exc)
            else:
                body = parsed if isinstance(parsed, dict) else None
                if body is None:
                    bad_json = "request body must be a JSON object"
        fake = self.server.state
        fake.record(method, path, body, {k.lower(): v for k, v in self.headers.items()})
        try:
            if bad_json is not None:
                self._send_json(400, {"error": bad_json})
            else:
                _route(self, fake, method, path, body)
        except _Abort:
            self._abort()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    # -- responses -----------------------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: str) -> None:
        encoded = data.encode("utf-8")
        if not encoded:
            return  # an empty chunk would end the body
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(encoded), encoded))
        except OSError:
            raise _Abort from None

    def _end_chunked(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            raise _Abort from None

    def _abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _pause(self, seconds: float) -> None:
        if not self.server.state.pause(self.connection, seconds):
            raise _Abort


# -- routing ---------------------------------------------------------------------------------------------


def _route(h: Handler, fake: FakeState, method: str, path: str, body: dict[str, Any] | None) -> None:
    if method in ("GET", "HEAD") and path == "/":
        h._send_text(200, "Ollama is running")
    elif method == "GET" and path == "/api/version":
        h._send_json(200, {"version": VERSION})
    elif method == "GET" and path == "/api/tags":
        h._send_json(200, {"models": [model_entry(name) for name in fake.models]})
    elif method == "GET" and path == "/api/ps":
        h._send_json(200, {"models": _running(fake)})
    elif method == "GET" and path == "/slots" and fake.llama_cpp:
        h._send_json(200, _slots(fake))
    elif method == "GET" and path == "/v1/models":
        h._send_json(200, {"object": "list", "data": [openai_model(name) for name in fake.models]})
    elif method == "POST" and path == "/tokenize" and fake.llama_cpp and fake.tokenizer is not None:
        # llama-server answers token ids; FakeOllama's tokenizer gives a count, so the ids are stand-ins.
        content = str((body or {}).get("content") or "")
        h._send_json(200, {"tokens": list(range(fake.tokenizer(content)))})
    elif method == "POST" and path == "/api/show":
        _show(h, fake, body or {})
    elif method == "POST" and path in GENERATING_PATHS:
        _generate(h, fake, path, body)
    else:
        h._send_text(404, "404 page not found")


def _show(h: Handler, fake: FakeState, body: dict[str, Any]) -> None:
    name = str(body.get("model") or body.get("name") or "")
    found = fake.find(name) if name else None
    if found is None:
        h._send_json(404, {"error": f"model '{name}' not found"})
        return
    h._send_json(
        200,
        {
            "license": "",
            "modelfile": f"# Modelfile generated by FakeOllama\nFROM {tagged(found)}\n",
            "parameters": 'stop "<|im_end|>"',
            "template": "{{ .Prompt }}",
            "details": details(),
            "model_info": {
                "general.architecture": "fake",
                "fake.context_length": fake.settings(found).context_length,
            },
            "capabilities": ["completion"],
            "modified_at": timestamp(),
        },
    )


def _generate(h: Handler, fake: FakeState, path: str, body: dict[str, Any] | None) -> None:
    kind = {"/api/chat": Chat, "/api/generate": Completion, "/v1/chat/completions": OpenAI}[path]
    if body is None:
        h._send_json(400, kind.error_body("missing request body", 400))
        return
    problem = (
        tool_shapes.wire_problem("ollama" if kind is Chat else "openai", body)
        if kind is not Completion
        else None
    )
    if problem is not None:
        h._send_json(400, kind.error_body(problem, 400))
        return
    model = str(body.get("model") or "")
    if not model:
        h._send_json(400, kind.error_body("model is required", 400))
        return
    if fake.find(model) is None:
        h._send_json(404, kind.error_body(not_found(model), 404))
        return
    if is_load(path, body):
        _load_only(h, fake, model, body)
        return
    reply = fake.reply_for(model, body)
    if reply is None:
        h._send_json(500, kind.error_body(f"FakeOllama: no scripted reply left for model '{model}'"))
        return
    reply = continued(body, reply)
    load_seconds = fake.load(model, body)
    fmt = kind(model, body, reply)
    window = _window(fake, model, body, fmt)
    cached = fake.cached_prefix(model, fmt.prompt_text())
    if cached:
        fmt.cached = fake.tokenizer(cached) if fake.tokenizer is not None else len(cached) // 4
    with fake.generating():
        if fake.gpu is not None:
            options = body.get("options") if isinstance(body.get("options"), dict) else {}
            with fake.gpu.generation(model, (options or {}).get("num_ctx")) as answered:
                _answer(h, kind, fmt, body, reply, load_seconds, window, answered)
            return
        _answer(h, kind, fmt, body, reply, load_seconds, window)


def _slots(fake: FakeState) -> list[dict[str, Any]]:
    """llama.cpp server's `GET /slots`: one entry per slot, busy ones first (a queued request holds none)."""
    busy = fake.in_flight
    slots = fake.gpu.slots if fake.gpu is not None else 1
    return [{"id": n, "is_processing": n < busy} for n in range(slots)]


def _nothing() -> None:
    pass


def _answer(
    h: Handler,
    kind: Any,
    fmt: Format,
    body: dict[str, Any],
    reply: Reply,
    load_seconds: float,
    window: ctxsim.Window | None,
    answered: Callable[[], None] = _nothing,
) -> None:
    """Send the reply; `answered()` just before its last bytes (SimulatedGPU.generation says why)."""
    # Unset (or null) means stream for Ollama's own API and do not stream for the OpenAI one.
    requested = body.get("stream")
    stream = kind.stream_default if requested is None else bool(requested)
    h._pause(load_seconds)
    fmt.load_seconds = load_seconds
    if window is not None and window.overflows and window.overflow in ("error", "llama_server"):
        answered()
        h._send_json(400, kind.error_body(ctxsim.overflow_message(window), 400))
    elif window is not None and window.overflows and window.overflow == "empty_stream":
        h._start_chunked(fmt.content_type)
        answered()
        h._end_chunked()
    elif reply.status != 200:
        h._pause(reply.first_token_delay)
        answered()
        h._send_json(reply.status, kind.error_body(reply.error or default_error(reply.status), reply.status))
    elif stream:
        _send_stream(h, fmt, reply, answered)
    else:
        _send_whole(h, fmt, reply, answered)


def continued(body: dict[str, Any], reply: Reply) -> Reply:
    """A chat whose last message is the assistant's is continued, as Ollama does (its chat template
    leaves that turn open): the model's scripted whole answer is sent from where the given start ends.
    A scripted answer that does not begin with that start is sent as it is (a model that went its own way)."""
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant" or last.get("tool_calls"):
        return reply
    start = str(last.get("content") or "")
    if start and reply.text.startswith(start):
        return dataclasses.replace(reply, text=reply.text[len(start) :], thinking="")
    return reply


def _window(fake: FakeState, model: str, body: dict[str, Any], fmt: Format) -> ctxsim.Window | None:
    """With a tokenizer: the prompt's real count against the window in force, and what is read of it."""
    if fake.tokenizer is None:
        return None
    messages = body.get("messages")
    parts = (
        tool_shapes.message_texts(body)
        if isinstance(messages, list)
        else [str(body.get("system") or ""), str(body.get("prompt") or "")]
    )
    count = ctxsim.templated_count(fake.tokenizer, [p for p in parts if p])
    loaded = fake.loaded_model(model)
    # /v1 has no num_ctx: Ollama runs it at the server's default window (reloading a model loaded with
    # another), never at the window the last /api/chat loaded.
    num_ctx = ctxsim.requested_num_ctx(body) or (
        loaded[0] if loaded and not isinstance(fmt, OpenAI) else None
    )
    window = ctxsim.window_for(fake.settings(model), num_ctx, count)
    fmt.evaluated = window.evaluated
    return window


def _load_only(h: Handler, fake: FakeState, model: str, body: dict[str, Any]) -> None:
    unloading = body.get("keep_alive") in (0, "0", "0s")
    h._pause(fake.load(model, body))
    reply = {
        "model": model,
        "created_at": timestamp(),
        "response": "",
        "done": True,
        "done_reason": "unload" if unloading else "load",
    }
    h._send_json(200, reply)


def _send_stream(h: Handler, fmt: Format, reply: Reply, answered: Callable[[], None]) -> None:
    started = time.monotonic()
    if reply.early_headers:
        h._start_chunked(fmt.content_type)
    h._pause(reply.first_token_delay)
    pieces = fmt.pieces()
    total = sum(len(p) for _, p in pieces)
    stall_at = None if reply.stall_after_chars is None else min(reply.stall_after_chars, total)
    drop_at = None if reply.drop_after_chars is None else min(reply.drop_after_chars, total)
    stalled = False
    broke_line = False
    first_at: float | None = None
    if not reply.early_headers:
        h._start_chunked(fmt.content_type)

    def checkpoint(pos: int) -> None:
        nonlocal stalled
        if drop_at is not None and pos >= drop_at:
            raise _Abort
        if stall_at is not None and not stalled and pos >= stall_at:
            stalled = True
            h._pause(reply.stall_seconds)

    pos = 0
    for field_name, piece in split_at(pieces, (stall_at, drop_at)):
        checkpoint(pos)
        if first_at is not None:
            h._pause(reply.chunk_delay)
        payload = fmt.chunk(field_name, piece)
        if payload is not None:
            h._chunk(fmt.line(payload))
        first_at = first_at or time.monotonic()
        pos += len(piece)
        if reply.truncate_line and not broke_line:
            broke_line = True
            whole = dumps(fmt.chunk("content", "and then"))
            h._chunk(fmt.line_raw(whole[: len(whole) // 2]))
    checkpoint(pos)
    if reply.truncate_line and not broke_line:
        whole = dumps(fmt.chunk("content", ""))
        h._chunk(fmt.line_raw(whole[: len(whole) // 2]))
    answered()
    if reply.error:
        for line in fmt.failed_midstream():
            h._chunk(line)
    else:
        timing = Timing(started, first_at or time.monotonic(), time.monotonic())
        for event in fmt.final(timing):
            h._chunk(fmt.line(event))
        h._chunk(fmt.end())
    h._end_chunked()


def _send_whole(h: Handler, fmt: Format, reply: Reply, answered: Callable[[], None]) -> None:
    started = time.monotonic()
    h._pause(reply.first_token_delay)
    total = sum(len(p) for _, p in fmt.pieces())
    if reply.stall_after_chars is not None and reply.stall_after_chars <= total:
        h._pause(reply.stall_seconds)
    if reply.drop_after_chars is not None:
        raise _Abort
    answered()
    if reply.error:
        h._send_json(500, fmt.error_body(reply.error))
        return
    now = time.monotonic()
    payload = fmt.whole(Timing(started, now, now))
    if reply.truncate_line:
        data = dumps(payload).encode("utf-8")
        h._send_json(200, None, raw=data[: len(data) // 2])
    else:
        h._send_json(200, payload)


def _running(fake: FakeState) -> list[dict[str, Any]]:
    """What /api/ps lists: the models loaded and not past their keep_alive (with a simulated GPU, what
    it holds), each with when it will be unloaded."""
    loaded = fake.loaded()
    if fake.gpu is not None:
        loaded = {
            name: (num_ctx or 4096, time.time(), ctxsim.DEFAULT_KEEP_ALIVE)
            for name, num_ctx in fake.gpu.loaded()
        }
    out = []
    now = time.time()
    for key, (num_ctx, at, keep) in loaded.items():
        if keep is not None and at + keep < now:
            continue  # unloaded when its keep_alive ran out
        entry = model_entry(tagged(key))
        del entry["modified_at"]
        # keep_alive for good: Ollama shows a far-off date.
        expires = datetime.fromtimestamp(at, UTC) + timedelta(seconds=keep if keep is not None else 10**9)
        out.append(
            {
                **entry,
                "expires_at": timestamp(expires),
                "size_vram": entry["size"],
                "context_length": num_ctx,
            }
        )
    return out
