"""`FakeOllama`: a real loopback HTTP server that speaks Ollama's API, with scripted replies and faults.

It lives in the package, not under tests/, the way `httpx.MockTransport` lives in httpx: the tests, the
demo and the benchmarks all talk to it over real sockets, so the code under test cannot tell it from
Ollama. Served:

    GET  /  (and HEAD)        "Ollama is running"
    GET  /api/version         {"version": ...}
    GET  /api/tags            the models, untagged names shown as "name:latest" as Ollama does
    GET  /api/ps              the models called so far, with the num_ctx of the last call
    POST /api/chat            NDJSON stream unless "stream": false
    POST /api/generate        same, with "response" instead of "message"
    POST /api/show            model details
    POST /v1/chat/completions OpenAI-compatible; SSE ("data: {...}" ... "data: [DONE]") when "stream": true
    GET  /v1/models

Replies are scripted per model, as a queue (`script`) or a function of the request body (`respond_with`);
a queued reply is used first. A `Reply` injects the faults a local model shows: a slow first token, a
stall mid-stream, a dropped connection, an HTTP error, an error line mid-stream, a broken NDJSON line,
and token counts that give away a silently truncated prompt. Character positions (`stall_after_chars`,
`drop_after_chars`) count over everything streamed, the `<think>` block included.

Standalone: `python -m hub.testing --port 11434 --script replies.yaml`, where the script is
`{"models": {"name": ["text", {"text": "...", "first_token_delay": 1.5}], "other": {"repeat": "text"}}}`.

Only the standard library is imported at module level (yaml only for `--script`): this module is
imported by every test that needs a model.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOllama", "RecordedRequest", "Reply"]

VERSION = "0.6.8"
RUNNER_CRASHED = "llama runner process has terminated: exit status 2"
GENERATING_PATHS = ("/api/chat", "/api/generate", "/v1/chat/completions")


@dataclass
class Reply:
    """One scripted answer and the faults to inject while sending it."""

    text: str = ""
    thinking: str = ""  # sent as a <think>...</think> prefix, or as message.thinking (see thinking_field)
    thinking_field: bool = (
        False  # send thinking apart (message.thinking) even if the call did not ask "think"
    )
    first_token_delay: float = 0.0  # seconds before the first chunk (and before the response headers)
    stall_after_chars: int | None = None  # stop sending after this many characters...
    stall_seconds: float = 0.0  # ...for this long, then carry on unless the client has gone
    drop_after_chars: int | None = None  # close the connection abruptly after this many characters
    status: int = 200  # e.g. 500: an {"error": ...} body as Ollama sends it, before any streaming
    error: str | None = None  # with status 200: an {"error": ...} line mid-stream instead of the final chunk
    truncate_line: bool = False  # one broken NDJSON line after the first chunk
    prompt_eval_count: int | None = None  # override, to mimic silent context truncation
    eval_count: int | None = None
    done_reason: str = "stop"
    chunk_chars: int = 8  # characters per streamed chunk
    chunk_delay: float = 0.0  # seconds between chunks: a slow but steady model


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it (body is the parsed JSON, None for GET or a non-JSON body)."""

    method: str
    path: str
    body: dict[str, Any] | None
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-cased names


Responder = Callable[[dict[str, Any]], "Reply | str"]


class _Abort(Exception):
    """The reply ends here: the connection is closed without finishing (a drop, a gone client, a stop)."""


