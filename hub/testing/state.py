"""What FakeOllama knows while it serves: the models and their scripts, what is loaded, what is being
answered, the requests received. `FakeOllama` (server.py) scripts it; the request handler (handler.py)
reads and changes it only through the methods here, under its one lock, so neither reaches into the
other and a handler cannot leave it half-changed."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from hub.testing import window as ctxsim
from hub.testing.fake_gpu import SimulatedGPU
from hub.testing.replies import RecordedRequest, Reply, Responder, as_reply
from hub.testing.wire import same_model, tagged

GENERATING_PATHS = ("/api/chat", "/api/generate", "/v1/chat/completions")
# Ollama's OLLAMA_NUM_PARALLEL where memory allows: each slot keeps its last prompt's cache.
CACHE_SLOTS = 4

# model -> (num_ctx, last used (time.time()), keep_alive seconds: None keeps it for good)
Loaded = tuple[int, float, float | None]


def is_load(path: str, body: dict[str, Any]) -> bool:
    """An empty /api/generate loads (or, with keep_alive 0, unloads) a model and generates nothing."""
    return path == "/api/generate" and not body.get("prompt") and not body.get("images")


def _shared_start(a: str, b: str) -> int:
    """How many leading characters two texts share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


class FakeState:
    """The fake server's state, every method safe to call from any handler thread."""

    def __init__(
        self,
        tokenizer: ctxsim.TokenCounter | None,
        gpu: SimulatedGPU | None,
        llama_cpp: bool,
        *,
        prompt_cache: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.gpu = gpu
        self.llama_cpp = llama_cpp
        self.prompt_cache = prompt_cache
        self._recent_prompts: dict[str, list[str]] = {}  # per model, the slots' last prompts, oldest first
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply | str]] = {}
        self._responders: dict[str, Responder] = {}
        self._settings: dict[str, ctxsim.ModelSettings] = {}
        self._loaded: dict[str, Loaded] = {}
        self._in_flight = 0  # generations being answered now (llama.cpp's /slots shows them)
        self._in_flight_changed = threading.Condition(self._lock)

    # -- the models and their scripts --------------------------------------------------------------------

    def find(self, name: str) -> str | None:
        """The model's name as scripted (`name` with or without its tag), None for an unknown model."""
        with self._lock:
            return self._find(name)

    def _find(self, name: str) -> str | None:
        if name in self._queues:
            return name
        for key in self._queues:
            if same_model(key, name):
                return key
        return None

    @property
    def models(self) -> list[str]:
        """The model names as /api/tags shows them."""
        with self._lock:
            return [tagged(name) for name in self._queues]

    def add_model(self, name: str) -> None:
        with self._lock:
            if self._find(name) is None:
                self._queues[name] = deque()

    def script(self, model: str, *replies: Reply | str) -> None:
        with self._lock:
            key = self._find(model) or model
            self._queues.setdefault(key, deque()).extend(replies)

    def respond_with(self, model: str, fn: Responder) -> None:
        with self._lock:
            key = self._find(model) or model
            self._queues.setdefault(key, deque())
            self._responders[key] = fn

    def reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        """The next queued reply, else the responder's; None when the model has neither."""
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

    def cached_prefix(self, model: str, prompt: str) -> str:
        """The longest start of `prompt` that one of the model's recent prompts began with too ("" without
        the prompt cache); `prompt` is then remembered. Ollama's runner keeps each of its slots' last
        prompt evaluated, copies the longest shared start into the slot it uses, and counts in
        prompt_eval_count only what it evaluates past it."""
        if not self.prompt_cache:
            return ""
        with self._lock:
            kept = self._recent_prompts.setdefault(self._find(model) or model, [])
            shared = [_shared_start(old, prompt) for old in kept]
            most = max(shared, default=0)
            # A slot whose prompt this one mostly repeats is reused; else the least recently used one.
            reused = [i for i, n in enumerate(shared) if n and 2 * n > len(kept[i])]
            if reused:
                del kept[reused[-1]]
            elif len(kept) >= CACHE_SLOTS:
                del kept[0]
            kept.append(prompt)
        return prompt[:most]

    def settings(self, model: str) -> ctxsim.ModelSettings:
        with self._lock:
            return self._settings.get(self._find(model) or model) or ctxsim.ModelSettings()

    def configure(
        self, model: str, context_length: int | None, overflow: str | None, load_seconds: float | None
    ) -> None:
        """Set what is given of a model's settings, keeping the rest."""
        with self._lock:
            key = self._find(model) or model
            current = self._settings.get(key) or ctxsim.ModelSettings()
            self._settings[key] = ctxsim.ModelSettings(
                context_length=current.context_length if context_length is None else context_length,
                overflow=current.overflow if overflow is None else overflow,
                load_seconds=current.load_seconds if load_seconds is None else load_seconds,
            )

    # -- what is loaded ----------------------------------------------------------------------------------

    def loaded(self) -> dict[str, Loaded]:
        """Every model noted as loaded, keep_alive expired or not (a copy)."""
        with self._lock:
            return dict(self._loaded)

    def loaded_model(self, model: str) -> Loaded | None:
        with self._lock:
            return self._loaded.get(self._find(model) or model)

    def unload(self, model: str | None = None) -> None:
        with self._lock:
            if model is None:
                self._loaded.clear()
            else:
                self._loaded.pop(self._find(model) or model, None)

    def load(self, model: str, body: dict[str, Any]) -> float:
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

    # -- what is being answered --------------------------------------------------------------------------

    def record(self, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, headers))

    def recorded(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self.requests)

    @contextlib.contextmanager
    def generating(self) -> Iterator[None]:
        """One generation being answered for as long as the block runs (the busy slots /slots shows)."""
        with self._in_flight_changed:
            self._in_flight += 1
            self._in_flight_changed.notify_all()
        try:
            yield
        finally:
            with self._in_flight_changed:
                self._in_flight -= 1
                self._in_flight_changed.notify_all()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def wait_generating(self, count: int, timeout: float) -> bool:
        with self._in_flight_changed:
            return self._in_flight_changed.wait_for(lambda: self._in_flight == count, timeout)

    def pause(self, sock: socket.socket, seconds: float) -> bool:
        """Wait up to `seconds`; False as soon as the client has gone or the server is stopping."""
        if self.stopping.is_set():
            return False
        if seconds <= 0:
            return True
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return not self.stopping.is_set()
            # A closed peer, and stop() shutting the socket down, both make it readable: no polling.
            readable, _, _ = select.select([sock], [], [], remaining)
            if self.stopping.is_set():
                return False
            if readable:
                try:
                    peeked = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    return False
                if not peeked:
                    return False
                # The client sent more bytes (a pipelined request): keep waiting, on the stop event alone.
                return not self.stopping.wait(max(0.0, deadline - time.monotonic()))
