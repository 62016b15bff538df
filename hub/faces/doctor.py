"""`hub doctor` and `hub models`: what the machine has, what the config needs, and how to close the gap.

Each check is a `Check(name, ok, detail, hint)`; the CLI prints one line per check, a failed one's hint under
it (`fix: ...`), and exits 1 if any failed.
Roles are grouped by how they reach their model (backend + worker server), so a worker server shared by
two roles is started once, and a server that starts is told apart from an Ollama it cannot reach. What
a backend needs checked, and each fix, is its entry's in the backend table (hub/core/backends.py):
Ollama is checked only when a role's backend reaches its models there.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hub.core import backends
from hub.core.config import CONFIG_FILE, Config, RoleConfig, load_config, mistyped_env
from hub.core.errors import ConfigError, HubError
from hub.phases.context import Context
from hub.repo import identity
from hub.repo.workspace import problems
from hub.review.rules import find_ast_grep
from hub.safety.cgroup import delegation
from hub.safety.sandbox import (
    FIX_INSTALL,
    SYSTEM,
    SandboxMode,
    availability,
    refuses_userns,
    sizes_tmpfs,
    view,
)
from hub.workers.base import ServerWorker, Worker, same_model
from hub.workers.bridge import NPM_DIALECT, make_worker, npm_dialect_warning

Which = Callable[[str], str | None]
WorkerFactory = Callable[[Config, RoleConfig], Worker]

OLLAMA_PROBE_SECONDS = 3.0


@dataclass(frozen=True)
class Check:
    """One doctor line: what was checked, whether it passed, what was seen, and how to fix it."""

    name: str
    ok: bool
    detail: str
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        # `hub doctor --json` has always called the hint "fix", as the text does.
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.hint}


@dataclass(frozen=True)
class WorkerModels:
    """What one worker (backend + server) sees, for the roles that use it."""

    roles: tuple[str, ...]
    backend: str
    worker: str
    ok: bool
    models: tuple[str, ...] = ()
    configured: tuple[str, ...] = ()
    role_models: tuple[tuple[str, str], ...] = ()  # (role, model) for each role of the group
    missing: tuple[str, ...] = ()
    detail: str = ""
    server_started: bool | None = None  # MCP workers only: did the server start and list its tools
    server_detail: str = ""
    reached: bool = False  # the worker answered with a model list (possibly lacking what the roles need)
    dialect: str = ""  # MCP workers only: ollama_run (hub) or ollama_chat (npm ollama-mcp)

    @property
    def label(self) -> str:
        via = f"MCP worker '{self.worker}'" if backends.named(self.backend).worker_server else self.backend
        return f"{', '.join(self.roles)} via {via}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


def model_roles(config: Config, role: str | None = None) -> list[RoleConfig]:
    """The roles that call a model: implementer, local_reviewer, and the judge when it has a backend."""
    if role is not None:
        return [config.role(role)]
    roles = [config.role(name) for name in ("implementer", "local_reviewer") if name in config.roles]
    if config.judge.backend is not None and "judge" in config.roles:
        roles.append(config.role("judge")._replace(backend=config.judge.backend))
    return roles


def list_worker_models(
    config: Config, role: str | None = None, make: WorkerFactory | None = None
) -> list[WorkerModels]:
    """Ask each worker the roles use which models it has, and which configured ones it lacks."""
    if make is None:
        make = make_worker
    groups: dict[tuple[str, str], list[RoleConfig]] = {}
    for r in model_roles(config, role):
        server = r.worker if backends.named(r.backend).worker_server else ""
        groups.setdefault((r.backend, server), []).append(r)
    return [_probe(config, backend, worker, roles, make) for (backend, worker), roles in groups.items()]


def diagnose(
    repo: Path,
    handoff: Path | None = None,
    env: Mapping[str, str] | None = None,
    which: Which = shutil.which,
    make: WorkerFactory | None = None,
) -> list[Check]:
    """`hub doctor`: hub.yaml through the same validation every command runs, then the repository
    (git, `hub init`), then `run_doctor`. A hub.yaml that does not validate stops there: nothing else
    can be known without it."""
    path = repo / CONFIG_FILE
    try:
        config = load_config(repo, handoff, env)
    except ConfigError as exc:
        fix = (
            f"correct each line named above: each names the key path and the form it expects "
            f"(README.md, 'Configuration', shows a whole {CONFIG_FILE}; 'Every key' lists each key)"
        )
        return [Check(CONFIG_FILE, False, str(exc), fix)]
    seen = f"{path}: valid" if path.exists() else f"no {CONFIG_FILE}: the defaults apply"
    checks = [Check(CONFIG_FILE, True, seen)]
    checks += [
        Check(
            "environment",
            False,
            f"{name} is set, but agent-hub reads no such variable",
            f"did you mean {meant}?",
        )
        for name, meant in mistyped_env(os.environ if env is None else env)
    ]
    found = problems(config)
    checks += [Check(p.check, False, p.detail, p.hint) for p in found]
    if not found:
        checks.append(Check("repository", True, f"git repository at {repo}, `hub init` done"))
    return checks + run_doctor(config, which, make)


def run_doctor(config: Config, which: Which = shutil.which, make: WorkerFactory | None = None) -> list[Check]:
    """The machine's checks, in the order a person would fix them."""
    checks = [
        check_git(which),
        check_git_identity(config.repo_root),
        *check_task_commands(config, which),
        check_ast_grep(which),
        check_sandbox(config, which),
        *check_model_servers(config, make),
    ]
    return checks + check_mcp_servers(config)


