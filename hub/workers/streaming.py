"""What the HTTP providers share: the three clocks, retries, HTTP errors and the final Generation.

A provider supplies the URL, the JSON body and a line parser; `stream_generation` does the rest:

    attempt ──▶ connect + send ──▶ headers ──▶ lines ... done
       ▲              │               │            │
       └── retry ◀────┘ refused,      │            ├─ first_token / stall / total clocks (watchdog)
           (never once a 200 has      │            └─ reset, server error mid-stream: WorkerUnavailable
            started streaming)        │               (an outage; the partial text goes with it)
                    reset, 5xx        └─ 404 ModelNotFound, 400 "context" ContextOverflow, other 4xx
                                         WorkerError; after the retries, 5xx and resets WorkerUnavailable

Every transport failure becomes a hub error; none escapes as an httpx exception.

httpx alone cannot enforce the clocks: its read timeout is fixed for the whole body and restarts on every
byte. Waiting for the headers is bounded by the httpx read timeout (Ollama sends its headers with the
first token); once the body streams, a watchdog thread shuts the socket down when the clock of the
current phase runs out, which wakes the blocked read at once.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from hub.core.errors import (
    ContextOverflow,
    ModelNotFound,
    ReplyTooLarge,
    RunawayOutput,
    ServerFailed,
    WorkerError,
    WorkerTimeout,
    WorkerUnavailable,
)
from hub.core.log import get_logger
from hub.workers import budget
from hub.workers.base import ChatRequest, Generation, ToolCall, split_thinking
from hub.workers.toolcalls import OpenAICalls, cut_calls, estimated_prompt_tokens, full_prompt

log = get_logger(__name__)

SHOWN_LINE_CHARS = 200
# A small model on a CPU can fall into a loop: a real Qwen2.5-Coder-1.5B wrote `words = words.replace(...)`
# lines in a cycle on exercism's acronym, and chained `.replace(...)` calls on one line on luhn, each until
# its 900 s clock ran out. The stream is checked each time it grows by LOOP_CHECK_CHARS: its last LOOP_SPAN
# characters the same as the LOOP_SPAN before them shifted by at most LOOP_MAX_PERIOD is one piece at least
# four times in a row, a loop, not code. Measured: the three loops recorded here were stopped after 6,000
# characters; over every 2,000-character prefix of the 13,353 Python files of this machine's standard
# library and site-packages, none was taken for one (a rule on repeated lines flagged 6 of them).
LOOP_CHECK_CHARS = 2000
LOOP_SPAN = 4000
LOOP_MAX_PERIOD = 1000
# How servers word a prompt longer than the context: Ollama (some versions answer 400 instead of
# cutting silently) and llama.cpp's llama-server, which gives both numbers.
CONTEXT_ERRORS = ("longer than the context", "exceeds the available context", "context length", "n_ctx")
# Statuses of a server that is busy or behind a proxy that lost it: an outage, waited out.
BUSY_STATUSES = (502, 503, 504)
LLAMA_SERVER_NUMBERS = re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")


@dataclass
class StreamState:
    """What the lines of one response said so far; a provider's line parser fills it in."""

    content: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    done: bool = False
    done_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finished: bool = False  # a terminal marker short of `done` (an OpenAI finish_reason before [DONE])
    lines: int = 0  # non-blank lines seen
    load_seconds: float = 0.0
    tool_calls: list[ToolCall] = field(default_factory=list)  # calls that came whole (Ollama's)
    call_parts: OpenAICalls = field(default_factory=OpenAICalls)  # calls that come in deltas (OpenAI's)

    def text(self) -> str:
        return "".join(self.content)

    def calls(self) -> tuple[ToolCall, ...]:
        """The server's tool calls; in an answer cut at the token limit, the cut one carries a problem."""
        cut = self.done_reason == "length"
        whole = cut_calls(self.tool_calls) if cut else self.tool_calls
        return (*whole, *self.call_parts.result(cut))


LineParser = Callable[[str, StreamState], bool]
"""Reads one non-blank line into the state; True when it carried a token (content or thinking)."""


