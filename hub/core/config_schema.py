"""What `hub.yaml` may hold: every key, its type and range, its default and meaning, in ONE declarative
table (`SCHEMA`).

EVERY NEW hub.yaml KEY GOES IN `SCHEMA` BELOW (one line, next to its siblings). A key that is not
listed there is refused as unknown, with a did-you-mean, so a typo (`role:` for `roles:`,
`num_ctc:`) can never be silently ignored again. The forms (below): `Str()`
(`choices=`, `plain_name=`), `Num(min, max, unit=)`, `Int(min, max, unit=)`, `Bool()`, `Command()`,
`Map({...}, required=)`, `MapOf(values)`, `ListOf(items)`, `AnyOf((form, form))`; a key with a default
declares it with its meaning, `.declared(default, help)`; for example
`"keep_branches": Bool().declared(False, "keep task/<task_id> after its merge")`,
`"parallel_tasks": Int(1, unit="tasks").declared(2, "tasks in flight")`,
`"sandbox": AnyOf((Str(choices=("auto", "required", "off")), Bool(), Map({"mode": ..., "network": Bool()})))`.
`config.py` then reads the (already checked) value into `Config`, a key left out taking its declared
`default(key)`, and `hub init` writes hub.yaml with the declared defaults (config_template.py).

`validate(raw)` is pure: it walks the parsed YAML against the table and returns every problem with the
key path it sits at. config_report.py (loaded only when there is something to report) finds the line
of a path in the file's text (`locate`, PyYAML's composer) and `config.py` turns the problems into one
`ConfigError` naming the file, the line, the key path and the expected form.

Hand-written rather than jsonschema or pydantic: importing either costs more than all of `hub status`
(see docs/ARCHITECTURE.md), and neither says "did you mean" or knows YAML lines. `None` (an empty
YAML value) means "use the default" for every key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Self

from hub.core import backends
from hub.core.notify_config import KINDS as NOTIFY_KINDS

Path = tuple[str | int, ...]


class Problem(NamedTuple):
    """One thing wrong in hub.yaml: where (a key path), what, and the form that was expected."""

    path: Path
    problem: str
    expected: str = ""
    at_key: bool = False  # the key itself is wrong (unknown): point at the key, not its value


class Spec:
    """A value's expected form. `check` returns the problems of one value (never raises).

    A form in the table is also its key's declaration (`declared`): the value a key left out takes, and
    what the key means. config.py's defaults, `hub init`'s hub.yaml (config_template.py) and README's key
    reference take them from here."""

    expected = "a value"
    default: Any = None  # None: no default, or one config.py works out (`project`: the folder's name)
    help = ""

    def declared(self, default: Any = None, help: str = "") -> Self:
        """This form as one key's declaration: a twin of it carrying the key's default and meaning (a
        form like SECONDS serves several keys, each with a default of its own)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(vars(self))
        twin.default, twin.help = default, help
        return twin

    def check(self, value: Any, path: Path) -> list[Problem]:
        raise NotImplementedError

    def wrong(self, value: Any, path: Path) -> list[Problem]:
        return [Problem(path, f"got {describe(value)}", self.expected)]


class Str(Spec):
    """A string; `choices` limits it to a few words, `plain_name` to a file name without folders."""

    def __init__(
        self, choices: tuple[str, ...] = (), plain_name: bool = False, non_empty: bool = True
    ) -> None:
        self.choices, self.plain_name, self.non_empty = choices, plain_name, non_empty

    @property
    def expected(self) -> str:  # type: ignore[override]
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return "a file name without '/'" if self.plain_name else "a string (quote it if YAML reads a number)"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, str):
            return self.wrong(value, path)
        if self.choices and value not in self.choices:
            hint = did_you_mean(value, self.choices)
            return [Problem(path, f"'{value}' is not allowed{hint}", self.expected)]
        if self.non_empty and not value.strip():
            return [Problem(path, "is empty", self.expected)]
        if self.plain_name and ("/" in value or "\\" in value or value in (".", "..")):
            return [Problem(path, f"'{value}' is a path", self.expected)]
        return []


