"""The WorkerClient: the `Worker` protocol over an MCP worker server, and the factory that picks a backend.

Two dialects, chosen from the server's `tools/list`:

- `ollama_run` (this project's `hub worker serve`, and the original ollama-mcp): the result text is JSON
  `{stdout, stderr, exitCode, metadata}` and the reply is `stdout` (the original hub read the whole JSON
  as the reply and every run looked malformed). Failures come back with `exitCode != 0`; `metadata.error_type`
  (ours) or `metadata.timed_out` / the stderr text (the original) say which hub error to raise.
- `ollama_chat` (npm ollama-mcp 2.x): `format: "markdown"` (its default, json, makes Ollama emit JSON and
  wraps anything else as an error) and `options` as a JSON string. It reports no token counts (they are
  estimated), enforces no clock of its own (the call's timeout is the total clock), and drops `num_ctx`
  and `keep_alive` (Ollama then uses its default window, `workers[].num_ctx`, 4096 unless set: prompts
  are budgeted against that). It never streams, so there is no first-token or stall clock; its fetch
  gives up after 300 s with "fetch failed", which is a timeout here, not an outage; and it keeps
  generating after the hub gives up. The first call says all this once (and `hub doctor` does). It
  also rewrites a reply that is itself valid JSON into markdown; ask such models for fenced JSON.

Agent mode (issue 19): the hub's own worker carries `tools` and `turns` in ollama_run (hub extensions
its schema lists) and answers the model's calls in `metadata.tool_calls`. npm ollama-mcp cannot: its
messages take no tool role and no calls (its schema strips them) and it turns a reply with calls into
markdown. There the tools are dropped and the turns go as plain text (a call as fenced JSON, a result
as a user turn), so the agent's text fallback (the tools listed in its prompt, calls read from the
text) carries the loop. A server whose ollama_run lists no `turns` (the original ollama-mcp, an older
hub) would drop them silently: a request with tools or turns is refused there.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core import backends
from hub.core.errors import (
    ConfigError,
    ContextOverflow,
    MalformedStream,
    MCPError,
    MCPTimeoutError,
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
from hub.workers.base import (
    ChatRequest,
    Generation,
    Health,
    ToolCall,
    Worker,
    check_health,
    estimate_tokens,
    same_model,
    split_thinking,
)
from hub.workers.toolcalls import as_tool_call, estimated_prompt_tokens, full_prompt, text_turns, turn_dict

if TYPE_CHECKING:
    from hub.core.config import Config, RoleConfig, WorkerServer
    from hub.workers.inprocess import InProcessWorker
    from hub.workers.mcp_client import MCPClient
    from hub.workers.worker_tools import ToolResult

    ToolClient = MCPClient | InProcessWorker

log = get_logger(__name__)

HUB_DIALECT = "ollama_run"
NPM_DIALECT = "ollama_chat"
# Our server enforces the request's clocks itself and answers with which one ran out; the MCP call gets
# this much longer so that answer arrives before the client gives up on its own.
SERVER_CLOCK_MARGIN = 15.0
LIST_TIMEOUT = 30.0
# npm ollama-mcp's fetch to Ollama gives up after this long (undici's headers timeout) as "fetch failed".
NPM_FETCH_SECONDS = 300.0
NPM_DROPS = (
    "num_ctx (Ollama's default window applies: workers[].num_ctx, 4096 unless set; prompts are kept "
    "within it)",
    "keep_alive",
    "streaming (no first-token or stall clock: only the total clock)",
    "token counts and done_reason (estimated instead)",
    "cancellation (the model keeps generating after the hub's timeout)",
    f"answers slower than {NPM_FETCH_SECONDS:g} s (its fetch gives up)",
)


def npm_dialect_warning(server_name: str) -> str:
    """What the npm ollama-mcp dialect drops, for the first call's log line and `hub doctor`."""
    return f"MCP worker '{server_name}' is npm ollama-mcp, which drops: " + "; ".join(NPM_DROPS)