class FakeOllama:
    """A loopback Ollama that answers from a script. Use as a context manager, or `start()` / `stop()`."""

    def __init__(
        self,
        models: Mapping[str, Sequence[Reply | str] | Callable[[dict[str, Any]], Reply | str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.host = host
        self.port = port
        self.url = f"http://{host}:{port}"
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply | str]] = {}
        self._responders: dict[str, Responder] = {}
        self._loaded: dict[str, tuple[int, float]] = {}
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        for name, replies in (models or {}).items():
            if callable(replies):
                self.respond_with(name, replies)
            else:
                self.script(name, *replies)

    # -- scripting -------------------------------------------------------------------------------------

    def add_model(self, name: str) -> None:
        """Make a model exist (listed in /api/tags) even with nothing scripted for it."""
        with self._lock:
            if self._find(name) is None:
                self._queues[name] = deque()

    def script(self, model: str, *replies: Reply | str) -> None:
        """Queue replies for a model (adding the model); each call to it takes the next one."""
        with self._lock:
            key = self._find(model) or model
            self._queues.setdefault(key, deque()).extend(replies)

    def respond_with(self, model: str, fn: Callable[[dict[str, Any]], Reply | str]) -> None:
        """Answer every call to a model with fn(request body), once its queue is empty."""
        with self._lock:
            key = self._find(model) or model
            self._queues.setdefault(key, deque())
            self._responders[key] = fn

    def chat_requests(self, model: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the generation calls (/api/chat, /api/generate, /v1/chat/completions), oldest first."""
        with self._lock:
            recorded = list(self.requests)
        bodies = [r.body for r in recorded if r.path in GENERATING_PATHS and r.body is not None]
        if model is None:
            return bodies
        return [b for b in bodies if _same_model(str(b.get("model", "")), model)]

    @property
    def models(self) -> list[str]:
        """The model names as /api/tags shows them."""
        with self._lock:
            return [_tagged(name) for name in self._queues]

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeOllama:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((self.host, self.port), _Handler)
        server.fake = self
        self._server = server
        self.port = server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        # A short poll keeps stop() quick: shutdown() waits for the serve loop to notice.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-ollama", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        # Idle keep-alive connections and stalled replies wait on their sockets; shutting the sockets
        # down wakes them so every handler thread ends and closes what it opened.
        for _, sock in server.connections():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread, _ in server.connections():
            thread.join(timeout=5)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals used by the handler -------------------------------------------------------------------

    def _find(self, name: str) -> str | None:
        if name in self._queues:
            return name
        for key in self._queues:
            if _same_model(key, name):
                return key
        return None

    def _record(self, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, headers))

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            key = self._find(model)
            if key is None:
                return None
            queue = self._queues[key]
            if queue:
                return _as_reply(queue.popleft())
            responder = self._responders.get(key)
        if responder is None:
            return None
        return _as_reply(responder(body))

    def _mark_loaded(self, model: str, body: dict[str, Any]) -> None:
        options = body.get("options") or {}
        num_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        with self._lock:
            key = self._find(model) or model
            if body.get("keep_alive") in (0, "0", "0s"):
                self._loaded.pop(key, None)
            else:
                previous = self._loaded.get(key, (4096, 0.0))[0]
                self._loaded[key] = (int(num_ctx) if isinstance(num_ctx, int) else previous, time.time())

    def _pause(self, sock: socket.socket, seconds: float) -> bool:
        """Wait up to `seconds`; False as soon as the client has gone or the server is stopping."""
        if self._stopping.is_set():
            return False
        if seconds <= 0:
            return True
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return not self._stopping.is_set()
            # A closed peer, and stop() shutting the socket down, both make it readable: no polling.
            readable, _, _ = select.select([sock], [], [], remaining)
            if self._stopping.is_set():
                return False
            if readable:
                try:
                    peeked = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    return False
                if not peeked:
                    return False
                # The client sent more bytes (a pipelined request): keep waiting, on the stop event alone.
                return not self._stopping.wait(max(0.0, deadline - time.monotonic()))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeOllama

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOllama"
    # Go's net/http (Ollama) sets TCP_NODELAY; without it Nagle + delayed ACK add ~40 ms per reply.
    disable_nagle_algorithm = True
    sys_version = ""
    server: _Server

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
        fake = self.server.fake
        fake._record(method, path, body, {k.lower(): v for k, v in self.headers.items()})
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
        data = raw if raw is not None else _dumps(payload).encode("utf-8")
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
        if not self.server.fake._pause(self.connection, seconds):
            raise _Abort


# -- routing ---------------------------------------------------------------------------------------------


def _route(h: _Handler, fake: FakeOllama, method: str, path: str, body: dict[str, Any] | None) -> None:
    if method in ("GET", "HEAD") and path == "/":
        h._send_text(200, "Ollama is running")
    elif method == "GET" and path == "/api/version":
        h._send_json(200, {"version": VERSION})
    elif method == "GET" and path == "/api/tags":
        h._send_json(200, {"models": [_model_entry(name) for name in fake.models]})
    elif method == "GET" and path == "/api/ps":
        h._send_json(200, {"models": _running(fake)})
    elif method == "GET" and path == "/v1/models":
        h._send_json(200, {"object": "list", "data": [_openai_model(name) for name in fake.models]})
    elif method == "POST" and path == "/api/show":
        _show(h, fake, body or {})
    elif method == "POST" and path in GENERATING_PATHS:
        _generate(h, fake, path, body)
    else:
        h._send_text(404, "404 page not found")


def _show(h: _Handler, fake: FakeOllama, body: dict[str, Any]) -> None:
    name = str(body.get("model") or body.get("name") or "")
    with fake._lock:
        found = fake._find(name) if name else None
    if found is None:
        h._send_json(404, {"error": f"model '{name}' not found"})
        return
    h._send_json(
        200,
        {
            "license": "",
            "modelfile": f"# Modelfile generated by FakeOllama\nFROM {_tagged(found)}\n",
            "parameters": 'stop "<|im_end|>"',
            "template": "{{ .Prompt }}",
            "details": _details(),
            "model_info": {"general.architecture": "fake", "fake.context_length": 32768},
            "capabilities": ["completion"],
            "modified_at": _timestamp(),
        },
    )


def _generate(h: _Handler, fake: FakeOllama, path: str, body: dict[str, Any] | None) -> None:
    kind = {"/api/chat": _Chat, "/api/generate": _Completion, "/v1/chat/completions": _OpenAI}[path]
    if body is None:
        h._send_json(400, kind.error_body("missing request body"))
        return
    model = str(body.get("model") or "")
    if not model:
        h._send_json(400, kind.error_body("model is required"))
        return
    with fake._lock:
        known = fake._find(model) is not None
    if not known:
        h._send_json(404, kind.error_body(f"model '{model}' not found"))
        return
    reply = fake._reply_for(model, body)
    if reply is None:
        h._send_json(500, kind.error_body(f"FakeOllama: no scripted reply left for model '{model}'"))
        return
    fake._mark_loaded(model, body)
    fmt = kind(model, body, reply)
    stream = body.get("stream", kind.stream_default) is not False
    if reply.status != 200:
        h._pause(reply.first_token_delay)
        h._send_json(reply.status, kind.error_body(reply.error or _default_error(reply.status)))
    elif stream:
        _send_stream(h, fmt, reply)
    else:
        _send_whole(h, fmt, reply)


def _send_stream(h: _Handler, fmt: _Format, reply: Reply) -> None:
    started = time.monotonic()
    h._pause(reply.first_token_delay)
    pieces = fmt.pieces()
    total = sum(len(p) for _, p in pieces)
    stall_at = None if reply.stall_after_chars is None else min(reply.stall_after_chars, total)
    drop_at = None if reply.drop_after_chars is None else min(reply.drop_after_chars, total)
    stalled = False
    broke_line = False
    first_at: float | None = None
    h._start_chunked(fmt.content_type)

    def checkpoint(pos: int) -> None:
        nonlocal stalled
        if drop_at is not None and pos >= drop_at:
            raise _Abort
        if stall_at is not None and not stalled and pos >= stall_at:
            stalled = True
            h._pause(reply.stall_seconds)

    pos = 0
    for field_name, piece in _split_at(pieces, (stall_at, drop_at)):
        checkpoint(pos)
        if first_at is not None:
            h._pause(reply.chunk_delay)
        h._chunk(fmt.line(fmt.chunk(field_name, piece)))
        first_at = first_at or time.monotonic()
        pos += len(piece)
        if reply.truncate_line and not broke_line:
            broke_line = True
            whole = _dumps(fmt.chunk("content", "and then"))
            h._chunk(fmt.line_raw(whole[: len(whole) // 2]))
    checkpoint(pos)
    if reply.truncate_line and not broke_line:
        whole = _dumps(fmt.chunk("content", ""))
        h._chunk(fmt.line_raw(whole[: len(whole) // 2]))
    if reply.error:
        h._chunk(fmt.line(fmt.error_body(reply.error)))
    else:
        timing = _Timing(started, first_at or time.monotonic(), time.monotonic())
        for event in fmt.final(timing):
            h._chunk(fmt.line(event))
        h._chunk(fmt.end())
    h._end_chunked()


def _send_whole(h: _Handler, fmt: _Format, reply: Reply) -> None:
    started = time.monotonic()
    h._pause(reply.first_token_delay)
    total = sum(len(p) for _, p in fmt.pieces())
    if reply.stall_after_chars is not None and reply.stall_after_chars <= total:
        h._pause(reply.stall_seconds)
    if reply.drop_after_chars is not None:
        raise _Abort
    if reply.error:
        h._send_json(500, fmt.error_body(reply.error))
        return
    now = time.monotonic()
    payload = fmt.whole(_Timing(started, now, now))
    if reply.truncate_line:
        data = _dumps(payload).encode("utf-8")
        h._send_json(200, None, raw=data[: len(data) // 2])
    else:
        h._send_json(200, payload)


def _split_at(pieces: list[tuple[str, str]], marks: Iterable[int | None]) -> list[tuple[str, str]]:
    """Split the pieces so that every mark (a character position) falls on a piece boundary."""
    cuts = sorted({m for m in marks if m is not None and m > 0})
    out: list[tuple[str, str]] = []
    pos = 0
    for name, piece in pieces:
        start = pos
        end = pos + len(piece)
        for cut in cuts:
            if start < cut < end:
                out.append((name, piece[start - pos : cut - pos]))
                start = cut
        out.append((name, piece[start - pos :]))
        pos = end
    return out


# -- wire formats ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timing:
    started: float
    first_token: float
    finished: float


class _Format:
    """One API's shape: chunks, the final chunk, the whole (non-streamed) body and errors."""

    content_type = "application/x-ndjson"
    stream_default = True

    def __init__(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        self.model = model
        self.body = body
        self.reply = reply
        self.think_field = bool(reply.thinking) and (reply.thinking_field or bool(body.get("think")))

    @staticmethod
    def error_body(message: str) -> dict[str, Any]:
        return {"error": message}

    def pieces(self) -> list[tuple[str, str]]:
        r = self.reply
        if self.think_field:
            segments = [("thinking", r.thinking), ("content", r.text)]
        elif r.thinking:
            segments = [("content", f"<think>\n{r.thinking}\n</think>\n\n{r.text}")]
        else:
            segments = [("content", r.text)]
        size = max(1, r.chunk_chars)
        return [(name, s[i : i + size]) for name, s in segments for i in range(0, len(s), size)]

    def line(self, payload: dict[str, Any]) -> str:
        return self.line_raw(_dumps(payload))

    def line_raw(self, text: str) -> str:
        return text + "\n"

    def end(self) -> str:
        return ""

    def prompt_text(self) -> str:
        messages = self.body.get("messages") or []
        parts = [m.get("content", "") for m in messages if isinstance(m, dict)]
        return "".join(p if isinstance(p, str) else _dumps(p) for p in parts)

    def counts(self) -> tuple[int, int]:
        r = self.reply
        prompt = r.prompt_eval_count if r.prompt_eval_count is not None else len(self.prompt_text()) // 4 + 1
        streamed = sum(len(p) for _, p in self.pieces())
        return prompt, r.eval_count if r.eval_count is not None else streamed // 4 + 1

    def metrics(self, t: _Timing) -> dict[str, Any]:
        prompt, evals = self.counts()
        total = max(1, int((t.finished - t.started) * 1e9))
        load = min(total // 10, 1_500_000)
        prompt_ns = max(1, int((t.first_token - t.started) * 1e9) - load)
        return {
            "total_duration": total,
            "load_duration": load,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": prompt_ns,
            "eval_count": evals,
            "eval_duration": max(1, total - load - prompt_ns),
        }

    def chunk(self, field_name: str, piece: str) -> dict[str, Any]:
        raise NotImplementedError

    def final(self, t: _Timing) -> list[dict[str, Any]]:
        raise NotImplementedError

    def whole(self, t: _Timing) -> dict[str, Any]:
        raise NotImplementedError

    def text_and_thinking(self) -> tuple[str, str]:
        content = "".join(p for name, p in self.pieces() if name == "content")
        thinking = "".join(p for name, p in self.pieces() if name == "thinking")
        return content, thinking


class _Chat(_Format):
    def chunk(self, field_name: str, piece: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": piece if field_name == "content" else ""}
        if field_name == "thinking":
            message["thinking"] = piece
        return {"model": self.model, "created_at": _timestamp(), "message": message, "done": False}

    def final(self, t: _Timing) -> list[dict[str, Any]]:
        return [
            {
                "model": self.model,
                "created_at": _timestamp(),
                "message": {"role": "assistant", "content": ""},
                "done_reason": self.reply.done_reason,
                "done": True,
                **self.metrics(t),
            }
        ]

    def whole(self, t: _Timing) -> dict[str, Any]:
        content, thinking = self.text_and_thinking()
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        final = self.final(t)[0]
        final["message"] = message
        return final


class _Completion(_Format):
    def prompt_text(self) -> str:
        return str(self.body.get("system") or "") + str(self.body.get("prompt") or "")

    def chunk(self, field_name: str, piece: str) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "created_at": _timestamp()}
        out["response"] = piece if field_name == "content" else ""
        if field_name == "thinking":
            out["thinking"] = piece
        out["done"] = False
        return out

    def final(self, t: _Timing) -> list[dict[str, Any]]:
        prompt, evals = self.counts()
        return [
            {
                "model": self.model,
                "created_at": _timestamp(),
                "response": "",
                "done": True,
                "done_reason": self.reply.done_reason,
                "context": list(range(1, min(prompt + evals, 16) + 1)),
                **self.metrics(t),
            }
        ]

    def whole(self, t: _Timing) -> dict[str, Any]:
        content, thinking = self.text_and_thinking()
        final = self.final(t)[0]
        final["response"] = content
        if thinking:
            final["thinking"] = thinking
        return final


class _OpenAI(_Format):
    content_type = "text/event-stream"
    stream_default = False

    def __init__(self, model: str, body: dict[str, Any], reply: Reply) -> None:
        super().__init__(model, body, reply)
        self.think_field = False
        self.id = "chatcmpl-" + hashlib.sha1(f"{time.time_ns()}".encode()).hexdigest()[:8]
        self.created = int(time.time())
        self.first = True

    @staticmethod
    def error_body(message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "api_error", "param": None, "code": None}}

    def line_raw(self, text: str) -> str:
        return f"data: {text}\n\n"

    def end(self) -> str:
        return "data: [DONE]\n\n"

    def _envelope(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_ollama",
            "choices": choices,
        }

    def _usage(self) -> dict[str, int]:
        prompt, evals = self.counts()
        return {"prompt_tokens": prompt, "completion_tokens": evals, "total_tokens": prompt + evals}

    def chunk(self, field_name: str, piece: str) -> dict[str, Any]:
        delta = {"role": "assistant", "content": piece}
        return self._envelope("chat.completion.chunk", [{"index": 0, "delta": delta, "finish_reason": None}])

    def final(self, t: _Timing) -> list[dict[str, Any]]:
        events = [
            self._envelope(
                "chat.completion.chunk",
                [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": self.reply.done_reason,
                    }
                ],
            )
        ]
        options = self.body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            events.append({**self._envelope("chat.completion.chunk", []), "usage": self._usage()})
        return events

    def whole(self, t: _Timing) -> dict[str, Any]:
        content, _ = self.text_and_thinking()
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": self.reply.done_reason,
        }
        return {**self._envelope("chat.completion", [choice]), "usage": self._usage()}


# -- helpers ---------------------------------------------------------------------------------------------


def _dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _as_reply(item: Reply | str) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply(text=item)
    raise TypeError(f"FakeOllama: a reply must be a Reply or a str, not {type(item).__name__}")


def _tagged(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def _same_model(a: str, b: str) -> bool:
    return _tagged(a) == _tagged(b)


def _timestamp(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "fake",
        "families": ["fake"],
        "parameter_size": "7.6B",
        "quantization_level": "Q4_K_M",
    }


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def _model_entry(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": _timestamp(),
        "size": 4_683_087_332,
        "digest": _digest(name),
        "details": _details(),
    }


def _openai_model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "library"}


def _running(fake: FakeOllama) -> list[dict[str, Any]]:
    with fake._lock:
        loaded = dict(fake._loaded)
    out = []
    for key, (num_ctx, at) in loaded.items():
        entry = _model_entry(_tagged(key))
        del entry["modified_at"]
        expires = datetime.fromtimestamp(at, UTC) + timedelta(minutes=5)
        out.append(
            {
                **entry,
                "expires_at": _timestamp(expires),
                "size_vram": entry["size"],
                "context_length": num_ctx,
            }
        )
    return out


def _default_error(status: int) -> str:
    return RUNNER_CRASHED if status >= 500 else f"FakeOllama: scripted HTTP {status}"


# -- standalone ------------------------------------------------------------------------------------------


def load_script(text: str) -> dict[str, list[Reply] | Reply]:
    """Parse a script file's text (JSON or YAML): model -> list of replies, or one reply to repeat."""
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ValueError('script: expected {"models": {name: [reply, ...]}}')
    allowed = {f.name for f in fields(Reply)}

    def reply(item: Any, where: str) -> Reply:
        if isinstance(item, str):
            return Reply(text=item)
        if isinstance(item, dict):
            unknown = sorted(set(item) - allowed)
            if unknown:
                raise ValueError(f"script: {where}: unknown reply field(s) {', '.join(unknown)}")
            return Reply(**item)
        raise ValueError(f"script: {where}: a reply is a string or a mapping")

    out: dict[str, list[Reply] | Reply] = {}
    for name, value in data["models"].items():
        if isinstance(value, list):
            out[str(name)] = [reply(item, f"models.{name}[{i}]") for i, item in enumerate(value)]
        elif isinstance(value, dict) and set(value) == {"repeat"}:
            out[str(name)] = reply(value["repeat"], f"models.{name}.repeat")
        elif value is None:
            out[str(name)] = []
        else:
            raise ValueError(f"script: models.{name}: expected a list of replies or {{repeat: reply}}")
    return out


def _always(reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    return lambda _body: reply


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hub.testing", description="Serve a scripted fake Ollama."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="JSON or YAML: {models: {name: [reply, ...] | {repeat: reply}}}")
    args = parser.parse_args(argv)

    fake = FakeOllama(host=args.host, port=args.port)
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as f:
                script = load_script(f.read())
        except (OSError, ValueError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for name, replies in script.items():
            if isinstance(replies, Reply):
                fake.respond_with(name, _always(replies))
            else:
                fake.script(name, *replies)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with fake:
        print(f"FakeOllama listening on {fake.url}", flush=True)
        while not stop.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
