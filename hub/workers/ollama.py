"""Ollama's own HTTP API: `POST /api/chat` streamed as NDJSON, `GET /api/tags` for health and models.

`num_ctx` goes out on every call, from the request (the caller takes it from config per model): a call
without it gets the server's default window, and a value that changes between calls makes Ollama
reload the model.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import httpx

from hub.config import normalize_ollama_host
from hub.errors import MalformedStream, WorkerError, WorkerUnavailable
from hub.workers.base import ChatRequest, Generation, Health, check_health
from hub.workers.streaming import StreamState, Watchdog, shown, stream_generation

HEALTH_TIMEOUT = 10.0


class OllamaProvider:
    """A Worker that talks to one Ollama server directly."""

    def __init__(
        self,
        host: str,
        *,
        retries: int = 2,
        backoff: float = 0.5,
        keep_alive: str | int = "30m",
        connect_timeout: float = 5.0,
    ) -> None:
        self.host = normalize_ollama_host(host)
        self.retries = retries
        self.backoff = backoff
        self.keep_alive = keep_alive
        self.connect_timeout = connect_timeout
        # Loading the CA bundle costs 50-100 ms per client; a plain-http host never uses it.
        self._client = httpx.Client(
            base_url=self.host, headers={"User-Agent": "agent-hub"}, verify=self.host.startswith("https:")
        )
        self._watchdog = Watchdog()

    def generate(self, request: ChatRequest) -> Generation:
        """Stream one chat completion; raises the WorkerError leaves (see hub/errors.py)."""
        payload = {
            "model": request.model,
            "messages": request.messages(),
            "stream": True,
            "options": request.ollama_options(),
            "keep_alive": self.keep_alive,
        }
        return stream_generation(
            self._client,
            url="/api/chat",
            payload=payload,
            request=request,
            parse_line=self._parse_line,
            watchdog=self._watchdog,
            host=self.host,
            retries=self.retries,
            backoff=self.backoff,
            connect_timeout=self.connect_timeout,
            provider="ollama",
        )

    def _parse_line(self, line: str, state: StreamState) -> bool:
        try:
            chunk = json.loads(line)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            raise MalformedStream(
                f"{self.host}: /api/chat sent a line that is not a JSON object: {shown(line)}"
            )
        if "error" in chunk:
            raise WorkerError(f"{self.host}: Ollama reported an error mid-stream: {chunk['error']}")
        message = chunk.get("message")
        if not isinstance(message, dict):
            message = {}
        content = message.get("content") or ""
        thinking = message.get("thinking") or ""
        if content:
            state.content.append(str(content))
        if thinking:
            state.thinking.append(str(thinking))
        if chunk.get("done"):
            state.done = True
            state.done_reason = str(chunk.get("done_reason") or "stop")
            state.prompt_tokens = _int_or_none(chunk.get("prompt_eval_count"))
            state.completion_tokens = _int_or_none(chunk.get("eval_count"))
        return bool(content or thinking)

    def list_models(self) -> list[str]:
        """The models the server has, as it names them (`name:tag`)."""
        try:
            response = self._client.get("/api/tags", timeout=HEALTH_TIMEOUT)
        except httpx.HTTPError as exc:
            raise WorkerUnavailable(f"cannot reach Ollama at {self.host}: {exc}") from None
        if response.status_code != 200:
            status = response.status_code
            raise WorkerUnavailable(f"Ollama at {self.host}: GET /api/tags answered HTTP {status}")
        try:
            models = response.json().get("models") or []
            return [str(m.get("name") or m.get("model")) for m in models]
        except (ValueError, AttributeError):
            problem = f"{self.host}: /api/tags is not a model list: {shown(response.text)}"
            raise MalformedStream(problem) from None

    def check_health(self, models: list[str]) -> Health:
        """Reachable, which models it has, and which of `models` it lacks."""
        return check_health(self, models, "is `ollama serve` running?", "run `ollama pull <model>`")

    def close(self) -> None:
        self._watchdog.close()
        self._client.close()

    def __enter__(self) -> OllamaProvider:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