class Num(Spec):
    """A number (an integer when `integer`), within [minimum, maximum] (> minimum when `above`); `unit`
    says what it counts."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        integer: bool = False,
        unit: str = "",
        above: bool = False,
    ) -> None:
        self.minimum, self.maximum, self.unit = minimum, maximum, unit
        self.integer, self.above = integer, above

    @property
    def expected(self) -> str:  # type: ignore[override]
        kind = "an integer" if self.integer else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.above else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        text = " ".join([kind, *([" and ".join(bounds)] if bounds else [])])
        return f"{text} ({self.unit})" if self.unit else text

    def check(self, value: Any, path: Path) -> list[Problem]:
        ok_type = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type) or not math.isfinite(value):
            return self.wrong(value, path)
        low = self.minimum
        if low is not None and (value <= low if self.above else value < low):
            return [Problem(path, f"{value:g} is too small", self.expected)]
        if self.maximum is not None and value > self.maximum:
            return [Problem(path, f"{value:g} is too large", self.expected)]
        return []


def Int(minimum: float | None = None, maximum: float | None = None, unit: str = "") -> Num:
    return Num(minimum, maximum, integer=True, unit=unit)


class Command(Spec):
    """A command line: a string (split on spaces) or a list of strings."""

    expected = "a command: a string, or a list of strings like [python, -m, hub, worker, serve]"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if isinstance(value, str) and value.strip():
            return []
        if isinstance(value, list) and value and all(isinstance(p, str | int | float) for p in value):
            return []
        return self.wrong(value, path)


class Scalar(Spec):
    """A string, number or boolean (an environment variable's value)."""

    expected = "a string, number or boolean"

    def check(self, value: Any, path: Path) -> list[Problem]:
        return [] if isinstance(value, str | int | float | bool) else self.wrong(value, path)


class Bool(Spec):
    """true or false (YAML also reads yes/no/on/off as booleans)."""

    expected = "true or false"

    def check(self, value: Any, path: Path) -> list[Problem]:
        return [] if isinstance(value, bool) else self.wrong(value, path)


class AnyOf(Spec):
    """One of several forms (e.g. `sandbox: off` or a mapping): the first form whose type fits decides;
    when none fits, all are named."""

    def __init__(self, forms: tuple[Spec, ...]) -> None:
        self.forms = forms

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(form.expected for form in self.forms)

    def check(self, value: Any, path: Path) -> list[Problem]:
        results = [form.check(value, path) for form in self.forms]
        if any(not problems for problems in results):
            return []
        # A form whose type fits (its problems lie deeper, or are about the value, not its type).
        for problems in results:
            if not all(p.path == path and p.problem.startswith("got ") for p in problems):
                return problems
        return [Problem(path, f"got {describe(value)}", self.expected)]


class Map(Spec):
    """A mapping with known keys; `required` keys must be present."""

    def __init__(
        self, fields: Mapping[str, Spec], required: tuple[str, ...] = (), what: str = "a mapping"
    ) -> None:
        self.fields, self.required, self.what = fields, required, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"{self.what} with keys {', '.join(self.fields)}"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for key, item in value.items():
            spec = self.fields.get(str(key))
            if spec is None:
                hint = did_you_mean(str(key), list(self.fields))
                known = ", ".join(self.fields)
                problems.append(
                    Problem((*path, str(key)), f"unknown key{hint}", f"one of {known}", at_key=True)
                )
            elif item is not None:
                problems += spec.check(item, (*path, str(key)))
        for key in self.required:
            if value.get(key) is None:
                problems.append(Problem((*path, key), "is missing", self.fields[key].expected))
        return problems


class MapOf(Spec):
    """A mapping from names the user chooses (model names, variable names) to values of one form."""

    def __init__(self, values: Spec, what: str = "a mapping") -> None:
        self.values, self.what = values, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for key, item in value.items():
            if item is not None:
                problems += self.values.check(item, (*path, str(key)))
        return problems


class ListOf(Spec):
    """A YAML list (`- item` lines) of values of one form."""

    def __init__(self, items: Spec, what: str = "a list") -> None:
        self.items, self.what = items, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, list):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for index, item in enumerate(value):
            if item is None:
                problems.append(Problem((*path, index), "is empty", self.items.expected))
            else:
                problems += self.items.check(item, (*path, index))
        return problems


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib  # here, not at the top: only a wrong hub.yaml asks

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def describe(value: Any) -> str:
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }
    shown = repr(value) if not isinstance(value, dict | list) or len(repr(value)) < 40 else ""
    return f"{kind.get(type(value), type(value).__name__)} {shown}".rstrip()


