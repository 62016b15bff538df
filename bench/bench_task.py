"""The hub's own overhead for one whole task, phase by phase, with model replies that cost nothing.

    .venv/bin/python bench/bench_task.py [--runs N] [--backend mcp|mcp-http|ollama|all]
        [--driver commands|until-idle|all] [--no-breakdown] [--json]

Each run is a fresh git repository and a task taken through every phase with the real CLI. FakeOllama
answers at once, so what is measured is the hub: interpreter start-up, imports, the worker server, git,
the rules gate, the files. Two drivers:
- `commands`: one subprocess per command as a person types them: new, setup-task, run-implementer,
  run-local-review, report-judge (a PASS written by hand), finalize-task;
- `until-idle`: `hub new`, then one `hub next --until-idle` (what `hub watch` runs, and what cron can)
  takes the task to merged, the judge a configured command that passes at once. One process runs every
  phase, so it pays its start-up, its imports and the worker server once. Backend `mcp` (the default)
spawns `hub worker serve` over stdio in each model phase's process (once for the whole until-idle run);
`mcp-http` reaches one long-lived `hub worker serve --transport http` started before the runs (the
option for a machine that runs many tasks); `ollama` talks to the HTTP API directly. Medians over the runs.

Then where the time goes (unless --no-breakdown):
- start-up: `python -c pass`, `python -m hub --help`, and the imports of each model phase's process
  (`-X importtime`, grouped by top-level package);
- the worker server: spawn + MCP initialize + tools/list, then one health check and one generation;
- inside the two model phases, in-process (backend ollama): cumulative seconds of git, the rules gate,
  the syntax check, the model calls, provenance and contract writes (cProfile);
- the rules gate (`hub.review.scan.scan_paths`) on the task's changed files, against `ast-grep scan` directly
  on the same file with the same rules. The gate on a large tree is bench/bench_rules.py.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo  # noqa: E402  (bench/, beside this script)

from hub.testing import FakeOllama  # noqa: E402  (the checkout, not an installed copy)

IMPL = "impl-model"
REV = "rev-model"
PHASES = ("new", "setup-task", "run-implementer", "run-local-review", "report-judge", "finalize-task")
# The commands each driver runs for one task.
DRIVERS = {"commands": PHASES, "until-idle": ("new", "next --until-idle")}
JUDGE_YAML = """\
judge:
  command: {command}
"""
JUDGE_PASS = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})
GOAL_SECONDS = 3.0
APP_PY = 'def greet(name):\n    return "hello " + name\n'
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
ANSWER = f"src/app.py\n```python\n{GREET_FIXED}```\n"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
HUB_YAML = """\
project: bench
roles:
  implementer: {{model: {impl}, backend: {backend}, worker: {worker}}}
  local_reviewer: {{model: {rev}, backend: {backend}, worker: {worker}}}
models:
  {impl}: {{num_ctx: 8192}}
"""
HTTP_WORKER_YAML = """\
workers:
  - {{name: hub-http, transport: http, url: "{url}"}}
"""
BACKENDS = ("mcp", "mcp-http", "ollama")
HTTP_READY_SECONDS = 30.0
# Variables from the caller's shell that would change what is measured.
SCRUBBED = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


# --- a task, end to end -----------------------------------------------------------------------------------


def make_repo(folder: Path, backend: str, http_url: str = "", judge: bool = False) -> Path:
    worker = "hub-http" if backend == "mcp-http" else "hub"
    text = HUB_YAML.format(impl=IMPL, rev=REV, backend=backend.split("-")[0], worker=worker)
    if backend == "mcp-http":
        text += HTTP_WORKER_YAML.format(url=http_url)
    if judge:
        text += JUDGE_YAML.format(command=json.dumps(f"echo {shlex.quote(JUDGE_PASS)}"))
    return commit_repo(folder / "repo", {"src/app.py": APP_PY, "README.md": "# bench\n", "hub.yaml": text})


def hub_env(fake: FakeOllama) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED}
    env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")
    return env


def hub(repo: Path, env: dict[str, str], *args: str, python_flags: tuple[str, ...] = ()) -> tuple[float, str]:
    """Run one CLI command; (wall seconds, stderr). Any exit but 0 aborts the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *python_flags, "-m", "hub", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"hub {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stderr


