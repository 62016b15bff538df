"""FakeOllama itself: its scripting (replies, responders, model settings), its lifecycle, and the state
the request handler (`handler.py`) reads and changes while it answers."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hub.testing import context as ctxsim
from hub.testing.gpu import SimulatedGPU
from hub.testing.handler import GENERATING_PATHS, Handler, Server, is_load
from hub.testing.replies import RecordedRequest, Reply, Responder, as_reply
from hub.testing.wire import same_model, tagged


class FakeOllama:
    """A loopback Ollama that answers from a script. Use as a context manager, or `start()` / `stop()`."""

    def __init__(
        self,
        models: Mapping[str, Sequence[Reply | str] | Callable[[dict[str, Any]], Reply | str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        tokenizer: ctxsim.TokenCounter | bool | None = True,
        gpu: SimulatedGPU | None = None,
        llama_cpp: bool = False,
    ) -> None:
        # llama.cpp server's own routes beside /v1, `POST /tokenize` (with the tokenizer) and `GET /slots`:
        # Ollama has neither, so off by default.
        self.llama_cpp = llama_cpp
        # With a simulated GPU, generations queue for its slots and pay its load and generation times.
        self.gpu = gpu
        self.host = host
        # A real tokenizer's count makes prompt_eval_count and the context window behave like a real
        # server's: by default Qwen2.5's when installed (True); False or no tokenizer installed: four
        # characters a token, and no window.
        self.tokenizer = ctxsim.default_tokenizer() if tokenizer is True else (tokenizer or None)
        self._settings: dict[str, ctxsim.ModelSettings] = {}
        self.port = port
        self.url = f"http://{host}:{port}"
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply | str]] = {}
        self._responders: dict[str, Responder] = {}
        # model -> (num_ctx, last used (time.time()), keep_alive seconds: None keeps it for good)
        self._loaded: dict[str, tuple[int, float, float | None]] = {}
        self._in_flight = 0  # generations being answered now (llama.cpp's /slots shows them)
        self._in_flight_changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        for name, replies in (models or {}).items():
            if callable(replies):
                self.respond_with(name, replies)
            elif isinstance(replies, str | Reply):
                self.script(name, replies)  # one reply, not a sequence of characters
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

    def configure(
        self,
        model: str,
        *,
        context_length: int | None = None,
        overflow: str | None = None,
        load_seconds: float | None = None,
    ) -> None:
        """Set a model's server-side facts (adding the model): its trained context_length (/api/show),
        what an over-long prompt does (see hub/testing/context.py) and how long a cold load takes."""
        self.add_model(model)
        with self._lock:
            key = self._find(model) or model
            current = self._settings.get(key) or ctxsim.ModelSettings()
            self._settings[key] = ctxsim.ModelSettings(
                context_length=current.context_length if context_length is None else context_length,
                overflow=current.overflow if overflow is None else overflow,
                load_seconds=current.load_seconds if load_seconds is None else load_seconds,
            )

    def unload(self, model: str | None = None) -> None:
        """Forget that a model (or every model) is loaded, as a restart or keep_alive expiry does."""
        with self._lock:
            if model is None:
                self._loaded.clear()
            else:
                self._loaded.pop(self._find(model) or model, None)

    def respond_with(self, model: str, fn: Callable[[dict[str, Any]], Reply | str]) -> None:
        """Answer every call to a model with fn(request body), once its queue is empty."""
        with self._lock:
            key = self._find(model) or model
            self._queues.setdefault(key, deque())
            self._responders[key] = fn

    def wait_generating(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until `count` generations are being answered (the busy slots llama.cpp's /slots shows): one
        is counted a moment after its reply is chosen and uncounted a moment after its last bytes. False
        at the timeout."""
        with self._in_flight_changed:
            return self._in_flight_changed.wait_for(lambda: self._in_flight == count, timeout)

    def chat_requests(self, model: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the generation calls (/api/chat, /api/generate, /v1/chat/completions), oldest first."""
        with self._lock:
            recorded = list(self.requests)
        bodies = [
            r.body
            for r in recorded
            if r.path in GENERATING_PATHS and r.body is not None and not is_load(r.path, r.body)
        ]
        if model is None:
            return bodies
        return [b for b in bodies if same_model(str(b.get("model", "")), model)]

    @property
    def models(self) -> list[str]:
        """The model names as /api/tags shows them."""
        with self._lock:
            return [tagged(name) for name in self._queues]

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeOllama:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = Server((self.host, self.port), Handler)
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
            if same_model(key, name):
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
                return as_reply(queue.popleft())
            responder = self._responders.get(key)
        if responder is None:
            return None
        try:
            return as_reply(responder(body))
        except Exception as exc:
            # Shown to the client as a 500, so the test that scripted it fails with the reason.
            return Reply(status=500, error=f"FakeOllama: the responder for model '{model}' raised {exc!r}")

    def settings(self, model: str) -> ctxsim.ModelSettings:
        with self._lock:
            return self._settings.get(self._find(model) or model) or ctxsim.ModelSettings()

    def _load(self, model: str, body: dict[str, Any]) -> float:
        """Note the model as loaded with the call's num_ctx; the seconds a cold load takes (0 when it is
        loaded already with that num_ctx: a changed num_ctx reloads, as in Ollama)."""
        requested = ctxsim.requested_num_ctx(body)
        settings = self.settings(model)
        with self._lock:
            key = self._find(model) or model
            loaded = self._loaded.get(key)
            keep = ctxsim.keep_alive_seconds(body.get("keep_alive"))
            if keep == 0:
                self._loaded.pop(key, None)
                return 0.0
            if loaded is not None and loaded[2] is not None and loaded[1] + loaded[2] < time.time():
                loaded = None  # its keep_alive ran out: unloaded since
            num_ctx = requested or (loaded[0] if loaded else ctxsim.DEFAULT_NUM_CTX)
            self._loaded[key] = (num_ctx, time.time(), keep)
        return 0.0 if loaded is not None and loaded[0] == num_ctx else settings.load_seconds

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
