"""Ollama's own HTTP API: `POST /api/chat` streamed as NDJSON, `GET /api/tags` for health and models.

`num_ctx` goes out on every call, from the request (the caller takes it from config per model): a call
without it gets the server's default window, and a value that changes between calls makes Ollama
reload the model. `POST /api/show` gives the model's trained `context_length`, which caps num_ctx
(the server caps it silently).

Load, then time: an empty `/api/generate` with `keep_alive` and the call's num_ctx loads the model on
its own clock (`load_timeout`) before the first-token clock starts, so a 30 s cold load of a 32B model
is not a first-token timeout. The load's `load_duration` is recorded on the Generation; a first-token
timeout right after a cold load is retried once.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from types import TracebackType
from typing import Any

import httpx

from hub.core.config import Config, RoleConfig, normalize_ollama_host
from hub.core.errors import (
    ContextOverflow,
    MalformedStream,
    ModelNotFound,
    ServerFailed,
    WorkerError,
    WorkerTimeout,
    WorkerUnavailable,
)
from hub.core.log import get_logger
from hub.workers import budget
from hub.workers.base import ChatRequest, Generation, Health, check_health, split_thinking
from hub.workers.streaming import (
    StreamState,
    Watchdog,
    check_fits,
    error_text,
    shown,
    stream_generation,
)
from hub.workers.toolcalls import estimated_prompt_tokens, full_prompt, ollama_calls, ollama_messages

log = get_logger(__name__)

HEALTH_TIMEOUT = 10.0
SHOW_TIMEOUT = 10.0
# A load that took longer than this was a cold start (a warm model answers the empty call in ms).
COLD_LOAD_SECONDS = 1.0
# Continuations of an answer cut off at num_predict; each may add num_predict tokens, within the window.
MAX_CONTINUATIONS = 2
# /api/show's context_length per (host, model), for the process (see OllamaProvider.context_length).
_CONTEXT_LENGTHS: dict[tuple[str, str], int | None] = {}
# Statuses of a server that is busy or behind a proxy that lost it: an outage, waited out.
BUSY_STATUSES = (502, 503, 504)
LOAD_FIX = (
    " (if the server's log says it ran out of memory: lower models.<model>.num_ctx in hub.yaml or use a "
    "smaller model)"
)


class OllamaProvider:
    """A Worker that talks to one Ollama server directly."""

    def __init__(
        self,
        host: str,
        *,
        retries: int = 2,
        backoff: float = 0.5,
        keep_alive: str | float = "30m",
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
        self._last_prompts: dict[str, str] = {}

    def generate(self, request: ChatRequest) -> Generation:
        """Load the model, then stream one chat completion; raises the WorkerError leaves."""
        fit = check_fits(request, self.context_length(request.model))
        load_seconds = self.load(request)
        try:
            try:
                generation = self._chat(request, fit)
            except WorkerTimeout as exc:
                if exc.clock != "first_token" or load_seconds < COLD_LOAD_SECONDS:
                    raise
                # The model had just been loaded cold: give the first token one more chance, once.
                load_seconds += self.load(request)
                generation = self._chat(request, fit)
        except WorkerTimeout as exc:
            if exc.clock != "first_token":
                raise
            others = self.serving_others(request.model)
            if others is None:
                raise
            # Not the model's fault: a wait in the server's queue, waited out like an outage.
            raise WorkerUnavailable(
                f"{self.host}: no first token from {request.model} within {exc.seconds:g} s while the server "
                f"had {others} loaded instead: it was serving another client (its queue, not the model)"
            ) from exc
        self._last_prompts[request.model] = _cache_key(request)
        generation = self._continue(request, generation)
        spent = not generation.text.strip() and not generation.tool_calls and generation.thinking
        if spent and generation.done_reason == "length":
            generation = self._without_thinking(request, fit, generation)
        return replace(generation, load_seconds=round(load_seconds + generation.load_seconds, 3))

    def _without_thinking(self, request: ChatRequest, fit: budget.Fit, spent: Generation) -> Generation:
        """A thinking model (qwen3, deepseek-r1) that spent all of num_predict thinking and never began
        its answer, asked once more with thinking off (`think: false`), so the answer gets the room. The
        first call's thinking and tokens stay on the record; if the second answer is empty too, its
        thinking says why."""
        log.info(
            "ollama.thinking_spent_the_answer",
            model=request.model,
            thinking_chars=len(spent.thinking),
            completion_tokens=spent.completion_tokens,
            num_predict=request.num_predict,
        )
        note = (
            f"[the model spent its whole answer room (num_predict {request.num_predict}, "
            f"{spent.completion_tokens} tokens) thinking and was asked again with thinking off]"
        )
        try:
            again = self._chat(request, fit, think=False)
        except WorkerError as exc:
            if isinstance(exc, WorkerUnavailable):
                raise
            log.info("ollama.no_answer_without_thinking", model=request.model, error=str(exc))
            return replace(spent, thinking=f"{spent.thinking}\n\n{note}")
        again = self._continue(request, again)
        return replace(
            again,
            thinking="\n\n".join(t for t in (spent.thinking, note, again.thinking) if t),
            completion_tokens=spent.completion_tokens + again.completion_tokens,
            seconds=round(spent.seconds + again.seconds, 3),
        )

    def _continue(self, request: ChatRequest, generation: Generation) -> Generation:
        """An answer cut off at num_predict (`done_reason` "length"), continued: the answer so far goes
        back as a trailing assistant message, which /api/chat continues rather than answering anew
        (the chat template leaves the last assistant turn open). At most MAX_CONTINUATIONS times, and
        only while the prompt, the answer so far and the next answer's room fit the window; otherwise
        the answer stays cut ("length") and the caller refuses it whole. A tool call cut off is not
        continued (the server sends only calls it parsed whole; a continuation cannot reopen one)."""
        raw, thinking = generation.raw, [generation.thinking] if generation.thinking else []
        completion, seconds = generation.completion_tokens, generation.seconds
        done_reason = generation.done_reason
        calls = generation.tool_calls
        # The whole prompt is in the server's cache now: its small count on a continuation is no cut.
        cached = estimated_prompt_tokens(request)
        for _ in range(MAX_CONTINUATIONS):
            if done_reason != "length" or not raw.strip() or calls:
                break
            follow = replace(request, prefill=raw)
            try:
                fit = check_fits(follow, self.context_length(request.model))
            except ContextOverflow as exc:
                log.info("ollama.no_continuation", model=request.model, reason=str(exc))
                break
            try:
                more = self._chat(follow, fit, cached_prefix_tokens=cached)
            except WorkerUnavailable:
                raise  # an outage: waited out by the caller, and the whole call tried again
            except WorkerError as exc:
                # The answer stays cut, so the caller refuses it whole: nothing of it is lost or applied.
                log.info("ollama.continuation_failed", model=request.model, error=str(exc))
                break
            completion += more.completion_tokens
            seconds += more.seconds
            done_reason = more.done_reason
            calls = more.tool_calls
            if more.thinking:
                thinking.append(more.thinking)
            if not more.raw:
                break  # nothing added: continuing again would loop on the same cut
            raw += more.raw
            log.info("ollama.continued", model=request.model, chars=len(raw), done_reason=done_reason)
        if raw == generation.raw:
            return generation
        text, inline = split_thinking(raw)
        return replace(
            generation,
            text=text,
            raw=raw,
            thinking="\n\n".join(t for t in (*thinking, inline) if t),
            completion_tokens=completion,
            seconds=round(seconds, 3),
            done_reason=done_reason,
            tool_calls=calls,
        )

    def _chat(
        self,
        request: ChatRequest,
        fit: budget.Fit,
        cached_prefix_tokens: int | None = None,
        think: bool | None = None,
    ) -> Generation:
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": ollama_messages(request),
            "stream": True,
            "options": request.ollama_options(),
            "keep_alive": self.keep_alive,
        }
        if request.tools:
            payload["tools"] = list(request.tools)
        if think is not None:
            payload["think"] = think
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
            fit=fit,
            cached_prefix_tokens=(
                self._cached_prefix_tokens(request) if cached_prefix_tokens is None else cached_prefix_tokens
            ),
        )

    def _cached_prefix_tokens(self, request: ChatRequest) -> int:
        """The estimate of the prefix this prompt shares with the last one sent to the model: Ollama
        reuses its cache for it, and counts only the rest in prompt_eval_count."""
        previous = self._last_prompts.get(request.model)
        if not previous:
            return 0
        current = _cache_key(request)
        shared = budget.shared_prefix(previous, current)
        return budget.estimate_tokens(current[:shared]) if shared > 256 else 0

    def load(self, request: ChatRequest) -> float:
        """Load the model with the call's num_ctx (an empty generate); the seconds the server spent
        loading (its load_duration)."""
        body = {
            "model": request.model,
            "keep_alive": self.keep_alive,
            "options": {"num_ctx": request.num_ctx},
        }
        timeout = httpx.Timeout(request.load_timeout, connect=self.connect_timeout)
        problem = ""
        answered = False
        for attempt in range(1, self.retries + 2):
            started = time.monotonic()
            answered = False
            try:
                response = self._client.post("/api/generate", json=body, timeout=timeout)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                    problem = f"connect timed out: {exc}"
                else:
                    raise WorkerTimeout("load", request.load_timeout) from None
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        data = response.json()
                    except ValueError:
                        data = {}
                    # The load answer carries no load_duration in current Ollama: the call's own time is
                    # the load (a loaded model answers in milliseconds).
                    load_ns = data.get("load_duration") if isinstance(data, dict) else None
                    if isinstance(load_ns, int | float) and load_ns > 0:
                        return round(load_ns / 1e9, 3)
                    return round(time.monotonic() - started, 3)
                message = error_text(response.content)
                if response.status_code == 404:
                    raise ModelNotFound(request.model, f"{self.host}: {message}")
                if response.status_code < 500:
                    raise WorkerError(
                        f"{self.host}: loading {request.model}: HTTP {response.status_code}: {message}"
                    )
                problem = f"HTTP {response.status_code}: {message}"
                answered = response.status_code not in BUSY_STATUSES
            if attempt <= self.retries:
                time.sleep(self.backoff * 2 ** (attempt - 1))
        # A 500 loading the model ("llama runner process has terminated", out of memory) is an answer
        # that repeats; refused connections and 502-504 are an outage.
        failure = ServerFailed if answered else WorkerUnavailable
        raise failure(
            f"ollama at {self.host}: cannot load {request.model}: {problem}{LOAD_FIX if answered else ''}"
        )

    def serving_others(self, model: str) -> str | None:
        """What the server holds when it does not hold `model` (`GET /api/ps`): the models another client
        had it load, so a first token that never came was a queue; None when it holds `model`, holds
        nothing, or does not say."""
        try:
            response = self._client.get("/api/ps", timeout=HEALTH_TIMEOUT)
            listed = response.json().get("models") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if not isinstance(listed, list):
            return None
        names = [str(m.get("name") or m.get("model")) for m in listed if isinstance(m, dict)]
        if not names or any(_same_model(name, model) for name in names):
            return None
        return ", ".join(names)

    def context_length(self, model: str) -> int | None:
        """The model's trained context length from /api/show (None when the server does not say).
        Asked once per process, server and model: a provider lives for one phase, and a model's trained
        length does not change under the same name. A failed ask is not remembered (a server that was
        restarting would otherwise leave num_ctx uncapped for good)."""
        key = (self.host, model)
        if key in _CONTEXT_LENGTHS:
            return _CONTEXT_LENGTHS[key]
        length: int | None = None
        try:
            response = self._client.post("/api/show", json={"model": model}, timeout=SHOW_TIMEOUT)
            info = response.json().get("model_info") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if isinstance(info, dict):
            for key_name, value in info.items():
                if str(key_name).endswith(".context_length") and isinstance(value, int) and value > 0:
                    length = value
        if response.status_code == 200:
            _CONTEXT_LENGTHS[key] = length
        return length

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
            # A server-side failure mid-generation (the runner crashed, ran out of memory): it answered,
            # broken; tried again a few times, not waited out (hub/workers/outage.py).
            raise ServerFailed(
                f"{self.host}: Ollama reported an error mid-stream: {chunk['error']}",
                partial_text=state.text(),
            )
        message = chunk.get("message")
        if not isinstance(message, dict):
            message = {}
        content = message.get("content") or ""
        thinking = message.get("thinking") or ""
        calls = ollama_calls(message.get("tool_calls"))
        if content:
            state.content.append(str(content))
        if thinking:
            state.thinking.append(str(thinking))
        state.tool_calls.extend(calls)
        if chunk.get("done"):
            state.done = True
            state.done_reason = str(chunk.get("done_reason") or "stop")
            state.prompt_tokens = _int_or_none(chunk.get("prompt_eval_count"))
            state.completion_tokens = _int_or_none(chunk.get("eval_count"))
            load_ns = chunk.get("load_duration")
            if isinstance(load_ns, int | float):
                state.load_seconds = round(load_ns / 1e9, 3)
        return bool(content or thinking or calls)

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


def for_role(config: Config, role: RoleConfig) -> OllamaProvider:
    """The `ollama` backend's worker for a role: Ollama's own API at ollama.host."""
    return OllamaProvider(config.ollama_host, keep_alive=config.ollama_keep_alive)


def _cache_key(request: ChatRequest) -> str:
    """The text the server's prompt cache sees, in its order: what a next call may share a prefix with."""
    return (request.system or "") + full_prompt(request)


def _same_model(a: str, b: str) -> bool:
    """Ollama names `m` and `m:latest` the same model."""
    return (a if ":" in a else a + ":latest") == (b if ":" in b else b + ":latest")


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
