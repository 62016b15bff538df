"""OpenAI-compatible servers (vLLM, llama.cpp server, LM Studio, Ollama's /v1): `/chat/completions` over SSE.

The context window is the server's own setting here (the API has no num_ctx), so the prompt is checked
against the request's num_ctx, which config should set to what the server was started with.
"""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from hub.core.errors import MalformedStream, ServerFailed, WorkerTimeout, WorkerUnavailable
from hub.core.log import get_logger
from hub.workers.base import ChatRequest, Generation, Health, check_health
from hub.workers.budget import Fit
from hub.workers.streaming import StreamState, Watchdog, check_fits, error_text, shown, stream_generation
from hub.workers.toolcalls import openai_messages

if TYPE_CHECKING:
    from hub.core.config import Config, RoleConfig

log = get_logger(__name__)

HEALTH_TIMEOUT = 10.0
# Fields where servers put reasoning apart from the answer: vLLM and llama.cpp, and Ollama's /v1.
REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIProvider:
    """A Worker over an OpenAI-compatible chat completions API."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        retries: int = 2,
        backoff: float = 0.5,
        connect_timeout: float = 5.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.connect_timeout = connect_timeout
        headers = {"User-Agent": "agent-hub", "Accept": "text/event-stream, application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Loading the CA bundle costs 50-100 ms per client; a plain-http server never uses it.
        self._client = httpx.Client(
            base_url=self.base_url + "/", headers=headers, verify=self.base_url.startswith("https:")
        )
        self._watchdog = Watchdog()
        self._checked_load: set[str] = set()  # models whose load state was asked (once per provider)
        self._tokenize: bool | None = None  # whether the server has llama.cpp's /tokenize (None: not asked)
        self._slots: bool | None = None  # whether the server has llama.cpp's /slots (None: not asked)

    def generate(self, request: ChatRequest) -> Generation:
        """Stream one chat completion; raises the WorkerError leaves (see hub/core/errors.py)."""
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": openai_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": request.temperature,
        }
        if request.num_predict is not None:
            payload["max_tokens"] = request.num_predict
        if request.tools:
            payload["tools"] = list(request.tools)
        fit = check_fits(request, count=self.count_tokens)
        if request.model not in self._checked_load:
            self._checked_load.add(request.model)
            if self.ollama_loaded(request.model) is False:
                self._load_on_ollama(request)
        # Asked before sending: once ours is in, the server counts it too, processing or abandoned.
        busy = self.busy_slots()
        try:
            return self._stream(request, payload, fit)
        except WorkerTimeout as exc:
            if exc.clock != "first_token" or busy is None or busy[0] < busy[1]:
                raise
            # Not the model's fault: a wait in the server's queue, waited out like an outage.
            raise WorkerUnavailable(
                f"{self.base_url}: no first token from {request.model} within {exc.seconds:g} s: all "
                f"{busy[1]} of the server's slots were processing other clients' requests when it was "
                "sent (its queue, not the model)"
            ) from exc

    def count_tokens(self, text: str) -> int | None:
        """`text`'s tokens by the model's own tokenizer, from llama.cpp's `POST /tokenize` beside /v1; None
        when the server has none (asked once per provider: vLLM, Ollama's /v1 and LM Studio answer 404)."""
        if self._tokenize is False:
            return None
        root = self.base_url.removesuffix("/v1")
        try:
            response = self._client.post(f"{root}/tokenize", json={"content": text}, timeout=HEALTH_TIMEOUT)
            tokens = response.json().get("tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            tokens = None
        self._tokenize = isinstance(tokens, list)
        return len(tokens) if isinstance(tokens, list) else None

    def _load_on_ollama(self, request: ChatRequest) -> None:
        """Ollama's /v1 loads a cold model inside the call, so the load would run on the first-token
        clock: load it first through Ollama's own API (an empty generate, no num_ctx: the window /v1
        uses too), on the load clock. A failure here is left to the call itself to meet and report."""
        root = self.base_url.removesuffix("/v1")
        started = time.monotonic()
        try:
            self._client.post(
                f"{root}/api/generate",
                json={"model": request.model},
                timeout=httpx.Timeout(request.load_timeout, connect=self.connect_timeout),
            )
        except httpx.TimeoutException:
            raise WorkerTimeout("load", request.load_timeout) from None
        except httpx.HTTPError:
            return
        log.info("openai.loaded_first", model=request.model, seconds=round(time.monotonic() - started, 3))

    def ollama_loaded(self, model: str) -> bool | None:
        """Whether Ollama behind this /v1 has `model` loaded (`GET /api/ps`); None when the server is not
        an Ollama (no /api/ps) or does not answer."""
        root = self.base_url.removesuffix("/v1")
        try:
            response = self._client.get(f"{root}/api/ps", timeout=HEALTH_TIMEOUT)
            listed = response.json().get("models") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if not isinstance(listed, list):
            return None
        tagged = model if ":" in model else model + ":latest"
        names = {str(m.get("name") or m.get("model")) for m in listed if isinstance(m, dict)}
        return tagged in names or model in names

    def busy_slots(self) -> tuple[int, int] | None:
        """(processing, all) of llama.cpp's server slots (`GET /slots`, beside /v1); None when the server
        does not say (vLLM, Ollama's /v1, a llama-server started without --slots: asked once then)."""
        if self._slots is False:
            return None
        root = self.base_url.removesuffix("/v1")
        try:
            response = self._client.get(f"{root}/slots", timeout=HEALTH_TIMEOUT)
            slots = response.json() if response.status_code == 200 else None
        except httpx.HTTPError:
            return None  # not an answer about /slots: asked again next call
        except ValueError:
            slots = None
        self._slots = isinstance(slots, list) and bool(slots)
        if not isinstance(slots, list) or not slots:
            return None
        return sum(1 for slot in slots if isinstance(slot, dict) and slot.get("is_processing")), len(slots)

    def _stream(self, request: ChatRequest, payload: dict[str, Any], fit: Fit) -> Generation:
        return stream_generation(
            self._client,
            url="chat/completions",
            payload=payload,
            request=request,
            parse_line=self._parse_line,
            watchdog=self._watchdog,
            host=self.base_url,
            retries=self.retries,
            backoff=self.backoff,
            connect_timeout=self.connect_timeout,
            provider="openai",
            fit=fit,
        )

    def _parse_line(self, line: str, state: StreamState) -> bool:
        if line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
            return False  # SSE comments (keep-alive pings) and fields we do not use
        if not line.startswith("data:"):
            raise MalformedStream(f"{self.base_url}: the stream sent a line that is not SSE: {shown(line)}")
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            state.done = True
            return False
        try:
            event = json.loads(data)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            raise MalformedStream(f"{self.base_url}: an SSE event is not a JSON object: {shown(line)}")
        if "error" in event:
            # A server-side failure mid-generation: an answer, broken, with what was said so far.
            raise ServerFailed(
                f"{self.base_url}: the server reported an error mid-stream: {_message(event)}",
                partial_text=state.text(),
            )
        usage = event.get("usage")
        if isinstance(usage, dict):
            state.prompt_tokens = _int_or(usage.get("prompt_tokens"), state.prompt_tokens)
            state.completion_tokens = _int_or(usage.get("completion_tokens"), state.completion_tokens)
        token = False
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            if content:
                state.content.append(str(content))
                token = True
            for name in REASONING_FIELDS:
                reasoning = delta.get(name) if isinstance(delta, dict) else None
                if reasoning:
                    state.thinking.append(str(reasoning))
                    token = True
            if isinstance(delta, dict) and state.call_parts.add(delta.get("tool_calls")):
                token = True
            if choice.get("finish_reason"):
                state.done_reason = str(choice["finish_reason"])
                state.finished = True
        return token

    def list_models(self) -> list[str]:
        """The model ids `/models` lists."""
        try:
            response = self._client.get("models", timeout=HEALTH_TIMEOUT)
        except httpx.HTTPError as exc:
            raise WorkerUnavailable(f"cannot reach {self.base_url}: {exc}") from None
        if response.status_code != 200:
            problem = f"HTTP {response.status_code}: {error_text(response.content)}"
            raise WorkerUnavailable(f"{self.base_url}: GET /models answered {problem}")
        try:
            return [str(m["id"]) for m in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            problem = f"{self.base_url}: /models is not a model list: {shown(response.text)}"
            raise MalformedStream(problem) from None

    def check_health(self, models: list[str]) -> Health:
        """Reachable, which models it serves, and which of `models` it lacks."""
        return check_health(self, models)

    def close(self) -> None:
        self._watchdog.close()
        self._client.close()

    def __enter__(self) -> OpenAIProvider:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def for_role(config: Config, role: RoleConfig) -> OpenAIProvider:
    """The `openai` backend's worker for a role: the OpenAI-compatible server at openai.base_url."""
    return OpenAIProvider(config.openai_base_url, config.openai_api_key)


def _message(event: dict[str, Any]) -> str:
    err = event.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def _int_or(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
