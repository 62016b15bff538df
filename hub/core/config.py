"""`hub.yaml` plus the environment, read once into one frozen `Config`.

Precedence: explicit arguments (CLI flags) > environment (`OLLAMA_HOST`, `HUB_*`) > hub.yaml > defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from hub.core import config_schema
from hub.core.agent_config import AgentSettings, MCPServer, agent_settings, mcp_servers
from hub.core.atomic import write_atomic
from hub.core.config_schema import BACKENDS, ROLES, TRANSPORTS, default
from hub.core.errors import ConfigError
from hub.core.notify_config import NotifySettings, notify_settings
from hub.core.sandbox_config import SandboxMode, SandboxSettings, sandbox_settings
from hub.core.text import and_more

# Every default below is the one config_schema declares for its hub.yaml key.
# The changed-files breaker's, for a contract that names none: hub.yaml's limits.max_changed_files.
DEFAULT_MAX_CHANGED_FILES: int = default("limits.max_changed_files")


CONFIG_FILE = "hub.yaml"
MAX_CONFIG_BYTES = 1024 * 1024
__all__ = [
    "BACKENDS",
    "CONFIG_FILE",
    "ROLES",
    "TRANSPORTS",
    "Config",
    "ConfigError",
    "SandboxMode",
    "SandboxSettings",
    "load_config",
]

DEFAULT_MODEL: str = default("roles.<role>.model")
# What a halt file's name may hold (letters, digits, . _ -; 1 to 100 of them), checked on every command
# without a regex, whose compiling alone would cost each one ~0.2 ms.
HALT_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
DEFAULT_NUM_CTX: int = default("default_num_ctx")
# Room kept for each role's answer (Ollama's num_predict): the implementer writes whole files.
DEFAULT_NUM_PREDICT = {"implementer": 6144, "local_reviewer": 2048, "judge": 4096}
DEFAULT_SERVER_WAIT_MINUTES = float(default("limits.server_wait_minutes"))
DEFAULT_LOAD_SECONDS = float(default("roles.<role>.timeouts.load"))
# The window Ollama uses when a worker cannot pass num_ctx (npm ollama-mcp): its default.
DEFAULT_SERVER_NUM_CTX: int = default("workers[].num_ctx")

# The records below are NamedTuples, not dataclasses: every `hub status` builds them, and a dataclass
# costs 0.3 ms to define and its module 5 ms to import; with the others on status's path, a third of its
# start-up (issue 25; docs/ARCHITECTURE.md, "Packages and what each may import"). They are as immutable
# and as checked by mypy; `_replace` is dataclasses.replace.
NOTHING: Mapping[str, Any] = MappingProxyType({})  # the default of every mapping field: shared, read-only


class Timeouts(NamedTuple):
    """The three clocks of a model call, in seconds."""

    first_token: float = float(default("roles.<role>.timeouts.first_token"))
    stall: float = float(default("roles.<role>.timeouts.stall"))
    total: float = float(default("roles.<role>.timeouts.total"))
    load: float = DEFAULT_LOAD_SECONDS


class RoleConfig(NamedTuple):
    """How one role (implementer, local_reviewer, judge) reaches its model."""

    name: str
    model: str
    backend: str = default("roles.<role>.backend")
    worker: str = default("roles.<role>.worker")
    timeouts: Timeouts = Timeouts()
    temperature: float = default("roles.<role>.temperature")
    num_predict: int | None = None
    mode: str = default(
        "roles.<role>.mode"
    )  # the implementer's: "edit" (one answer of edits) or "agent" (tool calls; issue 19)


class WorkerServer(NamedTuple):
    """An MCP worker server the hub may talk to."""

    name: str
    transport: str = default("workers[].transport")
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = NOTHING
    num_ctx: int = DEFAULT_SERVER_NUM_CTX  # the window in force when the worker cannot pass num_ctx


class JudgeConfig(NamedTuple):
    """Who gives the verdict when `hub run-judge` runs."""

    command: str | None = None
    backend: str | None = None


class Config(NamedTuple):
    """Everything configurable, resolved."""

    repo_root: Path
    handoff_dir: Path
    project: str = "hub"
    halt_file: str = default("halt_file")
    ollama_host: str = default("ollama.host")
    openai_base_url: str = default("openai.base_url")
    openai_api_key: str | None = None
    roles: Mapping[str, RoleConfig] = NOTHING
    num_ctx: Mapping[str, int] = NOTHING
    default_num_ctx: int = DEFAULT_NUM_CTX
    workers: tuple[WorkerServer, ...] = ()
    judge: JudgeConfig = JudgeConfig()
    acceptance_timeout_seconds: float = float(default("acceptance_timeout_seconds"))
    max_changed_files: int = DEFAULT_MAX_CHANGED_FILES
    max_reply_chars: int = default("limits.max_reply_chars")
    global_timeout_hours: float = float(default("limits.global_timeout_hours"))
    task_limits: Mapping[str, Any] = NOTHING  # limits.timeout_minutes, max_rebuttals
    rules_catalog_url: str | None = None
    mcp_token: str | None = None
    server_wait_minutes: float = DEFAULT_SERVER_WAIT_MINUTES
    sandbox: SandboxSettings = SandboxSettings()
    agent: AgentSettings = AgentSettings()
    mcp_servers: tuple[MCPServer, ...] = ()
    notify: NotifySettings = NotifySettings()
    # Where hub.yaml, prompts and rules were read: the user's checkout (see hub/safety/trust.py). None: repo_root.
    config_root: Path | None = None

    @property
    def trust_root(self) -> Path:
        return self.config_root or self.repo_root

    # Where each task's git worktree lives; None: inside the git directory, where a test runner, a
    # search or an IDE opened on the user's checkout does not walk (see `worktrees_root`).
    worktrees_dir: Path | None = None
    keep_branches: bool = default("keep_branches")
    edit_map: bool = default("edit_map")
    parallel_tasks: int = default("limits.parallel_tasks")
    # The model servers and how many generations each runs at once (Ollama's OLLAMA_NUM_PARALLEL).
    # Empty: `ollama_host` alone, with `ollama_slots`.
    ollama_slots: int = default("ollama.slots")
    ollama_hosts: tuple[tuple[str, int], ...] = ()
    # How long Ollama keeps a model loaded after a call (`keep_alive`: "30m", seconds, -1 for good).
    ollama_keep_alive: str | float = default("ollama.keep_alive")

    def model_servers(self) -> tuple[tuple[str, int], ...]:
        """(url, slots) of every model server a call may go to."""
        return self.ollama_hosts or ((self.ollama_host, self.ollama_slots),)

    def role(self, name: str) -> RoleConfig:
        try:
            return self.roles[name]
        except KeyError:
            raise ConfigError(f"{CONFIG_FILE}: roles.{name}: no such role") from None

    def judge_role(self) -> RoleConfig:
        """The judge's role; `judge.backend`, when set, says which backend reaches its model."""
        role = self.role("judge")
        return role._replace(backend=self.judge.backend) if self.judge.backend else role

    def num_ctx_for(self, model: str) -> int:
        return self.num_ctx.get(model, self.default_num_ctx)

    def worker_server(self, name: str) -> WorkerServer:
        for server in self.workers:
            if server.name == name:
                return server
        known = ", ".join(s.name for s in self.workers) or "none"
        raise ConfigError(f"{CONFIG_FILE}: workers: no worker server named '{name}' (configured: {known})")