# --- the table ---------------------------------------------------------------------------------------

ROLES = ("implementer", "local_reviewer", "judge")
BACKENDS = backends.NAMES  # the backend table's (hub/core/backends.py): a new backend is one line there
TRANSPORTS = ("inprocess", "stdio", "http", "sse")
SANDBOX_MODES = ("auto", "required", "off")
IMPLEMENTER_MODES = ("edit", "agent")  # issue 19: one answer of edits, or a loop of tool calls
# An MCP server's name goes into its tools' names (`mcp_<server>_<tool>`), which servers limit to these.
MCP_NAME = r"[A-Za-z0-9_-]{1,40}"  # compiled when used: a regex costs every command ~0.2 ms to compile
MCP_NAME_FORM = (
    "a name of its own: letters, digits, _ and - (it goes into the tool names mcp_<server>_<tool>)"
)

SECONDS = Num(0, above=True, unit="seconds")
TIMEOUTS = Map(
    {
        "load": SECONDS.declared(600, "longest wait for the model to load"),
        "first_token": SECONDS.declared(180, "longest wait for the first token"),
        "stall": SECONDS.declared(60, "longest gap between tokens"),
        "total": SECONDS.declared(900, "longest whole answer"),
    },
    what="clocks in seconds, e.g. {load: 600, first_token: 180, stall: 60, total: 900},",
)
ROLE = Map(
    {
        "model": Str().declared("qwen2.5-coder:7b", "the model playing the role (`HUB_<ROLE>_MODEL`)"),
        "backend": Str(choices=BACKENDS).declared("mcp", "how the model is reached (`HUB_<ROLE>_BACKEND`)"),
        "worker": Str().declared("hub", "the `workers[].name` an `mcp` backend goes through"),
        "timeouts": TIMEOUTS,
        "temperature": Num(0, 2).declared(0.2, "sampling temperature"),
        # Its default is the role's: config.DEFAULT_NUM_PREDICT.
        "num_predict": Int(1, unit="tokens the model may write"),
        "mode": Str(choices=IMPLEMENTER_MODES).declared(
            "edit",
            "the implementer's only: one answer of edits, or agent mode's loop of tool calls (see Agent mode)",
        ),
    }
)
MCP_SERVER = Map(
    {
        "name": Str(),
        "command": Command(),
        "args": ListOf(Scalar(), what="a list of arguments"),
        "env": MapOf(Scalar(), what="a mapping of environment variables"),
        "url": Str(),
        "allow": ListOf(Str(), what="a list of the server's tool names the agent may call"),
        "timeout": SECONDS,
    },
    required=("name",),
    what="an MCP server: a mapping with name, command (or url) and allow",
)
WORKER = Map(
    {
        "name": Str(),
        "transport": Str(choices=TRANSPORTS).declared(
            "stdio",
            "how the hub talks to it; `inprocess`: the hub's own worker inside the hub's process (no "
            "command, url or env)",
        ),
        "command": Command(),
        "url": Str(),
        "env": MapOf(Scalar(), what="a mapping of environment variables"),
        "num_ctx": Int(256, unit="tokens").declared(
            4096, "the window Ollama applies when the worker cannot pass `num_ctx` (npm ollama-mcp)"
        ),
    },
    required=("name",),
    what="a worker server: a mapping",
)