def check_model_servers(config: Config, make: WorkerFactory | None = None) -> list[Check]:
    """Whether the roles' model servers answer and have their models (`hub eval` checks the same before
    its first task)."""
    checks = check_ollama_servers(config)
    for group in list_worker_models(config, make=make):
        if group.server_started is not None:
            checks.append(_server_check(group))
            if not group.server_started:
                continue
            if group.dialect == NPM_DIALECT:
                checks.append(_npm_check(group))
        if not group.reached:
            checks.append(_unreached_check(config, group))
            continue
        checks.extend(_model_check(group, model) for model in group.configured)
    return checks


def check_notify(ctx: Context, pause: float | None = None) -> list[Check]:
    """`hub doctor --notify`: a test notification to every `notify:` target, sent now and waited for
    (the same sending, redaction, clock and retry as a task's events), one check per target."""
    from hub.phases.notify import RETRY_PAUSE_SECONDS, deliver, make_job, sample_event

    if not ctx.config.notify.configured:
        fix = f"add `notify:` to {CONFIG_FILE} with `urls:` (apprise URLs) and/or `command:` (README, 'Notifications')"
        return [Check("notify", False, "no notification target is configured", fix)]
    job = make_job(ctx.config, sample_event(ctx))
    attempts = deliver(job, RETRY_PAUSE_SECONDS if pause is None else pause)
    checks = []
    for target in dict.fromkeys(a.target for a in attempts):
        tries = [a for a in attempts if a.target == target]
        ok = tries[-1].ok
        detail = "; ".join(f"try {a.attempt}: {a.detail}" for a in tries)
        fix = (
            ""
            if ok
            else "run the command by hand with a JSON line on stdin, or check the URL (apprise's reason is logged above)"
        )
        checks.append(Check(f"notify {target}", ok, detail, fix))
    return checks


def check_ollama_servers(config: Config) -> list[Check]:
    """Every Ollama of a pool (`ollama.hosts`; a dead one is skipped by the gate, but a person should
    know), when a role reaches its models there; none when no role does."""
    if not any(backends.named(r.backend).on_ollama for r in model_roles(config)):
        return []
    return [check_ollama(url) for url, _ in config.model_servers()]


def check_mcp_servers(config: Config) -> list[Check]:
    """Each of `mcp_servers` started and its tools listed, as agent mode will at a loop's start: the
    tools it offers the agent, and allowed tools the server does not have."""
    if not config.mcp_servers:
        return []
    # Here, not at the top: only a configuration with MCP servers needs the agent package and the SDK.
    from hub.agent.builtin import ToolRefused
    from hub.agent.mcp import MCPTools

    checks = []
    unused = config.role("implementer").mode != "agent"
    for server in config.mcp_servers:
        name = f"MCP server '{server.name}'"
        tools = MCPTools([server], cwd=config.repo_root)
        try:
            offered = [t.name for t in tools.start()]
        except ToolRefused as exc:
            checks.append(
                Check(name, False, str(exc), "check its command (or url) in mcp_servers in hub.yaml")
            )
            continue
        finally:
            tools.stop()
        missing = tools.missing.get(server.name, [])
        detail = f"offers the agent {', '.join(offered) or 'nothing (allow names no tool)'}"
        detail += " (unused: roles.implementer.mode is edit)" if unused else ""
        if missing:
            fix = f"allow lists tools the server does not have: {', '.join(missing)}; `hub doctor` lists what it has"
            checks.append(Check(name, False, detail + f"; not on the server: {', '.join(missing)}", fix))
        else:
            checks.append(Check(name, True, detail))
    return checks


