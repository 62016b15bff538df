"""What `hub.yaml` may hold: every key, its type and range, its default and meaning, in ONE declarative
table (`SCHEMA`).

EVERY NEW hub.yaml KEY GOES IN `SCHEMA` BELOW (one line, next to its siblings). A key that is not
listed there is refused as unknown, with a did-you-mean, so a typo (`role:` for `roles:`,
`num_ctc:`) can never be silently ignored again. The forms (hub/core/config_forms.py): `Str()`
(`choices=`, `plain_name=`), `Num(min, max, unit=)`, `Int(min, max, unit=)`, `Bool()`, `Command()`,
`Map({...}, required=)`, `MapOf(values)`, `ListOf(items)`, `AnyOf((form, form))`; a key with a default
declares it with its meaning, `.declared(default, help)`; for example
`"keep_branches": Bool().declared(False, "keep task/<task_id> after its merge")`,
`"parallel_tasks": Int(1, unit="tasks").declared(2, "tasks in flight")`,
`"sandbox": AnyOf((Str(choices=("auto", "required", "off")), Bool(), Map({"mode": ..., "network": Bool()})))`.
`config.py` then reads the (already checked) value into `Config`, a key left out taking its declared
`default(key)`, and `hub init` writes hub.yaml with the declared defaults (config_template.py).

`validate(raw)` is pure: it walks the parsed YAML against the table and returns every problem with the
key path it sits at. `locate(text, path)` finds the line of a path in the file's text (PyYAML's
composer, imported only when there is something to report). `config.py` turns the problems into one
`ConfigError` naming the file, the line, the key path and the expected form.

Hand-written rather than jsonschema or pydantic: importing either costs more than all of `hub status`
(see docs/ARCHITECTURE.md), and neither says "did you mean" or knows YAML lines. `None` (an empty
YAML value) means "use the default" for every key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hub.core.config_forms import (
    AnyOf,
    Bool,
    Command,
    Int,
    ListOf,
    Map,
    MapOf,
    Num,
    Path,
    Problem,
    Scalar,
    Spec,
    Str,
    did_you_mean,
)

# --- the table ---------------------------------------------------------------------------------------

ROLES = ("implementer", "local_reviewer", "judge")
BACKENDS = ("mcp", "ollama", "openai")
TRANSPORTS = ("inprocess", "stdio", "http", "sse")
SANDBOX_MODES = ("auto", "required", "off")
IMPLEMENTER_MODES = ("edit", "agent")  # issue 19: one answer of edits, or a loop of tool calls
# An MCP server's name goes into its tools' names (`mcp_<server>_<tool>`), which servers limit to these.
MCP_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
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
        if not MCP_NAME.fullmatch(name) or name in names:
            why = "given twice" if name in names else "not a plain name"
            problems.append(Problem((*at, "name"), f"'{name}' is {why}", MCP_NAME_FORM))
        names.append(name)
        if bool(server.get("command")) == bool(server.get("url")):
            problems.append(
                Problem(at, "needs exactly one of command and url", "command (stdio) or url (HTTP)")
            )
    return problems


def dotted(path: Path) -> str:
    """roles.implementer.model, workers[0].url, models["qwen2.5-coder:7b"].num_ctx"""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out or "(top level)"


def locate(text: str, path: Path, at_key: bool = False) -> int | None:
    """The 1-based line of `path` in the YAML `text` (of its key when `at_key`), or None."""
    import yaml

    try:
        node: Any = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == str(part):
                    line = key_node.start_mark.line if (last and at_key) else value_node.start_mark.line
                    if last and not at_key and not isinstance(value_node, yaml.ScalarNode):
                        line = key_node.start_mark.line
                    node = value_node
                    break
            else:
                return line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            return line + 1
    return line + 1


def yaml_error(path: Any, exc: Exception) -> str:
    """`hub.yaml:LINE: not valid YAML: ...`, naming the file where PyYAML says "<unicode string>"."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    return f"{where}: not valid YAML: " + str(exc).replace(
        "<unicode string>", getattr(path, "name", str(path))
    )


def render(problems: Sequence[Problem], source: str, text: str | None) -> str:
    """One line per problem: `file:line: key.path: what (expected: form)`."""
    lines = []
    for p in problems:
        line = locate(text, p.path, p.at_key) if text is not None else None
        where = f"{source}:{line}" if line else source
        expected = f" (expected {p.expected})" if p.expected else ""
        lines.append(f"{where}: {dotted(p.path)}: {p.problem}{expected}")
    return "\n".join(lines)


# --- the key reference -------------------------------------------------------------------------------


def reference(spec: Spec = SCHEMA, prefix: str = "") -> list[tuple[str, str]]:
    """Every key hub.yaml may hold, as (key path, its form in a few words), in the table's order: the
    key and type columns of README's key reference, which tests/core/test_config.py checks against this so
    the two cannot drift. `roles.<role>`: a mapping whose keys all take one mapping form; `workers[]`:
    a list of mappings."""
    rows: list[tuple[str, str]] = []
    if isinstance(spec, Map):
        forms = list(spec.fields.values())
        if len(forms) > 1 and isinstance(forms[0], Map) and all(form is forms[0] for form in forms):
            each = prefix.rsplit(".", 1)[-1].removesuffix("s")
            return reference(forms[0], f"{prefix}.<{each}>")
        for key, form in spec.fields.items():
            found = reference(form, f"{prefix}.{key}" if prefix else key)
            if key in spec.required:
                found[0] = (found[0][0], f"{found[0][1]}, required")
            rows += found
        return rows
    if isinstance(spec, MapOf) and isinstance(spec.values, Map):
        return reference(spec.values, f"{prefix}.<{prefix.rsplit('.', 1)[-1].removesuffix('s')}>")
    if isinstance(spec, ListOf) and isinstance(spec.items, Map):
        return reference(spec.items, f"{prefix}[]")
    rows.append((prefix, form_of(spec)))
    if isinstance(spec, AnyOf):
        for form in spec.forms:
            if isinstance(form, Map):
                rows += reference(form, prefix)
    return rows


def form_of(spec: Spec) -> str:
    """A value's form in a few words, for the key reference."""
    if isinstance(spec, Str):
        if spec.choices:
            return "/".join(spec.choices)
        return "file name" if spec.plain_name else "string"
    if isinstance(spec, Num):
        return spec.expected.removeprefix("a ").removeprefix("an ")
    if isinstance(spec, Command):
        return "command: string or list"
    if isinstance(spec, Scalar):
        return "string, number or boolean"
    if isinstance(spec, Bool):
        return "true/false"
    if isinstance(spec, AnyOf):
        return " or ".join("mapping (below)" if isinstance(f, Map) else form_of(f) for f in spec.forms)
    if isinstance(spec, MapOf):
        return f"mapping of name to {form_of(spec.values)}"
    if isinstance(spec, ListOf):
        return f"list of {form_of(spec.items)}"
    return "mapping"