# Every HUB_* variable agent-hub reads, or sets for a judge command (README, "Configuration").
ENV_NAMES = frozenset(
    {
        "HUB_HANDOFF_DIR",
        "HUB_PROJECT",
        "HUB_HALT_FILE",
        "HUB_OPENAI_BASE_URL",
        "HUB_JUDGE_COMMAND",
        "HUB_MCP_TOKEN",
        "HUB_SANDBOX",
        "HUB_PARALLEL_TASKS",
        "HUB_LOG_FORMAT",
        "HUB_LOG_LEVEL",
        "HUB_TEST_CRASH_AT",
        "HUB_JUDGE_REPORT",
        "HUB_REVIEW_REQUEST",
        "HUB_TASK_ID",
        "HUB_WATCH_INTERVAL",  # scripts/watcher.sh
    }
    | {f"HUB_{role.upper()}_{what}" for role in ROLES for what in ("MODEL", "BACKEND")}
)


# The model servers' variables the hub reads too, and the server's own ones near them (not typos).
SERVER_ENV_NAMES = frozenset({"OLLAMA_HOST", "OPENAI_API_KEY"})
SERVERS_OWN_NAMES = frozenset({"OLLAMA_MODELS", "OLLAMA_ORIGINS", "OLLAMA_NOHISTORY", "OPENAI_BASE_URL"})