def check_git(which: Which = shutil.which) -> Check:
    path = which("git")
    if path is None:
        return Check(
            "git", False, "git is not on PATH", "install git (e.g. `apt install git`) and put it on PATH"
        )
    version = _version([path, "--version"])
    if version is None:
        return Check("git", False, f"{path} --version failed", "reinstall git")
    if git_too_old(version):
        return Check(
            "git",
            False,
            f"{version}: finalize needs git {'.'.join(map(str, GIT_MINIMUM))} or later "
            "(`merge-tree --write-tree` builds the merge without touching your checkout)",
            "install a newer git (Debian 12 / Ubuntu 24.04 ship 2.39 / 2.43)",
        )
    return Check("git", True, version, "")


def check_git_identity(repo: Path) -> Check:
    """Who the hub's commits are by (hub.repo.identity): the user's name and email where git has them in
    the repository; what it lacks is the hub's own, which passes (the hub's commits never need it) but
    says how to set it, since the person's own commits (a conflict resolved by hand) do."""
    found = identity.resolved(repo)
    if found.complete:
        return Check("git identity", True, f"{found.name} <{found.email}> (the hub's commits carry it)")
    missing = " and ".join(
        k for k, ok in (("user.name", found.name_set), ("user.email", found.email_set)) if not ok
    )
    return Check(
        "git identity",
        True,
        f"{missing} {'are' if ' and ' in missing else 'is'} not set: the hub commits as {found.name} "
        f"<{found.email}>; your own commits will fail until you run `git config --global user.name "
        '"Your Name"` and `git config --global user.email you@example.com`',
    )


def check_task_commands(config: Config, which: Which = shutil.which) -> list[Check]:
    """The acceptance commands of the tasks in flight: each one's program found (on PATH, or a path in
    the repository), as the task will need it; a failed one names the command. Only read: a contract
    that cannot be read is `hub status`'s to report."""
    missing: dict[str, tuple[str, list[str]]] = {}  # program: (the first command naming it, its tasks)
    for path in sorted((config.handoff_dir / "tasks").glob("*/TASK_CONTRACT.json")):
        try:
            spec = json.loads(path.read_text(encoding="utf-8")).get("specification") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for command in spec.get("acceptance_commands") or []:
            program = first_program(str(command))
            if program is None or _runnable(program, config.repo_root, which):
                continue
            tasks = missing.setdefault(program, (str(command), []))[1]
            if path.parent.name not in tasks:
                tasks.append(path.parent.name)
    return [
        Check(
            f"acceptance command of {', '.join(tasks)}",
            False,
            f"`{command}`: {program} is not found (the task halts command_cannot_run before any model call)",
            f"install {program} or put it on PATH (no `python` on Debian/Ubuntu: "
            "`apt install python-is-python3`, or a new task whose command says `python3`)",
        )
        for program, (command, tasks) in missing.items()
    ]


# The shell's own words: nothing to find on PATH.
_SHELL_WORDS = frozenset(
    "cd test [ true false exit export set unset source . eval exec if for while case { ( ! command".split()  # noqa: SIM905
)


