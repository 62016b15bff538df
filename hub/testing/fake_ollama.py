"""FakeOllama itself: its scripting (replies, responders, model settings) and its lifecycle. What it
knows while it serves is a `FakeState` (state.py), which the request handler (handler.py) is given."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hub.testing import window as ctxsim
from hub.testing.fake_gpu import SimulatedGPU
from hub.testing.handler import Handler, Server
from hub.testing.replies import RecordedRequest, Reply
from hub.testing.state import GENERATING_PATHS, FakeState, is_load
from hub.testing.wire import same_model


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
        prompt_cache: bool = False,
    ) -> None:
        self.host = host
        # llama.cpp server's own routes beside /v1, `POST /tokenize` (with the tokenizer) and `GET /slots`:
        # Ollama has neither, so off by default. With a simulated GPU, generations queue for its slots and
        # pay its load and generation times. A real tokenizer's count makes prompt_eval_count and the
        # context window behave like a real server's: by default Qwen2.5's when installed (True); False or
        # no tokenizer installed: four characters a token, and no window. With the prompt cache, a prompt's
        # count leaves out the prefix it shares with the model's previous prompt, as Ollama's does.
        self.state = FakeState(
            ctxsim.default_tokenizer() if tokenizer is True else (tokenizer or None),
            gpu,
            llama_cpp,
            prompt_cache=prompt_cache,
        )
        self.port = port
        self.url = f"http://{host}:{port}"
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        for name, replies in (models or {}).items():
            if callable(replies):
                self.respond_with(name, replies)
            elif isinstance(replies, str | Reply):
                self.script(name, replies)  # one reply, not a sequence of characters
            else:
                self.script(name, *replies)

    @property
    def tokenizer(self) -> ctxsim.TokenCounter | None:
        return self.state.tokenizer

    @property
    def gpu(self) -> SimulatedGPU | None:
        return self.state.gpu

    @property
    def llama_cpp(self) -> bool:
        return self.state.llama_cpp

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, oldest first."""
        return self.state.requests

    # -- scripting -------------------------------------------------------------------------------------

    def add_model(self, name: str) -> None:
        """Make a model exist (listed in /api/tags) even with nothing scripted for it."""
        self.state.add_model(name)

    def script(self, model: str, *replies: Reply | str) -> None:
        """Queue replies for a model (adding the model); each call to it takes the next one."""
        self.state.script(model, *replies)

    def configure(
        self,
        model: str,
        *,
        context_length: int | None = None,
        overflow: str | None = None,
        load_seconds: float | None = None,
    ) -> None:
        """Set a model's server-side facts (adding the model): its trained context_length (/api/show),
        what an over-long prompt does (see hub/testing/window.py) and how long a cold load takes."""
        self.add_model(model)
        self.state.configure(model, context_length, overflow, load_seconds)

    def unload(self, model: str | None = None) -> None:
        """Forget that a model (or every model) is loaded, as a restart or keep_alive expiry does."""
        self.state.unload(model)

    def respond_with(self, model: str, fn: Callable[[dict[str, Any]], Reply | str]) -> None:
        """Answer every call to a model with fn(request body), once its queue is empty."""
        self.state.respond_with(model, fn)

    def settings(self, model: str) -> ctxsim.ModelSettings:
        return self.state.settings(model)

    def wait_generating(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until `count` generations are being answered (the busy slots llama.cpp's /slots shows): one
        is counted a moment after its reply is chosen and uncounted a moment after its last bytes. False
        at the timeout."""
        return self.state.wait_generating(count, timeout)

    def chat_requests(self, model: str | None = None) -> list[dict[str, Any]]:
        """Bodies of the generation calls (/api/chat, /api/generate, /v1/chat/completions), oldest first."""
        bodies = [
            r.body
            for r in self.state.recorded()
            if r.path in GENERATING_PATHS and r.body is not None and not is_load(r.path, r.body)
        ]
        if model is None:
            return bodies
        return [b for b in bodies if same_model(str(b.get("model", "")), model)]

    @property
    def models(self) -> list[str]:
        """The model names as /api/tags shows them."""
        return self.state.models

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeOllama:
        if self._server is not None:
            return self
        self.state.stopping.clear()
        server = Server((self.host, self.port), Handler, self.state)
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
        self.state.stopping.set()
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