def check_fits(
    request: ChatRequest,
    context_length: int | None = None,
    count: Callable[[str], int | None] | None = None,
) -> budget.Fit:
    """The call's budget; ContextOverflow before anything is sent when the prompt and the room for its
    answer exceed the window (num_ctx, capped by the model's context_length). `count`: the server's own
    tokenizer, when it has one (None from it: the estimate). The tools offered and the turns after the
    prompt (agent mode) count as the chat template renders them."""
    # An answer to continue is part of the prompt (one more message of template, within the margin).
    prompt = full_prompt(request) + ("\n" + request.prefill if request.prefill else "")
    counted = count((request.system or "") + "\n" + prompt) if count is not None else None
    fit = budget.plan(
        prompt,
        request.system,
        request.num_ctx,
        request.num_predict,
        scale=request.token_scale,
        context_length=context_length,
        counted=counted,
        turns=len(request.turns),
    )
    if not fit.fits:
        raise budget.overflow(fit, "estimate" if counted is None else "server tokenizer")
    return fit


def context_error(request: ChatRequest, fit: budget.Fit, message: str) -> ContextOverflow | None:
    """A server's "prompt too long" answer as ContextOverflow with the server's numbers, else None."""
    lowered = message.lower()
    if not any(marker in lowered for marker in CONTEXT_ERRORS):
        return None
    numbers = LLAMA_SERVER_NUMBERS.search(message)
    if numbers and int(numbers[2]) < fit.num_ctx:
        # The server's own window (llama-server -c) is smaller than num_ctx: its numbers, and its fix.
        return ContextOverflow(
            int(numbers[1]),
            int(numbers[2]),
            source="server",
            detail=f"the server said: {message}",
            server_window=int(numbers[2]),
            configured_num_ctx=fit.num_ctx,
        )
    prompt, window = (int(numbers[1]), int(numbers[2])) if numbers else (fit.prompt_tokens, fit.num_ctx)
    return ContextOverflow(
        prompt, window, answer_tokens=fit.answer_tokens, source="server", detail=f"the server said: {message}"
    )


def shown(line: str) -> str:
    """A line trimmed for an error message."""
    line = line.strip()
    return line if len(line) <= SHOWN_LINE_CHARS else line[:SHOWN_LINE_CHARS] + "..."