SCHEMA = Map(
    {
        "project": Str(),
        "handoff_dir": Str(),
        "halt_file": Str(plain_name=True).declared(
            "ERIK_HALT.md", "the file a halted task writes for a person (`HUB_HALT_FILE`)"
        ),
        "ollama": Map(
            {
                "host": Str().declared("http://127.0.0.1:11434", "the Ollama server (`OLLAMA_HOST`)"),
                "slots": Int(1, unit="generations the server runs at once").declared(
                    1, "Ollama's `OLLAMA_NUM_PARALLEL`: never more model calls at once per server"
                ),
                "keep_alive": AnyOf((Num(unit="seconds; negative keeps the model loaded"), Str())).declared(
                    "30m",
                    "how long Ollama keeps a model loaded after a call (Ollama's `keep_alive`: `10m`, `1h`, "
                    "`-1` for good, `0` to unload at once)",
                ),
                "hosts": ListOf(
                    AnyOf(
                        (Str(), Map({"host": Str(), "slots": Int(1, unit="generations")}, required=("host",)))
                    ),
                    what="a list of servers, each a URL or {host: URL, slots: N}",
                ),
            }
        ),
        "openai": Map(
            {
                "base_url": Str().declared(
                    "http://127.0.0.1:8000/v1", "an OpenAI-compatible server (`HUB_OPENAI_BASE_URL`)"
                ),
                "api_key_env": Str().declared(
                    "OPENAI_API_KEY", "the environment variable holding its API key"
                ),
            }
        ),
        "roles": Map({name: ROLE for name in ROLES}),
        "models": MapOf(
            Map({"num_ctx": Int(256, unit="tokens")}), what="a mapping of model name to {num_ctx: N}"
        ),
        # The README's value: a typical source file (~20 KB, ~5,300 estimated tokens), the instructions and
        # a whole-file answer (num_predict 6144) fit; 8192 did not hold a 46 KB file or its answer.
        "default_num_ctx": Int(256, unit="tokens").declared(
            16384, "the context window of models not under `models`"
        ),
        "workers": ListOf(
            WORKER, what="a list of worker servers, each '- name: ...' with transport, command"
        ),
        "judge": Map({"command": Str(), "backend": Str(choices=BACKENDS)}),
        "acceptance_timeout_seconds": SECONDS.declared(300, "each acceptance command's clock"),
        "limits": Map(
            {
                "max_changed_files": Int(1, unit="files").declared(
                    20, "a change touching more files halts the task"
                ),
                "max_reply_chars": Int(1000, unit="characters one model reply may hold").declared(
                    400_000, "a longer reply is refused"
                ),
                "global_timeout_hours": Num(0, above=True, unit="hours").declared(4, "a new task's deadline"),
                "server_wait_minutes": Num(0, unit="minutes").declared(
                    30, "how long an unreachable model server is waited out"
                ),
                "parallel_tasks": Int(1, unit="tasks").declared(
                    2, "tasks in flight and phases at once (`HUB_PARALLEL_TASKS`, `hub watch --jobs N`)"
                ),
                # A new task's own clocks and rebuttal limit (its contract's `limits`): issue 27.
                "timeout_minutes": Map(
                    {
                        "implementer": Num(0, above=True, unit="minutes"),
                        "local_review": Num(0, above=True, unit="minutes"),
                        "judge": Num(0, above=True, unit="minutes"),
                    }
                ),
                "max_rebuttals": Int(0, unit="rebuttals"),
            }
        ),
        "worktrees_dir": Str(),
        "keep_branches": Bool().declared(False, "keep `task/<task_id>` after its merge"),
        # Off until a real model's replies with and without it are measured (issue 34): the prompt grows.
        "edit_map": Bool().declared(
            False, "edit mode shows a task's named files with the map of the files linked to them (if any)"
        ),
        # Issue 11: where acceptance commands run (hub/safety/sandbox.py); `off` reads as false in YAML.
        "sandbox": AnyOf(
            (
                Str(choices=SANDBOX_MODES),
                Bool(),
                Map(
                    {
                        "mode": AnyOf((Str(choices=SANDBOX_MODES), Bool())),
                        "network": Bool(),
                        "writable_paths": ListOf(Str(), what="a list of folders"),
                        "read_paths": ListOf(Str(), what="a list of folders"),
                        "limits": Map(
                            {
                                "processes": Int(1, unit="processes"),
                                "memory_mb": Int(1, unit="MiB"),
                                "disk_mb": Int(1, unit="MiB"),
                            }
                        ),
                    }
                ),
            )
        ),
        "rules": Map({"catalog_url": Str()}),
        # Issue 19: agent mode's bounds, and the MCP servers whose allowed tools it may call.
        "agent": Map(
            {
                "max_turns": Int(1, unit="turns"),
                "max_tokens": Int(1000, unit="tokens in and out over one attempt"),
                "max_repeats": Int(1, unit="identical calls"),
            }
        ),
        "mcp_servers": ListOf(
            MCP_SERVER, what="a list of MCP servers, each '- name: ...' with command or url"
        ),
        # Issue 37: a word to the person when a task merges, halts or waits for a verdict (phases/notify.py).
        "notify": Map(
            {
                "urls": ListOf(Str(), what="a list of apprise URLs (ntfy://, mailto://, slack://, ...)"),
                "command": Command(),
                "events": ListOf(Str(choices=NOTIFY_KINDS), what="a list of events"),
                "timeout": SECONDS.declared(
                    10, "one notification attempt's clock (a failed one is retried once)"
                ),
            }
        ),
    },
    what="hub.yaml: a mapping",
)