def first_program(command: str) -> str | None:
    """The program a shell line starts with (after `VAR=value` assignments), or None when the shell runs
    it itself or the line cannot be read."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            continue
        return None if word in _SHELL_WORDS or "$" in word else word
    return None


def _runnable(program: str, repo: Path, which: Which) -> bool:
    if "/" not in program:
        return which(program) is not None
    path = Path(program) if Path(program).is_absolute() else repo / program
    return path.is_file() and os.access(path, os.X_OK)


# `git merge-tree --write-tree` (2.38) builds the merge into the base without the user's checkout.
GIT_MINIMUM = (2, 38)


def git_too_old(version: str) -> bool:
    """Whether `git version X.Y...` is older than GIT_MINIMUM; an unreadable version is not refused."""
    found = re.search(r"(\d+)\.(\d+)", version)
    return found is not None and (int(found[1]), int(found[2])) < GIT_MINIMUM


def check_sandbox(config: Config, which: Which = shutil.which) -> Check:
    """Whether acceptance commands will run sandboxed. `auto` without bwrap passes, saying plainly that
    commands run unsandboxed; `required` without it fails with the fix."""
    mode = config.sandbox.mode
    if mode == SandboxMode.OFF:
        return Check("sandbox", True, "off in hub.yaml: acceptance commands run with your full rights")
    bwrap, why = availability(which)
    if bwrap is not None:
        net = "network on" if config.sandbox.network else "no network"
        seen = view(config.repo_root.resolve(), config.sandbox, os.environ)
        limits = config.sandbox.limits
        return Check(
            "sandbox",
            True,
            f"{mode}: acceptance commands run in bwrap ({bwrap}, {net}); a command sees the system folders "
            f"({', '.join(s for s in SYSTEM if os.path.lexists(s))}), a private /tmp, read-only "
            f"{', '.join(map(str, seen.read)) or 'nothing else'}; writable "
            f"{', '.join(map(str, seen.write))} (the task's worktree in its place); nothing else of "
            f"the home folder or the checkout; at most {limits.processes} processes, {limits.memory_mb} "
            f"MiB of memory, {limits.disk_mb} MiB written. Limits: "
            + "; ".join(
                f"{what}: {'enforced by the kernel' if kernel else 'NOT enforced by the kernel'}, {how}"
                for what, kernel, how in kernel_limits(which)
            ),
        )
    if mode == SandboxMode.REQUIRED:
        return Check(
            "sandbox", False, f"required, but {why}: every task with commands will halt", FIX_INSTALL
        )
    return Check("sandbox", True, f"auto: UNSANDBOXED, {why}; {FIX_INSTALL}")


# How an installed hub gets pytest for `hub eval` (the `eval` extra), or another interpreter for its tests.
FIX_PYTEST = (
    "install the hub with its eval needs (`pipx install --force 'agent-hub[eval]'`, or `pipx inject "
    "agent-hub pytest`; in a venv `pip install 'agent-hub[eval]'`), or give `hub eval --python` an "
    "interpreter that has pytest"
)


def check_test_runner(python: str) -> Check:
    """Whether `python`, the interpreter `hub eval` runs the exercises' tests with, can import pytest."""
    try:
        done = subprocess.run(
            [python, "-c", "import pytest"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("test runner", False, f"{python} cannot be run: {exc}", FIX_PYTEST)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("test runner", False, f"{python} cannot import pytest ({said})", FIX_PYTEST)
    return Check("test runner", True, f"pytest under {python}")


def check_ast_grep(which: Which = shutil.which) -> Check:
    fix = "pip install ast-grep-cli (an agent-hub dependency: reinstalling agent-hub brings it back)"
    path = find_ast_grep(which)
    if path is None:
        return Check("ast-grep", False, "the ast-grep binary is neither on PATH nor beside this Python", fix)
    version = _version([path, "--version"])
    return Check("ast-grep", version is not None, version or f"{path} --version failed", fix)


def check_ollama(host: str) -> Check:
    """Ollama answers /api/version at the configured host."""
    import httpx

    fix = (
        f"start Ollama (`ollama serve`), or point OLLAMA_HOST / ollama.host in hub.yaml at it (now {host}); "
        'no GPU: the stand-in model `hub-standin` or `make real-model` (README, "No GPU yet")'
    )
    try:
        response = httpx.get(f"{host}/api/version", timeout=OLLAMA_PROBE_SECONDS)
        response.raise_for_status()
        version = response.json().get("version", "?")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return Check("ollama", False, f"no Ollama at {host}: {exc}", fix)
    return Check("ollama", True, f"Ollama {version} at {host}")


def render_checks(checks: list[Check]) -> str:
    """One line per check; a failed one says how to fix it."""
    lines = []
    for c in checks:
        detail = c.detail.replace("\n", "\n      ")
        lines.append(f"{'ok  ' if c.ok else 'FAIL'}  {c.name}: {detail}")
        if not c.ok and c.hint:
            lines.append(f"      fix: {c.hint}")
    failed = sum(not c.ok for c in checks)
    lines.append("all checks passed" if not failed else f"{failed} of {len(checks)} checks failed")
    return "\n".join(lines)


def render_models(groups: list[WorkerModels]) -> str:
    """Each worker's models; `*` marks a model a role uses; what is missing is named with the fix."""
    lines = []
    for g in groups:
        if not g.reached:
            lines.append(
                f"{g.label}: unreachable: {g.server_detail if g.server_started is False else g.detail}"
            )
            continue
        lines.append(f"{g.label}: {len(g.models)} models")
        for model in g.models:
            used = any(same_model(model, c) for c in g.configured)
            lines.append(f"  {'*' if used else ' '} {model}")
        lines.extend(f"  missing: {model} ({missing_fix(g, model)})" for model in g.missing)
    return "\n".join(lines)


def missing_fix(group: WorkerModels, model: str) -> str:
    """How to get a model the server lacks; first the one it has that the name is a typo of, if any
    (`ollama pull` of a misspelt name only fails again)."""
    import difflib  # here, not at the top: only a missing model asks

    get = backends.named(group.backend).missing_hint(model)
    close = difflib.get_close_matches(model, list(group.models), n=1, cutoff=0.8)
    return f"did you mean {close[0]}, which it has? (set it in hub.yaml); else {get}" if close else get


def _probe(
    config: Config, backend: str, worker_name: str, roles: list[RoleConfig], make: WorkerFactory
) -> WorkerModels:
    wanted = tuple(dict.fromkeys(r.model for r in roles))
    base = WorkerModels(
        roles=tuple(r.name for r in roles),
        backend=backend,
        worker=worker_name,
        ok=False,
        configured=wanted,
        role_models=tuple((r.name, r.model) for r in roles),
    )
    try:
        worker = make(config, roles[0])
    except HubError as exc:
        started = False if backends.named(backend).worker_server else None
        return replace(base, detail=str(exc), server_started=started, server_detail=str(exc))
    try:
        if isinstance(worker, ServerWorker):
            # An MCP worker: starting the server and reading its tools is a check of its own.
            try:
                dialect = worker.connect()
            except HubError as exc:
                return replace(base, server_started=False, server_detail=str(exc), detail=str(exc))
            tools = worker.tools
            base = replace(
                base,
                server_started=True,
                server_detail=f"started; {len(tools)} tools, dialect {dialect}",
                dialect=dialect,
            )
        return _seen(base, worker, wanted)
    finally:
        worker.close()


def _seen(base: WorkerModels, worker: Worker, wanted: tuple[str, ...]) -> WorkerModels:
    """The worker's model list; whether it was reached at all is told apart from what it lacks."""
    try:
        health = worker.check_health(list(wanted))
    except HubError as exc:
        return replace(base, detail=str(exc))
    return replace(
        base,
        ok=health.ok,
        reached=health.reached,
        models=health.models,
        missing=health.missing if health.reached else (),
        detail=health.detail,
    )


def _server_check(group: WorkerModels) -> Check:
    name = f"worker server '{group.worker}'"
    if group.server_started:
        return Check(name, True, group.server_detail)
    fix = (
        f"check workers '{group.worker}' in hub.yaml (command or url, env) and the server's stderr log; "
        "`hub worker serve` on its own must start without errors"
    )
    return Check(name, False, group.server_detail, fix)


def _npm_check(group: WorkerModels) -> Check:
    """npm ollama-mcp works, but drops what the budget and the clocks rely on: say so (a warning)."""
    fix = (
        "for num_ctx, keep_alive, the first-token and stall clocks and token counts, use `worker: hub` "
        "(hub worker serve) or `backend: ollama`"
    )

    return Check(f"worker '{group.worker}' dialect", True, npm_dialect_warning(group.worker), fix)


def _unreached_check(config: Config, group: WorkerModels) -> Check:
    backend = backends.named(group.backend)
    fix = f"{backend.unreachable_fix} (now {backend.url(config)})"
    return Check(f"models for {group.label}", False, group.detail or "no model list", fix)


def _model_check(group: WorkerModels, model: str) -> Check:
    users = [role for role, used in group.role_models if used == model] or list(group.roles)
    name = f"model {model} ({', '.join(users)})"
    if model in group.missing:
        fix = missing_fix(group, model)
        return Check(name, False, f"not among the {len(group.models)} models {group.label} sees", fix)
    return Check(name, True, "present")


def _version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    return out.splitlines()[0] if done.returncode == 0 and out else None


def kernel_limits(which: Which = shutil.which) -> list[tuple[str, bool, str]]:
    """Each of the sandbox's bounds: (what, whether the kernel enforces it here, how or why not), for
    `hub doctor` and the README's promise: a bound only the hub's polling keeps is never called enforced."""
    bwrap, _ = availability(which)
    userns = bwrap is not None and refuses_userns(bwrap)
    sized = bwrap is not None and sizes_tmpfs(bwrap)
    found = delegation()
    return [
        (
            "nested user namespaces",
            userns,
            "refused by the kernel (bwrap --disable-userns)"
            if userns
            else "not refused: bwrap older than 0.8.0",
        ),
        (
            "/tmp and /dev/shm",
            sized,
            "tmpfs sized sandbox.limits.disk_mb each, the root read-only"
            if sized
            else "unsized: bwrap older than 0.8.0",
        ),
        ("file size", True, "RLIMIT_FSIZE (sandbox.limits.disk_mb per file)"),
        ("bytes written in all", False, "a walk of the files the command changed, every second: no quota"),
        ("memory and processes", found.base is not None, found.said()),
    ]