def error_text(body: bytes) -> str:
    """The message in an error body: Ollama's {"error": "..."}, OpenAI's {"error": {"message": ...}},
    vLLM's {"message": ...}, or the text itself."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return shown(text) or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err:
            return err
        for key in ("message", "detail"):
            if data.get(key):
                return str(data[key])
    return shown(text)


class Clocks:
    """The three deadlines of one attempt. The total deadline is shared by all attempts of a call."""

    def __init__(self, request: ChatRequest, total_deadline: float) -> None:
        self.request = request
        self.started = time.monotonic()
        self.total_deadline = total_deadline
        self.first_token_at: float | None = None
        self.last_token_at = self.started
        self.expired: tuple[str, float] | None = None

    def token(self, now: float) -> bool:
        """Note a token; True for the first, which swaps the first-token clock for the stall clock."""
        self.last_token_at = now
        if self.first_token_at is None:
            self.first_token_at = now
            return True
        return False

    def phase(self) -> tuple[str, float, float]:
        """(clock, deadline, limit in seconds) of the clock that runs out next."""
        r = self.request
        if self.first_token_at is None:
            clock, limit, since = "first_token", r.first_token_timeout, self.started
        else:
            clock, limit, since = "stall", r.stall_timeout, self.last_token_at
        deadline = since + limit
        if self.total_deadline <= deadline:
            return "total", self.total_deadline, r.total_timeout
        return clock, deadline, limit

    def remaining(self) -> float:
        return self.phase()[1] - time.monotonic()

    def overdue(self, now: float) -> tuple[str, float] | None:
        clock, deadline, limit = self.phase()
        return (clock, limit) if now >= deadline else None


class Watchdog:
    """One thread per provider that shuts a stream's socket down when its current clock runs out.

    A thread per call would cost more than the rest of a call to a fast local server (start and join
    wait on the GIL), so the thread lives as long as its provider and watches every stream in flight.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watched: dict[int, tuple[Clocks, socket.socket]] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, clocks: Clocks, sock: socket.socket) -> int:
        with self._cond:
            if self._closed:
                raise WorkerError("the provider is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hub-stream-watchdog", daemon=True)
                self._thread.start()
            self._next_key += 1
            self._watched[self._next_key] = (clocks, sock)
            self._cond.notify()
            return self._next_key

    def nudge(self) -> None:
        """Recompute the deadlines now: one moved earlier (the stall clock can be shorter than the first)."""
        with self._cond:
            self._cond.notify()

    def unwatch(self, key: int) -> None:
        # Under the lock: once this returns the socket is never shut, and may go back to the pool.
        with self._cond:
            self._watched.pop(key, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                # Deadlines move with every token; waking at an old one just recomputes it.
                wait: float | None = None
                for key, (clocks, sock) in list(self._watched.items()):
                    remaining = clocks.remaining()
                    if remaining > 0:
                        wait = remaining if wait is None else min(wait, remaining)
                        continue
                    clock, _, limit = clocks.phase()
                    clocks.expired = (clock, limit)
                    del self._watched[key]
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                self._cond.wait(wait)


def stream_generation(
    client: httpx.Client,
    *,
    url: str,
    payload: dict[str, Any],
    request: ChatRequest,
    parse_line: LineParser,
    watchdog: Watchdog,
    host: str,
    retries: int,
    backoff: float,
    connect_timeout: float,
    provider: str,
    fit: budget.Fit | None = None,
    cached_prefix_tokens: int = 0,
) -> Generation:
    """POST a streaming generation and assemble it, enforcing the clocks, retrying only before it starts."""
    fit = fit or check_fits(request)
    call_started = time.monotonic()
    total_deadline = call_started + request.total_timeout
    attempts = retries + 1
    last_problem = ""
    answered = False
    for attempt in range(1, attempts + 1):
        answered = False
        clocks = Clocks(request, total_deadline)
        clock, _, limit = clocks.phase()
        header_wait = max(0.001, clocks.remaining())
        connect = min(connect_timeout, header_wait)
        timeout = httpx.Timeout(connect=connect, read=header_wait, write=30.0, pool=30.0)
        log.debug("worker.request", provider=provider, url=url, model=request.model, attempt=attempt)
        try:
            with client.stream("POST", url, json=payload, timeout=timeout) as response:
                if response.status_code == 200:
                    state = _consume(response, clocks, watchdog, parse_line, host, request, fit)
                    return _finish(request, state, clocks, call_started, fit, provider, cached_prefix_tokens)
                body = response.read()
            raise_for_status(response.status_code, body, request, fit, host, url)
            problem = f"HTTP {response.status_code}: {error_text(body)}"
            answered = response.status_code not in BUSY_STATUSES
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                problem = f"connect timed out: {exc}"
            else:
                # The model is loading or thinking; a retry would only start that over. Never retry.
                raise WorkerTimeout(clock, limit) from None
        except httpx.ConnectError as exc:
            problem = f"connection failed: {exc}"
        except httpx.TransportError as exc:
            # Reset or closed before the answer began (a stale keep-alive connection, a restarting
            # server): nothing was generated, so trying again costs nothing.
            problem = f"the connection failed before the answer began: {type(exc).__name__}: {exc}"
        last_problem = problem
        log.debug("worker.retryable", provider=provider, host=host, attempt=attempt, problem=problem)
        if attempt == attempts:
            break
        pause = backoff * 2 ** (attempt - 1)
        if time.monotonic() + pause >= total_deadline:
            break
        time.sleep(pause)
    if answered:
        # The server answered an error (500: its runner crashed, out of memory) rather than not at all.
        raise ServerFailed(f"{provider} at {host}: {request.model}: the server answered {last_problem}")
    raise WorkerUnavailable(f"{provider} at {host} unavailable after {attempt} attempt(s): {last_problem}")


def raise_for_status(
    status: int, body: bytes, request: ChatRequest, fit: budget.Fit, host: str, url: str
) -> None:
    """The hub error an HTTP error answer stands for; returns for the retryable ones (5xx)."""
    if status < 400:
        return
    message = error_text(body)
    if status == 404:
        if "model" in message.lower() or b"not_found_error" in body:
            raise ModelNotFound(request.model, f"{host}: {message}")
        raise WorkerError(f"{url}: HTTP 404 {message} (is this the right server and path?)")
    if status < 500:
        raise context_error(request, fit, message) or WorkerError(
            f"{host}: {request.model}: HTTP {status}: {message}"
        )


def _response_socket(response: httpx.Response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    return sock if isinstance(sock, socket.socket) else None


def _consume(
    response: httpx.Response,
    clocks: Clocks,
    watchdog: Watchdog,
    parse_line: LineParser,
    host: str,
    request: ChatRequest,
    fit: budget.Fit,
) -> StreamState:
    state = StreamState()
    timeouts = response.request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        # The body's reads use this value (read when the body starts); the watchdog cuts sooner,
        # so this is only the backstop where the socket cannot be reached.
        timeouts["read"] = max(0.001, clocks.total_deadline - time.monotonic())
    sock = _response_socket(response)
    key = watchdog.watch(clocks, sock) if sock is not None else None
    size = checked = counted = 0
    try:
        for line in _lines(response, clocks, state):
            if parse_line(line, state) and clocks.token(time.monotonic()):
                watchdog.nudge()
            # Only the new pieces: summing every piece on each line made a long answer quadratic.
            size += sum(map(len, state.content[counted:]))
            if request.on_progress is not None and len(state.content) != counted:
                request.on_progress(len(state.content))
            counted = len(state.content)
            if request.max_chars is not None and size + state.call_parts.chars() > request.max_chars:
                raise ReplyTooLarge(
                    f"{host}: {request.model}: the answer passed {request.max_chars:,} characters "
                    "(limits.max_reply_chars); stopped while it streamed",
                    partial_text=state.text()[-LOOP_SPAN:],
                )
            if size - checked >= LOOP_CHECK_CHARS:
                checked = size
                loop = repeating(state.text())
                if loop:
                    # Leaving the `with` closes the stream: the server stops generating.
                    raise RunawayOutput(f"{host}: {request.model}: {loop}", partial_text=state.text())
    finally:
        if key is not None:
            watchdog.unwatch(key)
    if not state.done and state.finished:
        state.done = True
    if not state.lines:
        # llama-cpp-python's server answers a prompt longer than its n_ctx with 200 and an empty stream
        # (the cause only in its own log).
        raise ContextOverflow(
            fit.prompt_tokens,
            fit.num_ctx,
            answer_tokens=fit.answer_tokens,
            source="server",
            detail=f"{host}: {request.model}: the server answered 200 with an empty stream, as "
            "llama-cpp-python does for a prompt longer than the context it was started with (n_ctx)",
        )
    if not state.done:
        # Ollama's /v1 ends a failed generation with an empty chunk and no [DONE]; its own API with an
        # error line (raised by the parser). Either way the server answered, and failed mid-generation.
        raise ServerFailed(
            f"{host}: {request.model}: the server stopped mid-generation without its final message "
            f"after {len(state.text())} characters",
            partial_text=state.text(),
        )
    return state


def repeating(text: str) -> str | None:
    """Why `text` ends in a loop (one piece again and again, within a line or across lines), or None."""
    if len(text) < LOOP_SPAN + LOOP_MAX_PERIOD:
        return None
    tail = text[-LOOP_SPAN:]
    for period in range(1, LOOP_MAX_PERIOD + 1):
        if tail == text[-LOOP_SPAN - period : -period]:
            return (
                f"the answer repeats itself: its last {LOOP_SPAN} characters are one piece of {period} "
                f"characters over and over (stopped after {len(text)} characters)"
            )
    return None


def _lines(response: httpx.Response, clocks: Clocks, state: StreamState) -> Iterator[str]:
    """The response's non-blank lines, turning a cut-off read into the clock that cut it."""
    try:
        for line in response.iter_lines():
            now = time.monotonic()
            if not state.done:
                overdue = clocks.expired or clocks.overdue(now)
                if overdue is not None:
                    raise WorkerTimeout(overdue[0], overdue[1], state.text())
            if line.strip():
                state.lines += 1
                yield line
    except (httpx.TimeoutException, httpx.TransportError) as exc:
        if state.done:
            return  # everything arrived; a slow or broken tail changes nothing
        expired = clocks.expired
        if expired is None and isinstance(exc, httpx.TimeoutException):
            clock, _, limit = clocks.phase()
            expired = (clock, limit)
        if expired is not None:
            raise WorkerTimeout(expired[0], expired[1], state.text()) from None
        if state.finished:
            return
        # The server answered (a 200 and a stream) and broke off: a few tries, not an outage's wait. A
        # server that crashed is refused on the next try, and that is waited out as an outage.
        raise ServerFailed(
            f"the connection was reset mid-generation after {len(state.text())} characters "
            f"(no final message): {type(exc).__name__}: {exc}",
            partial_text=state.text(),
        ) from None


def _finish(
    request: ChatRequest,
    state: StreamState,
    clocks: Clocks,
    call_started: float,
    fit: budget.Fit,
    provider: str,
    cached_prefix_tokens: int = 0,
) -> Generation:
    raw = state.text()
    text, thinking = split_thinking(raw)
    separate = "".join(state.thinking).strip()
    if separate:
        thinking = separate + ("\n\n" + thinking if thinking else "")
    estimated = state.prompt_tokens is None
    if estimated:
        # llama-cpp-python sends no usage chunk unless asked (and not always then): say so, do not record 0.
        log.warning(
            "worker.usage_estimated",
            provider=provider,
            model=request.model,
            hint="the server sent no token counts; the call's tokens are the hub's estimate",
        )
    uncalibrated = estimated_prompt_tokens(request)
    # What this process saw (`cached_prefix_tokens`) or the hub remembers (`request.cached_chars`, from any
    # process) of a prefix the server may have cached: Ollama counts only the tokens it evaluates.
    remembered = budget.cached_tokens((request.system or "") + full_prompt(request), request.cached_chars)
    cached = max(cached_prefix_tokens, remembered)
    truncated = budget.truncated(state.prompt_tokens, uncalibrated, fit.num_ctx, cached)
    if truncated:
        log.warning(
            "worker.prompt_truncated",
            provider=provider,
            model=request.model,
            estimated_tokens=uncalibrated,
            prompt_eval_count=state.prompt_tokens,
            num_ctx=fit.num_ctx,
            hint="the server read fewer prompt tokens than were sent: its context window is smaller "
            "than num_ctx, so the start of the prompt was silently dropped",
        )
    now = time.monotonic()
    first = clocks.first_token_at
    completion = state.completion_tokens
    generation = Generation(
        text=text,
        model=request.model,
        thinking=thinking,
        prompt_tokens=fit.prompt_tokens if estimated else int(state.prompt_tokens or 0),
        completion_tokens=(
            completion if completion is not None else budget.estimate_tokens(raw + "".join(state.thinking))
        ),
        seconds=now - call_started,
        first_token_seconds=(first - clocks.started) if first is not None else now - clocks.started,
        done_reason=state.done_reason,
        truncated=truncated,
        raw=raw,
        load_seconds=state.load_seconds,
        tokens_estimated=estimated,
        tool_calls=state.calls(),
    )
    log.debug(
        "worker.done",
        provider=provider,
        model=request.model,
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        seconds=round(generation.seconds, 3),
        first_token_seconds=round(generation.first_token_seconds, 3),
        done_reason=generation.done_reason,
        tool_calls=len(generation.tool_calls),
    )
    return generation