@dataclass(frozen=True)
class _Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    first_token_seconds: float = 0.0
    done_reason: str = ""
    truncated: bool = False
    thinking: str = ""
    model: str = ""
    load_seconds: float = 0.0
    tokens_estimated: bool = False
    tool_calls: tuple[ToolCall, ...] = ()


class WorkerClient:
    """A `Worker` that reaches Ollama through an MCP worker server (spawned on first use for stdio), or
    through the hub's own worker in this process (`transport: inprocess`, hub/workers/inprocess.py)."""

    def __init__(
        self,
        server: WorkerServer,
        ollama_host: str,
        *,
        log_dir: str | Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.server = server
        self.ollama_host = ollama_host
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self.dialect: str | None = None
        self.tools: tuple[str, ...] = ()
        self.carries_turns = False  # its ollama_run takes tools and turns (the hub's own worker)
        self._client: ToolClient | None = None
        self._warned = False
        # Phases of several tasks may share this client (WorkerPool): one of them spawns the server.
        self._connecting = threading.Lock()

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the Worker protocol ---------------------------------------------------------------------

    def generate(self, request: ChatRequest) -> Generation:
        # Here, not at the top: hub.workers.streaming loads httpx, and every phase imports this module.
        from hub.workers.streaming import check_fits

        client = self._connect()
        if self.dialect == NPM_DIALECT:
            if not self._warned:
                log.warning("bridge.npm_dialect", detail=npm_dialect_warning(self.server.name))
                self._warned = True
            # num_ctx cannot be passed: the server's default window is the one in force.
            request = replace(request, num_ctx=min(request.num_ctx, self.server.num_ctx))
        if (request.tools or request.turns) and not self.carries_turns:
            request = self._without_tools(request)
        # Refused here, before any round trip: npm ollama-mcp would not refuse it at all.
        check_fits(request)
        started = time.perf_counter()
        log.debug("bridge.generate", server=self.server.name, dialect=self.dialect, model=request.model)
        reply = self._run(client, request) if self.dialect == HUB_DIALECT else self._chat(client, request)
        text, thinking = split_thinking(reply.text)
        thinking = "\n\n".join(t for t in (reply.thinking, thinking) if t)
        estimated = reply.tokens_estimated or not reply.prompt_tokens
        return Generation(
            num_ctx=request.num_ctx,  # npm ollama-mcp: the server's default window, not the role's
            text=text,
            model=reply.model or request.model,
            thinking=thinking,
            prompt_tokens=reply.prompt_tokens or estimated_prompt_tokens(request),
            completion_tokens=reply.completion_tokens or estimate_tokens(reply.text),
            seconds=reply.seconds or round(time.perf_counter() - started, 3),
            first_token_seconds=reply.first_token_seconds,
            done_reason=reply.done_reason,
            truncated=reply.truncated,
            raw=reply.text,
            load_seconds=reply.load_seconds,
            tokens_estimated=estimated,
            tool_calls=reply.tool_calls,
        )

    def _without_tools(self, request: ChatRequest) -> ChatRequest:
        """A request with tools or turns for a worker that cannot carry them: npm ollama-mcp gets the
        turns as text and no tools (the agent's text fallback carries the loop); any other is refused."""
        if self.dialect != NPM_DIALECT:
            raise WorkerError(
                f"MCP worker '{self.server.name}' cannot carry agent mode's tools and turns: its ollama_run "
                "lists no `turns` (the original ollama-mcp, or a hub worker older than agent mode), and "
                "would drop them silently",
                hint="use the hub's own worker (transport inprocess, or `hub worker serve` of this version) "
                "or the ollama/openai backend",
            )
        log.debug(
            "bridge.tools_dropped",
            server=self.server.name,
            tools=len(request.tools),
            turns=len(request.turns),
            why="npm ollama-mcp takes no tool turns and rewrites calls as markdown: the turns go as text, "
            "and the agent reads calls from the reply's text",
        )
        return replace(request, tools=(), turns=text_turns(request.turns))

    def check_health(self, models: list[str]) -> Health:
        """Start the server if needed, list its models, and name the wanted ones it lacks."""
        health = check_health(self, models)
        extra = {"server": self.server.name}
        if health.reached:
            extra.update(dialect=self.dialect or "", ollama=self.ollama_host)
        return replace(health, extra=extra)

    def list_models(self) -> list[str]:
        client = self._connect()
        tool = "ollama_list_models" if self.dialect == HUB_DIALECT else "ollama_list"
        args: dict[str, Any] = {} if self.dialect == HUB_DIALECT else {"format": "json"}
        result = self._call(client, tool, args, LIST_TIMEOUT, total_clock=None)
        if result.is_error:
            raise _tool_error(self.server.name, tool, result.text, model="")
        data = _json_object(result.text, self.server.name, tool)
        names = []
        for entry in data.get("models") or []:
            name = (
                entry if isinstance(entry, str) else (entry or {}).get("name") or (entry or {}).get("model")
            )
            if name:
                names.append(str(name))
        return names

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.stop()

    # -- connection ------------------------------------------------------------------------------

    def connect(self) -> str:
        """Start the server (if it is not running) and return the dialect its tools/list chose."""
        self._connect()
        assert self.dialect is not None
        return self.dialect

    def _connect(self) -> ToolClient:
        with self._connecting:
            return self._connect_locked()

    def _connect_locked(self) -> ToolClient:
        if self._client is not None and self._client.running:
            return self._client
        if self._client is not None:
            # The last server died (its MCPServerCrashed reached the caller then); this is a fresh one.
            log.info("bridge.restart", server=self.server.name)
            self.close()
        client = self._new_client()
        client.start()
        try:
            specs = client.list_tools()
            self.tools = tuple(t.name for t in specs)
            self.dialect = pick_dialect(self.server.name, self.tools)
            run = next((t for t in specs if t.name == HUB_DIALECT), None)
            properties = (run.input_schema.get("properties") if run is not None else None) or {}
            self.carries_turns = "turns" in properties
        except BaseException:
            client.stop()
            raise
        self._client = client
        log.debug("bridge.connected", server=self.server.name, dialect=self.dialect, tools=len(self.tools))
        return client

    def _new_client(self) -> ToolClient:
        # Imported here: the in-process worker needs neither the SDK nor the MCP client's asyncio.
        if self.server.transport == "inprocess":
            from hub.workers.inprocess import InProcessWorker

            return InProcessWorker(self.server.name, self.ollama_host)
        from hub.workers.mcp_client import MCPClient

        # The child sees none of our environment but what is passed here (and the server's own env).
        env = {"OLLAMA_HOST": self.ollama_host}
        if os.environ.get("HUB_LOG_LEVEL"):
            env["HUB_LOG_LEVEL"] = os.environ["HUB_LOG_LEVEL"]
        return MCPClient.for_server(
            self.server,
            env=env,
            log_dir=self.log_dir if self.log_dir is not None else default_log_dir(),
            startup_timeout=self.startup_timeout,
        )

    def _call(
        self, client: ToolClient, tool: str, args: dict[str, Any], timeout: float, total_clock: float | None
    ) -> ToolResult:
        try:
            return client.call_tool(tool, args, timeout=timeout, raise_on_error=False)
        except MCPTimeoutError as exc:
            if total_clock is None:
                raise
            # The server said nothing within the whole allowance: for the pipeline that is the total clock.
            raise WorkerTimeout("total", total_clock) from exc

    # -- dialects --------------------------------------------------------------------------------

    def _run(self, client: ToolClient, request: ChatRequest) -> _Reply:
        options: dict[str, Any] = {
            "temperature": request.temperature,
            "num_ctx": request.num_ctx,
            "timeout": round(request.total_timeout * 1000),
            "first_token_timeout": round(request.first_token_timeout * 1000),
            "stall_timeout": round(request.stall_timeout * 1000),
            "load_timeout": round(request.load_timeout * 1000),
            "token_scale": request.token_scale,
        }
        if request.system:
            options["system"] = request.system
        if request.num_predict is not None:
            options["num_predict"] = request.num_predict
        if request.max_chars is not None:
            options["max_chars"] = request.max_chars  # the hub's worker cuts the stream there
        if request.cached_chars:
            options["cached_chars"] = request.cached_chars
        args: dict[str, Any] = {"model": request.model, "prompt": request.prompt, "options": options}
        if request.tools:
            args["tools"] = list(request.tools)
        if request.turns:
            args["turns"] = [turn_dict(t) for t in request.turns]
        # Loading runs on its own clock before the others start.
        timeout = request.total_timeout + request.load_timeout + SERVER_CLOCK_MARGIN
        result = self._call(client, "ollama_run", args, timeout, total_clock=request.total_timeout)
        if result.is_error:
            raise _tool_error(self.server.name, "ollama_run", result.text, model=request.model)
        return unwrap_run_result(result.text, self.server.name, request)

    def _chat(self, client: ToolClient, request: ChatRequest) -> _Reply:
        args = {
            "model": request.model,
            "messages": request.messages(),
            "options": json.dumps(request.ollama_options()),
            "format": "markdown",
        }
        started = time.perf_counter()
        result = self._call(
            client, "ollama_chat", args, request.total_timeout, total_clock=request.total_timeout
        )
        seconds = time.perf_counter() - started
        if result.is_error:
            raise npm_chat_error(self.server.name, result.text, request.model, seconds)
        return _Reply(text=result.text, seconds=round(seconds, 3), tokens_estimated=True)


def npm_chat_error(
    server_name: str, text: str, model: str, seconds: float, fetch_limit: float = NPM_FETCH_SECONDS
) -> WorkerError:
    """npm ollama-mcp's error as a hub error. Its "fetch failed" means an unreachable Ollama when it
    comes at once, and its own fetch giving up on a slow answer when it comes at the fetch limit."""
    error = _tool_error(server_name, "ollama_chat", text, model=model)
    slow = seconds >= fetch_limit * 0.95
    if isinstance(error, WorkerUnavailable) and "fetch failed" in text.lower() and slow:
        return WorkerTimeout("total", round(seconds, 1), "")
    return error


def pick_dialect(server_name: str, tools: tuple[str, ...] | list[str]) -> str:
    """`ollama_run` when offered (hub and the original ollama-mcp), else `ollama_chat` (npm ollama-mcp)."""
    if HUB_DIALECT in tools:
        return HUB_DIALECT
    if NPM_DIALECT in tools:
        return NPM_DIALECT
    found = ", ".join(sorted(tools)) or "no tools"
    raise WorkerError(
        f"MCP server '{server_name}' is not a worker this hub can drive: it offers neither ollama_run "
        f"(hub worker serve, the original ollama-mcp) nor ollama_chat (npm ollama-mcp 2.x); found: {found}"
    )


def unwrap_run_result(text: str, server_name: str, request: ChatRequest) -> _Reply:
    """The reply inside an ollama_run result, or the hub error its failure stands for."""
    data = _json_object(text, server_name, "ollama_run")
    if "stdout" not in data or "exitCode" not in data:
        raise MalformedStream(
            f"MCP server '{server_name}': ollama_run result lacks stdout/exitCode: {text[:200]!r}"
        )
    meta = data.get("metadata") or {}
    if not isinstance(meta, dict):
        meta = {}
    if data.get("exitCode") != 0 or data.get("error"):
        raise run_error(data, meta, request)

    def number(key: str) -> int:
        value = meta.get(key)
        return int(value) if isinstance(value, int | float) else 0

    return _Reply(
        text=str(data.get("stdout") or ""),
        prompt_tokens=number("prompt_tokens"),
        completion_tokens=number("completion_tokens"),
        seconds=number("duration_ms") / 1000.0,
        first_token_seconds=number("first_token_ms") / 1000.0,
        done_reason=str(meta.get("done_reason") or ""),
        truncated=bool(meta.get("truncated")),
        thinking=str(meta.get("thinking") or ""),
        model=str(meta.get("model_used") or ""),
        load_seconds=number("load_ms") / 1000.0,
        tokens_estimated=bool(meta.get("tokens_estimated")),
        tool_calls=_calls(meta.get("tool_calls"), server_name),
    )


def _calls(value: Any, server_name: str) -> tuple[ToolCall, ...]:
    """metadata.tool_calls as ToolCalls; a call that is not a mapping is a broken result."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise MalformedStream(
            f"MCP server '{server_name}': ollama_run's metadata.tool_calls is not a list of calls"
        )
    return tuple(as_tool_call(c) for c in value)


def run_error(data: dict[str, Any], meta: dict[str, Any], request: ChatRequest) -> WorkerError:
    """Rebuild the hub error a failed ollama_run stands for (ours names it; the original only hints)."""
    message = str(data.get("stderr") or data.get("error") or f"exit code {data.get('exitCode')}").strip()
    kind = str(meta.get("error_type") or "")
    partial = str(data.get("stdout") or "")
    if kind == "WorkerTimeout" or meta.get("timed_out"):
        clock = str(meta.get("clock") or "total")
        seconds = meta.get("timeout_seconds")
        return WorkerTimeout(clock, float(seconds) if seconds is not None else request.total_timeout, partial)
    if kind == "ModelNotFound" or (not kind and "not found" in message.lower()):
        return ModelNotFound(str(meta.get("model_missing") or request.model), message)
    if kind == "ContextOverflow":
        length = meta.get("context_length")
        return ContextOverflow(
            int(meta.get("prompt_tokens") or 0),
            int(meta.get("num_ctx") or request.num_ctx),
            answer_tokens=int(meta.get("answer_tokens") or 0),
            context_length=length if isinstance(length, int) else None,
            source=str(meta.get("source") or "estimate"),
            detail=message if meta.get("source") == "server" else "",
        )
    if kind == "WorkerUnavailable":
        return WorkerUnavailable(message, partial_text=partial)
    if kind == "ServerFailed":  # answered broken: a few tries, not an outage's wait (hub/workers/outage.py)
        return ServerFailed(message, partial_text=partial)
    if kind == "MalformedStream":
        return MalformedStream(message)
    if kind == "ReplyTooLarge":
        return ReplyTooLarge(message, partial_text=partial)
    if kind == "RunawayOutput":
        return RunawayOutput(message, partial_text=partial)
    return WorkerError(f"ollama_run failed: {message}")


def _tool_error(server_name: str, tool: str, text: str, model: str) -> WorkerError:
    """An isError tool result as a hub error (ours: `Error executing tool X: ...`; npm: `Error: ...`)."""
    message = text.strip()
    for prefix in (f"Error executing tool {tool}:", "Error:"):
        if message.startswith(prefix):
            message = message[len(prefix) :].strip()
    lowered = message.lower()
    if model and "not found" in lowered:
        return ModelNotFound(model, f"MCP server '{server_name}': {message}")
    if any(s in lowered for s in ("cannot reach", "fetch failed", "econnrefused", "connection refused")):
        reach = "" if "reach" in lowered else "cannot reach Ollama: "
        return WorkerUnavailable(f"MCP server '{server_name}': {reach}{message}")
    return MCPError(f"MCP server '{server_name}': tool {tool} failed: {message}")


def _json_object(text: str, server_name: str, tool: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise MalformedStream(
            f"MCP server '{server_name}': {tool} did not answer with a JSON object: {text[:200]!r}"
        )
    return data


def default_log_dir() -> Path:
    return Path(tempfile.gettempdir()) / "agent-hub-logs"


def log_dir_for(config: Config) -> Path:
    """Worker server stderr logs: beside the task's other files when the handoff folder exists."""
    return config.handoff_dir / "logs" if config.handoff_dir.is_dir() else default_log_dir()


def make_worker(config: Config, role: str | RoleConfig) -> Worker:
    """The Worker a role is configured to use: its backend's provider (hub/core/backends.py) builds it."""
    role_config = config.role(role) if isinstance(role, str) else role
    backend = backends.TABLE.get(role_config.backend)
    if backend is None:
        raise ConfigError(f"roles.{role_config.name}.backend: unknown backend '{role_config.backend}'")
    # The direct providers load httpx at their top: only the module of the backend in use is imported.
    provider: Callable[[Config, RoleConfig], Worker] = import_module(backend.provider).for_role
    return provider(config, role_config)


def for_role(config: Config, role: RoleConfig) -> WorkerClient:
    """The `mcp` backend's worker for a role: the worker server `roles.<role>.worker` names."""
    return WorkerClient(config.worker_server(role.worker), config.ollama_host, log_dir=log_dir_for(config))


def request_for(
    config: Config, role: str | RoleConfig, prompt: str, system: str | None = None
) -> ChatRequest:
    """A ChatRequest for a role: its model, the model's fixed num_ctx, temperature and three clocks."""
    r = config.role(role) if isinstance(role, str) else role
    return ChatRequest(
        model=r.model,
        prompt=prompt,
        system=system,
        temperature=r.temperature,
        num_ctx=config.num_ctx_for(r.model),
        num_predict=r.num_predict,
        first_token_timeout=r.timeouts.first_token,
        stall_timeout=r.timeouts.stall,
        total_timeout=r.timeouts.total,
        load_timeout=r.timeouts.load,
        token_scale=budget.Calibration.load(calibration_path(config)).scale(r.model),
        max_chars=config.max_reply_chars,
    )


def calibration_path(config: Config) -> Path:
    """Where the per-model token calibration lives: beside the hub.yaml cache in .git/ (not a task's
    state, and not watched), else in the handoff folder."""
    git_dir = config.repo_root / ".git"
    return (
        git_dir / "hub-token-calibration.json"
        if git_dir.is_dir()
        else config.handoff_dir / ".token-calibration.json"
    )


def with_remembered_prefix(config: Config, request: ChatRequest) -> ChatRequest:
    """Before a call: the request told how much of its prompt's start an earlier call (of any process)
    sent the model, so the worker does not take the server's cache hit for a cut prompt."""
    calibration = budget.Calibration.load(calibration_path(config))
    shared = calibration.shared_prefix(request.model, (request.system or "") + full_prompt(request))
    return replace(request, cached_chars=shared) if shared else request


def observe_call(config: Config, request: ChatRequest, generation: Generation) -> Generation:
    """After a call: a cut flagged only because the server had cached a prefix of an earlier prompt
    (its prompt_eval_count counts only what it evaluated) is no cut (a worker that was not told
    `cached_chars` flags it); a call the server counted and read whole calibrates the model's token
    ratio; the prompt is remembered for the next process, unless it was cut."""
    path = calibration_path(config)
    calibration = budget.Calibration.load(path)
    prompt = (request.system or "") + full_prompt(request)
    if generation.truncated:
        shared = calibration.shared_prefix(request.model, prompt)
        if shared:
            estimate = estimated_prompt_tokens(request)
            cached = budget.cached_tokens(prompt, shared)
            if not budget.truncated(generation.prompt_tokens, estimate, request.num_ctx, cached):
                log.info("bridge.cached_prefix", model=request.model, cached_chars=shared)
                generation = replace(generation, truncated=False)
    elif not generation.tokens_estimated:
        estimate = estimated_prompt_tokens(request)
        # A cached prefix lowers the count below the prompt's size: only a prompt new to the server
        # (sharing no remembered prefix) says how its tokenizer counts.
        if not calibration.shared_prefix(request.model, prompt):
            calibration.observe(request.model, estimate, generation.prompt_tokens)
    if not generation.truncated:
        # A cut prompt remembered would count as cached whole when it is sent again (a resume after the
        # context_overflow halt, in a new process): its cut could then never be seen again.
        calibration.remember(request.model, prompt)
    try:
        calibration.save(path)
    except OSError as exc:
        log.debug("bridge.calibration_unsaved", path=str(path), error=str(exc))
    return generation


__all__ = [
    "HUB_DIALECT",
    "NPM_DIALECT",
    "WorkerClient",
    "make_worker",
    "pick_dialect",
    "request_for",
    "same_model",
    "with_remembered_prefix",
]