def declaration(key: str) -> Spec:
    """The table's form of one key, as README's key reference names it: `limits.parallel_tasks`,
    `roles.<role>.timeouts.load`, `workers[].num_ctx`."""
    spec: Spec = SCHEMA
    for part in key.split("."):
        name = part.removesuffix("[]")
        if isinstance(spec, AnyOf):
            spec = next(form for form in spec.forms if isinstance(form, Map))
        if isinstance(spec, Map):
            spec = next(iter(spec.fields.values())) if name.startswith("<") else spec.fields[name]
        elif isinstance(spec, MapOf):
            spec = spec.values
        else:
            raise KeyError(key)
        if part.endswith("[]"):
            assert isinstance(spec, ListOf), key
            spec = spec.items
    return spec


def default(key: str) -> Any:
    """The value hub.yaml's `key` takes when left out (`declaration`)."""
    return declaration(key).default


# --- checking ----------------------------------------------------------------------------------------


def validate(raw: Any) -> list[Problem]:
    """Every problem in a parsed hub.yaml: the table's, then those between keys. Pure."""
    problems = SCHEMA.check(raw, ())
    if problems or not isinstance(raw, dict):
        return problems
    return cross_checks(raw)


def cross_checks(raw: Mapping[str, Any]) -> list[Problem]:
    """What one key alone cannot say: a worker's transport needs a command or a url; a role names a
    worker that exists."""
    problems: list[Problem] = []
    names = ["hub"]
    for index, worker in enumerate(raw.get("workers") or []):
        names.append(str(worker["name"]))
        transport = worker.get("transport") or "stdio"
        if transport == "inprocess":
            for key in ("command", "url", "env"):
                if worker.get(key):
                    why = "an inprocess worker is the hub's own, in its process: it takes no command, url or env"
                    problems.append(Problem(("workers", index, key), "is not used", why))
            continue
        if transport == "stdio" and not worker.get("command"):
            problems.append(
                Problem(("workers", index, "command"), "is missing", "a stdio worker needs a command")
            )
        if transport != "stdio" and not worker.get("url"):
            problems.append(
                Problem(("workers", index, "url"), "is missing", f"an {transport} worker needs a url")
            )
    problems += _mcp_checks(raw)
    for role, settings in (raw.get("roles") or {}).items():
        if (settings or {}).get("mode") == "agent" and role != "implementer":
            problems.append(
                Problem(("roles", role, "mode"), "agent mode is the implementer's only", "edit, or no mode")
            )
        wanted = (settings or {}).get("worker")
        if wanted is not None and wanted not in names:
            hint = did_you_mean(wanted, names)
            problems.append(
                Problem(
                    ("roles", role, "worker"),
                    f"no worker server named '{wanted}'{hint}",
                    "one of " + ", ".join(names),
                )
            )
    return problems


def _mcp_checks(raw: Mapping[str, Any]) -> list[Problem]:
    """An MCP server has a plain name of its own, and exactly one of a command (stdio) or a url (HTTP)."""
    problems: list[Problem] = []
    names: list[str] = []
    for index, server in enumerate(raw.get("mcp_servers") or []):
        name, at = str(server["name"]), ("mcp_servers", index)
        if not re.fullmatch(MCP_NAME, name) or name in names:
            why = "given twice" if name in names else "not a plain name"
            problems.append(Problem((*at, "name"), f"'{name}' is {why}", MCP_NAME_FORM))
        names.append(name)
        if bool(server.get("command")) == bool(server.get("url")):
            problems.append(
                Problem(at, "needs exactly one of command and url", "command (stdio) or url (HTTP)")
            )
    return problems