def mistyped_env(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, the name meant) for each HUB_* variable set that agent-hub does not read but that is a typo
    away from one it does: ignored in silence, it would leave the person's setting unused. Other HUB_*
    names are not ours to judge (GitHub's `hub` reads HUB_VERBOSE and HUB_PROTOCOL). The same for the
    servers' OLLAMA_HOST and OPENAI_API_KEY (an OLLAMA_HOTS leaves the hub on the default server)."""
    unknown = sorted(name for name in env if name.startswith("HUB_") and name not in ENV_NAMES)
    servers = sorted(
        name
        for name in env
        if name[:3] in ("OLL", "OLA", "OPE") and name not in SERVER_ENV_NAMES | SERVERS_OWN_NAMES
    )
    if not unknown and not servers:
        return []

    import difflib  # here, not at the top: only a name the hub does not read asks

    found = []
    for names, known in ((unknown, ENV_NAMES), (servers, SERVER_ENV_NAMES)):
        for name in names:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            if close:
                found.append((name, close[0]))
    return sorted(found)


def normalize_ollama_host(value: str) -> str:
    """Accept OLLAMA_HOST the way Ollama does: `host`, `host:port`, or a URL."""
    value = value.strip().rstrip("/")
    if not value:
        return str(default("ollama.host"))
    if "://" not in value:
        value = "http://" + value
    scheme, rest = value.split("://", 1)
    host = rest.split("/", 1)[0]
    if ":" not in host.rsplit("]", 1)[-1]:
        rest = host + ":11434" + rest[len(host) :]
    if rest.startswith("0.0.0.0"):
        rest = "127.0.0.1" + rest[len("0.0.0.0") :]
    return f"{scheme}://{rest}"


def default_yaml(project: str, model: str = DEFAULT_MODEL) -> str:
    """The hub.yaml `hub init` writes (hub/core/config_template.py)."""
    from hub.core.config_template import render  # here, not at the top: only `hub init` writes one

    return render(project, model, DEFAULT_NUM_PREDICT)


def load_config(
    repo_root: Path,
    handoff_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Read `<repo_root>/hub.yaml` (optional) and the environment into a Config.

    The file is checked against `config_schema.SCHEMA` first: any unknown key or bad value is one
    ConfigError listing every problem with its line, key path and expected form."""
    env = os.environ if env is None else env
    path = repo_root / CONFIG_FILE
    raw = read_yaml(path) if path.exists() else {}
    check(raw, path)  # the cached copy too: a newer hub may know fewer keys
    return _from_raw(raw, repo_root, handoff_dir, env, str(path))


def config_from_raw(raw: dict[str, Any], path: Path, env: Mapping[str, str] | None = None) -> Config:
    """The Config a repository would read from `raw` as its hub.yaml (`path` names it in errors): `hub
    eval` checks the configuration under test before it makes the repository it goes into."""
    check(raw, path)
    return _from_raw(raw, path.parent, None, os.environ if env is None else env, str(path))


def check(raw: Any, path: Path) -> None:
    """Raise one ConfigError naming every problem in hub.yaml (line, key path, expected form)."""
    problems = config_schema.validate(raw)
    if not problems:
        return
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    from hub.core.config_report import render  # here, not at the top: only a bad hub.yaml is reported

    shown = render(problems[:20], str(path), text)
    more = f"\n...{and_more(len(problems), 20)}" if len(problems) > 20 else ""
    head = f"{path}: {len(problems)} problems:\n" if len(problems) > 1 else ""
    raise ConfigError(head + shown + more, hint="correct them and run again" if len(problems) > 1 else "")


def read_yaml(path: Path) -> dict[str, Any]:
    """hub.yaml as a mapping, through a JSON copy in .git/ keyed on its mtime and size.

    Importing PyYAML costs ~30 ms of every command (its package loads the dumper too); the copy
    lets `hub status` skip it, the way a .pyc lets Python skip compiling.
    """
    cache = path.parent / ".git" / "hub-yaml-cache.json"
    try:
        stat = path.stat()
        key = [stat.st_mtime_ns, stat.st_size]
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("key") == key and isinstance(cached.get("raw"), dict):
            return dict(cached["raw"])
    except (OSError, ValueError, AttributeError):
        pass
    import yaml

    try:
        # Bounded before anything parses it (a 22 MB hub.yaml kept `hub next` busy over 180 s); a bigger
        # one is never cached, so this is the one read that must refuse it.
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: over {MAX_CONFIG_BYTES:,} bytes, more than a hub.yaml may hold (a configuration "
                "is a few kilobytes): is this the right file?"
            )
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    try:
        loaded = yaml.load(text, Loader=_unique_keys_loader())
    except yaml.YAMLError as exc:
        from hub.core.config_report import yaml_error

        raise ConfigError(yaml_error(path, exc)) from None
    except _DuplicateKey as exc:
        raise ConfigError(
            f"{path}:{exc.line}: {exc.key}: duplicate key (YAML would silently keep only the last one)"
        ) from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level (key: value lines)")
    raw = loaded or {}
    check(raw, path)  # a bad file is never cached, and nothing is written for it
    # Like git's "racily clean" rule: a file changed within the mtime granularity of some file
    # systems could change again unseen, so it is not cached until it has been still a while.
    if cache.parent.is_dir() and time.time() - stat.st_mtime > 2:
        # An unwritable .git, or YAML values JSON cannot hold (dates): parse each time.
        with contextlib.suppress(OSError, TypeError, ValueError):
            write_atomic(cache, json.dumps({"key": key, "raw": raw}))
    return raw


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line


def _unique_keys_loader() -> Any:
    """PyYAML's safe loader, refusing a key given twice in one mapping (two `roles:` sections would
    otherwise leave only the second, silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str | int | float | bool | None):
                    continue  # an unhashable key: the schema refuses it as unknown
                if key in seen:
                    raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return Loader


def _from_raw(
    raw: dict[str, Any],
    repo_root: Path,
    handoff_dir: Path | None,
    env: Mapping[str, str],
    source: str,
) -> Config:
    """A Config from a hub.yaml that passed `check` (every type and range is already right)."""

    def section(name: str) -> dict[str, Any]:
        return raw.get(name) or {}

    if handoff_dir is None:
        handoff_dir = Path(env.get("HUB_HANDOFF_DIR") or raw.get("handoff_dir") or repo_root / "_handoff")
        if not handoff_dir.is_absolute():
            handoff_dir = repo_root / handoff_dir

    ollama_host = normalize_ollama_host(env.get("OLLAMA_HOST") or given(raw, "ollama.host"))
    api_key_env = given(raw, "openai.api_key_env")
    num_ctx = {
        str(model): settings["num_ctx"]
        for model, settings in section("models").items()
        if settings and settings.get("num_ctx") is not None
    }
    raw_roles = section("roles")
    roles = {name: _role(name, raw_roles.get(name) or {}, env, source) for name in ROLES}

    workers = [_worker(w) for w in raw.get("workers") or []]
    if not any(w.name == "hub" for w in workers):
        workers.append(WorkerServer(name="hub", transport="inprocess"))

    judge = section("judge")
    limits = section("limits")
    # The schema checks hub.yaml's halt_file; HUB_HALT_FILE bypasses it, and must not climb out either.
    halt_file = str(env.get("HUB_HALT_FILE") or given(raw, "halt_file"))
    if not 0 < len(halt_file) <= 100 or not HALT_NAME_CHARS.issuperset(halt_file) or halt_file in (".", ".."):
        raise ConfigError(
            f"{source}: halt_file: '{halt_file}' must be a file name in the handoff folder "
            "(letters, digits, . _ -; no folder)"
        )
    return Config(
        repo_root=repo_root,
        handoff_dir=handoff_dir,
        project=str(env.get("HUB_PROJECT") or raw.get("project") or repo_root.name or "hub"),
        halt_file=halt_file,
        ollama_host=ollama_host,
        openai_base_url=str(env.get("HUB_OPENAI_BASE_URL") or given(raw, "openai.base_url")),
        openai_api_key=env.get(str(api_key_env)) or None,
        roles=roles,
        num_ctx=num_ctx,
        default_num_ctx=int(given(raw, "default_num_ctx")),
        workers=tuple(workers),
        judge=JudgeConfig(
            command=env.get("HUB_JUDGE_COMMAND") or judge.get("command"), backend=judge.get("backend")
        ),
        acceptance_timeout_seconds=float(given(raw, "acceptance_timeout_seconds")),
        max_changed_files=int(given(raw, "limits.max_changed_files")),
        max_reply_chars=int(given(raw, "limits.max_reply_chars")),
        global_timeout_hours=float(given(raw, "limits.global_timeout_hours")),
        task_limits={k: limits[k] for k in ("timeout_minutes", "max_rebuttals") if limits.get(k) is not None},
        rules_catalog_url=section("rules").get("catalog_url"),
        mcp_token=env.get("HUB_MCP_TOKEN") or None,
        sandbox=sandbox_settings(raw.get("sandbox"), env.get("HUB_SANDBOX"), repo_root, source),
        server_wait_minutes=float(given(raw, "limits.server_wait_minutes")),
        ollama_slots=_positive_int(given(raw, "ollama.slots", absent=True), "ollama.slots", source),
        ollama_hosts=_hosts(section("ollama"), source),
        ollama_keep_alive=given(raw, "ollama.keep_alive", absent=True),
        worktrees_dir=_worktrees_dir(raw.get("worktrees_dir"), repo_root, source),
        keep_branches=_bool(given(raw, "keep_branches", absent=True), "keep_branches", source),
        edit_map=_bool(given(raw, "edit_map", absent=True), "edit_map", source),
        parallel_tasks=_env_int(env, "HUB_PARALLEL_TASKS")
        or _positive_int(given(raw, "limits.parallel_tasks", absent=True), "limits.parallel_tasks", source),
        agent=agent_settings(section("agent")),
        mcp_servers=mcp_servers(raw.get("mcp_servers")),
        notify=notify_settings(section("notify"), float(given(raw, "notify.timeout"))),
    )


def given(raw: Mapping[str, Any], key: str, absent: bool = False) -> Any:
    """hub.yaml's value at `key` (dotted, e.g. `limits.server_wait_minutes`), or the key's declared
    default when it is left out or empty (null: "use the default", as config_schema reads it). With
    `absent`, only a key left out takes the default, and a null is passed on: the keys read so have
    always refused it (`ollama.slots: null` is an error) or kept it (`ollama.keep_alive`)."""
    value: Any = raw
    for part in key.split("."):
        if not isinstance(value, Mapping) or (absent and part not in value):
            return default(key)
        value = value.get(part)
    return default(key) if value is None and not absent else value


def _hosts(ollama: dict[str, Any], source: str) -> tuple[tuple[str, int], ...]:
    """`ollama.hosts`: a pool of servers, each a URL or `{host: URL, slots: N}` (slots default ollama.slots)."""
    raw = ollama.get("hosts")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: ollama.hosts: expected a list of servers")
    default_slots = ollama.get("slots", default("ollama.slots"))
    hosts = []
    for i, item in enumerate(raw):
        where = f"ollama.hosts[{i}]"
        if isinstance(item, str):
            url, slots = item, default_slots
        elif isinstance(item, dict) and isinstance(item.get("host"), str):
            url, slots = item["host"], item.get("slots", default_slots)
        else:
            raise ConfigError(f"{source}: {where}: expected a URL or {{host: URL, slots: N}}")
        hosts.append((normalize_ollama_host(url), _positive_int(slots, f"{where}.slots", source)))
    return tuple(hosts)


def _worktrees_dir(value: Any, repo_root: Path, source: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{source}: worktrees_dir: expected a folder path")
    path = Path(value).expanduser()
    return path if path.is_absolute() else repo_root / path


def _bool(value: Any, key: str, source: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: {key}: expected true or false")
    return value


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    """A whole number >= 1 from the environment; None when unset; a ConfigError naming it when not one."""
    value = env.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"{name}={value!r} (environment): expected a whole number >= 1")
    return int(value)


def _positive_int(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{source}: {key}: expected an integer >= 1")
    return value


def _role(name: str, raw: dict[str, Any], env: Mapping[str, str], source: str) -> RoleConfig:
    env_key = f"HUB_{name.upper()}_"
    backend = env.get(env_key + "BACKEND") or raw.get("backend") or default("roles.<role>.backend")
    if backend not in BACKENDS:
        raise ConfigError(f"{env_key}BACKEND: '{backend}' is not one of {', '.join(BACKENDS)}")
    t = raw.get("timeouts") or {}
    defaults = Timeouts()
    timeouts = Timeouts(
        first_token=float(t.get("first_token") or defaults.first_token),
        stall=float(t.get("stall") or defaults.stall),
        total=float(t.get("total") or defaults.total),
        load=float(t.get("load") or defaults.load),
    )
    temperature = raw.get("temperature")
    return RoleConfig(
        name=name,
        model=str(env.get(env_key + "MODEL") or raw.get("model") or DEFAULT_MODEL),
        backend=str(backend),
        worker=str(raw.get("worker") or default("roles.<role>.worker")),
        timeouts=timeouts,
        temperature=float(default("roles.<role>.temperature") if temperature is None else temperature),
        # null keeps a quarter of num_ctx for the answer (hub.workers.budget)
        num_predict=raw.get("num_predict", DEFAULT_NUM_PREDICT.get(name)),
        mode=str(raw.get("mode") or default("roles.<role>.mode")),
    )


def _worker(raw: dict[str, Any]) -> WorkerServer:
    command = raw.get("command") or []
    if isinstance(command, str):
        command = command.split()
    command = [sys.executable if part == "python" else str(part) for part in command]
    return WorkerServer(
        name=str(raw["name"]),
        transport=raw.get("transport") or default("workers[].transport"),
        command=tuple(command),
        url=raw.get("url"),
        env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
        num_ctx=int(raw.get("num_ctx") or DEFAULT_SERVER_NUM_CTX),
    )