def one_task(
    fake: FakeOllama,
    backend: str,
    importtime_for: tuple[str, ...] = (),
    http_url: str = "",
    driver: str = "commands",
) -> tuple[dict[str, float], dict[str, str]]:
    """Seconds of each command of one task; with `importtime_for`, those commands' -X importtime output."""
    env = hub_env(fake)
    seconds: dict[str, float] = {}
    importtime: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hub-bench-task-") as tmp:
        repo = make_repo(Path(tmp), backend, http_url, judge=driver == "until-idle")
        for phase in DRIVERS[driver]:
            args: tuple[str, ...] = tuple(phase.split())
            if phase == "new":
                args = (
                    *args,
                    "--title",
                    "Greet politely",
                    "--requirement",
                    "say hello, NAME",
                    "--target",
                    "src/app.py",
                )
            if phase == "report-judge":
                report = {"verdict": "PASS", "summary": "ok", "blocking_issues": [], "suggestions": []}
                # Beside the review request, in the task's own folder.
                (folder,) = (repo / "_handoff" / "tasks").iterdir()
                (folder / "JUDGE_REPORT.json").write_text(json.dumps(report), encoding="utf-8")
            flags = ("-X", "importtime") if phase in importtime_for else ()
            seconds[phase], stderr = hub(repo, env, *args, python_flags=flags)
            if flags:
                importtime[phase] = stderr
        merged = subprocess.run(
            ["git", "show", "main:src/app.py"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout
        if merged != GREET_FIXED:
            raise SystemExit(f"the task did not merge the scripted file: {merged!r}")
    return seconds, importtime


def bench_backend(
    fake: FakeOllama, backend: str, runs: int, http_url: str = "", driver: str = "commands"
) -> dict[str, Any]:
    one_task(fake, backend, http_url=http_url, driver=driver)  # warm: the OS file cache, .pyc files
    samples: dict[str, list[float]] = defaultdict(list)
    totals = []
    for _ in range(runs):
        seconds, _ = one_task(fake, backend, http_url=http_url, driver=driver)
        for phase, value in seconds.items():
            samples[phase].append(value)
        totals.append(sum(seconds.values()))
    return {
        "backend": backend,
        "driver": driver,
        "runs": runs,
        "phases": {phase: statistics.median(samples[phase]) for phase in DRIVERS[driver]},
        "total": statistics.median(totals),
        "total_min": min(totals),
        "total_max": max(totals),
    }


@contextmanager
def http_worker(fake: FakeOllama) -> Iterator[str]:
    """A `hub worker serve --transport http` for the whole benchmark; yields its /mcp URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "OLLAMA_HOST": fake.url, "HUB_LOG_LEVEL": "WARNING"}
    command = [sys.executable, "-m", "hub", "worker", "serve", "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HTTP_READY_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the HTTP worker server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- where the time goes ----------------------------------------------------------------------------------


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def startup(repeat: int) -> dict[str, float]:
    def run(*args: str) -> Callable[[], object]:
        return lambda: subprocess.run([sys.executable, *args], capture_output=True, check=True)

    return {
        "python -c pass": median_seconds(run("-c", "pass"), repeat),
        "python -m hub --help": median_seconds(run("-m", "hub", "--help"), repeat),
        "import mcp": median_seconds(run("-c", "import mcp"), repeat),
        "import hub.workers.worker_server (the worker server's imports)": median_seconds(
            run("-c", "import hub.workers.worker_server"), repeat
        ),
    }


def import_groups(importtime: str, top: int = 10) -> dict[str, float]:
    """Cumulative import seconds of each package as first imported, from `-X importtime` output; a package
    first pulled in by another is labelled `name (in parent)` and is part of the parent's figure too."""
    found: list[tuple[str, float]] = []
    pending: list[tuple[int, str, float]] = []  # importtime prints children before their parent
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, raw = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue
        name = raw.rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        name = name.strip()
        seconds = int(cumulative) / 1e6
        if depth == 0:
            top_name = name.split(".")[0]
            found.append((top_name, seconds))
            found += [(f"{n} (in {top_name})", t) for _, n, t in pending if n.split(".")[0] != top_name]
            pending.clear()
        elif "." not in name:
            pending.append((depth, name, seconds))
    merged: dict[str, float] = defaultdict(float)
    for name, seconds in found:
        merged[name] += seconds
    return dict(sorted(merged.items(), key=lambda kv: -kv[1])[:top])


def worker_server(fake: FakeOllama, repeat: int) -> dict[str, float]:
    """What one model phase pays for the worker server: start, one health check, one call, stop."""
    from hub.core.config import WorkerServer
    from hub.workers.base import ChatRequest
    from hub.workers.bridge import WorkerClient

    server = WorkerServer(name="hub", command=(sys.executable, "-m", "hub", "worker", "serve"))
    request = ChatRequest(model=IMPL, prompt="write the file")
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeat):
        client = WorkerClient(server, fake.url)
        steps: tuple[tuple[str, Callable[[], object]], ...] = (
            ("spawn + initialize + tools/list", client.connect),
            ("check_health (ollama_list_models)", partial(client.check_health, [IMPL])),
            ("generate (ollama_run, instant reply)", partial(client.generate, request)),
            ("close (stdin closed, wait for the exit)", client.close),
        )
        for label, step in steps:
            started = time.perf_counter()
            step()
            samples[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in samples.items()}


# Functions whose cumulative time is attributed, in the order shown; (label, file suffix, function name).
PROFILE_BUCKETS = (
    ("git (gitops: checkout, checkpoint, diff, stash)", "hub/repo/gitops.py", None),
    ("rules gate (scan_paths: ast-grep)", "hub/review/scan.py", "scan_paths"),
    ("syntax check + outline (tree-sitter)", "hub/review/code.py", None),
    ("model calls (generate)", "hub/workers/ollama.py", "generate"),
    ("health check (/api/tags)", "hub/workers/ollama.py", "check_health"),
    ("OllamaProvider() (an httpx.Client: its SSL context)", "hub/workers/ollama.py", "__init__"),
    ("edits parse + apply", "hub/edits/answer.py", None),
    ("edits parse + apply", "hub/edits/parse.py", None),
    ("provenance records", "hub/state/provenance.py", "write_record"),
    ("contract + transition writes", "hub/state/handoff.py", "record"),
    ("contract + transition writes", "hub/state/store.py", "save"),
    ("REVIEW_REQUEST.md", "hub/phases/judge.py", "write_review_request"),
)


def in_process_profile(fake: FakeOllama) -> dict[str, dict[str, float]]:
    """cProfile of run-implementer and run-local-review in one process (backend ollama), by bucket."""
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.implement import run_implementer
    from hub.phases.local_review import run_local_review
    from hub.phases.setup import create, setup_task

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hub-bench-profile-") as tmp:
        repo = make_repo(Path(tmp), "ollama")
        ctx = Context(load_config(repo, env={"OLLAMA_HOST": fake.url}))
        create(ctx, {"title": "Greet", "requirements": ["say hello, NAME"], "target_file": "src/app.py"})
        setup_task(ctx)
        for label, phase in (("run-implementer", run_implementer), ("run-local-review", run_local_review)):
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            outcome = phase(ctx)
            profile.disable()
            wall = time.perf_counter() - started
            if outcome.exit_code:
                raise SystemExit(f"{label} in-process: {outcome.message}")
            out[label] = {"wall (profiled)": wall, **buckets(pstats.Stats(profile))}
    return out


def buckets(stats: pstats.Stats) -> dict[str, float]:
    """The largest cumulative time per bucket (nested calls of one bucket are not counted twice)."""
    found: dict[str, float] = defaultdict(float)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for label, suffix, name in PROFILE_BUCKETS:
        best = 0.0
        for (filename, _line, function), (_cc, _nc, _tt, cumulative, _callers) in table.items():
            if filename.replace(os.sep, "/").endswith(suffix) and (name is None or function == name):
                best = max(best, cumulative)
        found[label] = max(found[label], best)
    return dict(found)


def rules_gate(repeat: int) -> dict[str, float]:
    from hub.review import rules
    from hub.review.scan import scan_paths

    with tempfile.TemporaryDirectory(prefix="hub-bench-rules-") as tmp:
        repo = make_repo(Path(tmp), "ollama")
        (repo / "src" / "app.py").write_text(GREET_FIXED, encoding="utf-8")
        config = Path(tmp) / "sgconfig.yml"
        config.write_text(f"ruleDirs:\n  - {rules.packaged_rules_dir()}\n", encoding="utf-8")
        binary = rules.ast_grep_binary()

        def direct() -> None:
            done = subprocess.run(
                [binary, "scan", "-c", str(config), "--json=stream", "src/app.py"],
                cwd=repo,
                capture_output=True,
                check=False,
            )
            if done.returncode not in (0, 1):
                raise SystemExit(f"ast-grep scan failed: {done.stderr!r}")

        scan_paths(repo, ["src/app.py"])
        direct()
        return {
            "hub.review.scan.scan_paths on the changed file": median_seconds(
                lambda: scan_paths(repo, ["src/app.py"]), repeat
            ),
            "ast-grep scan directly, same file and rules": median_seconds(direct, repeat),
        }


# --- report -----------------------------------------------------------------------------------------------


def fmt(seconds: float) -> str:
    return f"{seconds:7.3f} s"


def print_backend(result: dict[str, Any]) -> None:
    print(
        f"\nbackend {result['backend']}, driver {result['driver']}: median of {result['runs']} runs "
        "(wall seconds per CLI command)"
    )
    for phase in result["phases"]:
        print(f"  {phase:<18} {fmt(result['phases'][phase])}")
    goal = "within" if result["total"] <= GOAL_SECONDS else "OVER"
    print(
        f"  {'total':<18} {fmt(result['total'])}   (min {result['total_min']:.3f}, max {result['total_max']:.3f}; "
        f"{goal} the {GOAL_SECONDS:g} s goal)"
    )


def print_ratios(results: list[dict[str, Any]]) -> None:
    """Each backend's one-process total against its own command-per-phase total (the baseline)."""
    totals = {(r["backend"], r["driver"]): r["total"] for r in results}
    lines = [
        f"  {backend:<10} {totals[backend, 'until-idle'] / totals[backend, 'commands']:.2f}"
        for backend in BACKENDS
        if (backend, "commands") in totals and (backend, "until-idle") in totals
    ]
    if lines:
        print("\nuntil-idle total / commands total (same backend)")
        print("\n".join(lines))


def print_section(title: str, values: dict[str, float]) -> None:
    print(f"\n{title}")
    for label, seconds in values.items():
        print(f"  {label:<58} {fmt(seconds)}")


@contextmanager
def quiet_logs() -> Iterator[None]:
    from hub.core.log import configure

    configure("json", "WARNING")
    yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="tasks per backend (median); default 5")
    parser.add_argument("--backend", choices=(*BACKENDS, "all"), default="all")
    parser.add_argument("--driver", choices=(*DRIVERS, "all"), default="all")
    parser.add_argument("--no-breakdown", action="store_true", help="only the per-phase table")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("git is not on PATH")
    backends = BACKENDS if args.backend == "all" else (args.backend,)
    drivers = tuple(DRIVERS) if args.driver == "all" else (args.driver,)
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
    }
    with quiet_logs(), FakeOllama() as fake:
        fake.respond_with(IMPL, lambda body: ANSWER)
        fake.respond_with(REV, lambda body: PASS_REVIEW)
        report["backends"] = []
        for driver in drivers:
            for backend in backends:
                if backend == "mcp-http":
                    with http_worker(fake) as url:
                        report["backends"].append(bench_backend(fake, backend, args.runs, url, driver))
                else:
                    report["backends"].append(bench_backend(fake, backend, args.runs, driver=driver))
        if not args.no_breakdown:
            repeat = max(3, args.runs)
            report["startup"] = startup(repeat)
            report["imports"] = {}
            for backend in (b for b in backends if b != "mcp-http"):
                _, importtime = one_task(fake, backend, ("run-implementer", "run-local-review"))
                for phase, text in importtime.items():
                    report["imports"][f"{phase}, backend {backend}"] = import_groups(text)
            report["worker_server"] = worker_server(fake, repeat)
            report["in_process"] = in_process_profile(fake)
            report["rules_gate"] = rules_gate(repeat)
    report["load_average_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"python {report['python']}, {report['cpus']} CPUs, load average before "
        f"{report['load_average_before'][0]:.2f}, after {report['load_average_after'][0]:.2f}"
    )
    for result in report["backends"]:
        print_backend(result)
    print_ratios(report["backends"])
    if args.no_breakdown:
        return 0
    print_section("start-up (median seconds of a fresh process)", report["startup"])
    for phase, groups in report["imports"].items():
        print_section(f"imports of `hub {phase}` (-X importtime, cumulative)", groups)
    print_section("the worker server, from this process", report["worker_server"])
    for phase, values in report["in_process"].items():
        print_section(f"inside {phase}, in-process, backend ollama (cProfile, cumulative)", values)
    print_section("the rules gate on the task's changed file", report["rules_gate"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
