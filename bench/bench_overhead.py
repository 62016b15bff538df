"""What the hub itself costs, side by side in one run, against issue 25's goals.

    .venv/bin/python bench/bench_overhead.py [--runs N] [--json]
        [--real-url http://127.0.0.1:8089/v1 --real-model NAME [--real-tasks 4] [--num-predict N]]

With FakeOllama answering at once, everything measured is the hub's own time (hub.yaml dated a minute
back, as a user's is: `settle`):

1. A whole task, by hand (a command per phase: new, setup-task, run-implementer, run-local-review,
   report-judge, finalize-task) and with `hub new` + one `hub next --until-idle` (the judge a command that
   passes at once), for three ways to reach the model: the hub's own worker in-process (the default,
   `transport: inprocess`), the same worker as a process over stdio (`hub worker serve`, the default
   before), and backend `ollama` (no worker). Medians over the runs.
2. Each phase of the by-hand run split into start-up and work: work is the phase's own canonical log line
   (`phase`, seconds from taking the task's lock to the end, a worker's start included), start-up the
   rest of the command's wall time (interpreter, imports, configuration).
3. The import time of each command (`-X importtime`: the sum of the top-level imports' cumulative time),
   and whether it imports the MCP SDK, against `python -c pass` and `hub status`'s ratio to it (also
   through click, the way every `hub status` went before hub.faces.entry's plain path).
4. With `--real-url` (an OpenAI-compatible server, e.g. `scripts/real_model.sh serve`): a backlog of
   `--real-tasks` small tasks drained by `hub next --until-idle` (parallel_tasks 2, one server slot), the
   server's `/slots` polled every 50 ms: the fraction of the drain during which it was generating.

Goals (issue 25, this 2-core machine): whole task by hand < 1.5 s; `--until-idle` < 0.5 s of hub time;
every model phase's start-up < 0.3 s; `hub status` < 5x `python -c pass`; server busy > 95 % of a drain.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo, git  # noqa: E402  (bench/, beside this script)

from hub.testing import FakeOllama  # noqa: E402  (the checkout, not an installed copy)

IMPL, REV = "impl-model", "rev-model"
APP_PY = 'def greet(name):\n    return "hello " + name\n'
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
ANSWER = f"src/app.py\n```python\n{GREET_FIXED}```\n"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
JUDGE_PASS = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})
WORKERS = {
    "inprocess": ("mcp", "workers:\n  - {name: hub, transport: inprocess}\n"),
    "stdio": (
        "mcp",
        "workers:\n  - {name: hub, transport: stdio, command: [python, -m, hub, worker, serve]}\n",
    ),
    "ollama": ("ollama", ""),
}
BY_HAND = ("new", "setup-task", "run-implementer", "run-local-review", "report-judge", "finalize-task")
MODEL_PHASES = ("run-implementer", "run-local-review")
NEW_ARGS = ("--title", "Greet politely", "--requirement", "say hello, NAME", "--target", "src/app.py")
# PYTHONDONTWRITEBYTECODE: with it set (as in some shells here), no .pyc of the checkout is ever written and
# every command compiles the hub from source, which users (whose install writes them) never pay.
SCRUBBED = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "PYTHONDONTWRITEBYTECODE")
GOALS = {"by hand": 1.5, "until-idle": 0.5, "model phase start-up": 0.3, "status x python": 5.0, "busy": 0.95}


def hub_yaml(worker: str, judge: bool) -> str:
    backend, workers = WORKERS[worker]
    text = (
        "project: bench\nroles:\n"
        f"  implementer: {{model: {IMPL}, backend: {backend}}}\n"
        f"  local_reviewer: {{model: {REV}, backend: {backend}}}\n"
        f"models:\n  {IMPL}: {{num_ctx: 8192}}\n" + workers
    )
    if judge:
        text += f"judge:\n  command: {json.dumps('echo ' + shlex.quote(JUDGE_PASS))}\n"
    return text


def env_for(fake_url: str, level: str = "INFO") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED}
    env.update(OLLAMA_HOST=fake_url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL=level)
    return env


CPU_SECONDS: list[float] = []  # of the last run_hub: the command's and all its children's CPU time


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_hub(repo: Path, env: dict[str, str], *args: str, flags: tuple[str, ...] = ()) -> tuple[float, str]:
    """One CLI command: (wall seconds, stderr); its CPU seconds (worker and git processes included) in
    CPU_SECONDS. Any exit but 0 aborts the benchmark."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, "-m", "hub", *args], cwd=repo, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    CPU_SECONDS[:] = [children_cpu() - cpu]
    if done.returncode != 0:
        raise SystemExit(
            f"hub {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
        )
    return seconds, done.stderr


def phase_seconds(stderr: str) -> float:
    """The `seconds` of the canonical `phase` log lines (the phase's work), summed."""
    total = 0.0
    for line in stderr.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == "phase":
            total += float(entry.get("seconds") or 0)
    return total


def settle(repo: Path) -> None:
    """Date hub.yaml a minute back, as a user's is: one written under 2 s ago is parsed by every command
    and never cached (hub.core.config.read_yaml's racily-clean rule), which no user pays after the
    first seconds (PyYAML's import and the parse, ~10-30 ms a command here)."""
    then = time.time() - 60
    os.utime(repo / "hub.yaml", (then, then))


def write_judge_report(repo: Path) -> None:
    (folder,) = (repo / "_handoff" / "tasks").iterdir()
    report = {"verdict": "PASS", "summary": "ok", "blocking_issues": [], "suggestions": []}
    (folder / "JUDGE_REPORT.json").write_text(json.dumps(report), encoding="utf-8")


def one_task(fake_url: str, worker: str, driver: str) -> dict[str, tuple[float, float, float]]:
    """(wall, work, CPU) seconds of each command of one task, from new to merged."""
    env = env_for(fake_url)
    out: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hub-bench-overhead-") as tmp:
        files = {"src/app.py": APP_PY, "README.md": "# bench\n"}
        repo = commit_repo(
            Path(tmp) / "repo", {**files, "hub.yaml": hub_yaml(worker, driver == "until-idle")}
        )
        settle(repo)
        commands = BY_HAND if driver == "by hand" else ("new", "next --until-idle")
        for command in commands:
            args = tuple(command.split()) + (NEW_ARGS if command == "new" else ())
            if command == "report-judge":
                write_judge_report(repo)
            wall, stderr = run_hub(repo, env, *args)
            out[command] = (wall, phase_seconds(stderr), CPU_SECONDS[0])
        if git(repo, "show", "main:src/app.py") != GREET_FIXED:
            raise SystemExit(f"{worker}/{driver}: the task did not merge the scripted file")
    return out


def whole_tasks(fake_url: str, runs: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for driver in ("by hand", "until-idle"):
        for worker in WORKERS:
            one_task(fake_url, worker, driver)  # warm the page cache and the .pyc files
            samples: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
            for _ in range(runs):
                for command, pair in one_task(fake_url, worker, driver).items():
                    samples[command].append(pair)
            commands = {
                command: {
                    "wall": statistics.median(w for w, _, _ in pairs),
                    "work": statistics.median(p for _, p, _ in pairs),
                    "cpu": statistics.median(c for _, _, c in pairs),
                }
                for command, pairs in samples.items()
            }
            for figures in commands.values():
                figures["start-up"] = figures["wall"] - figures["work"]
            phases = [c for c in commands if c != "new"]
            results[f"{driver}, {worker}"] = {
                "commands": commands,
                "total": sum(c["wall"] for c in commands.values()),
                "cpu": sum(c["cpu"] for c in commands.values()),
                "without new": sum(commands[c]["wall"] for c in phases),
            }
    return results


# --- imports per command ----------------------------------------------------------------------------------


def import_seconds(stderr: str) -> tuple[float, bool]:
    """(sum of the top-level imports' cumulative seconds, whether the MCP SDK was imported)."""
    total, sdk = 0.0, False
    for line in stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        if name.strip().split(".")[0] == "mcp":
            sdk = True
        if not name.startswith("  "):  # depth 0: "| name"
            total += int(parts[1]) / 1e6
    return total, sdk


def command_imports(fake_url: str) -> dict[str, dict[str, Any]]:
    """Each command's import time and SDK use, in a repository where each has something to do."""
    env = env_for(fake_url, level="WARNING")
    flags = ("-X", "importtime")
    out: dict[str, dict[str, Any]] = {}

    def measure(label: str, repo: Path, *args: str) -> None:
        _, stderr = run_hub(repo, env, *args, flags=flags)
        seconds, sdk = import_seconds(stderr)
        out[label] = {"import_seconds": seconds, "imports_mcp": sdk}

    with tempfile.TemporaryDirectory(prefix="hub-bench-imports-") as tmp:
        files = {"src/app.py": APP_PY, "README.md": "# bench\n"}
        repo = commit_repo(Path(tmp) / "repo", {**files, "hub.yaml": hub_yaml("inprocess", judge=False)})
        settle(repo)
        measure("hub --help", repo, "--help")
        measure("hub new", repo, "new", *NEW_ARGS)
        measure("hub status", repo, "status")
        measure("hub status --json", repo, "status", "--json")
        measure("hub setup-task", repo, "setup-task")
        measure("hub run-implementer (in-process worker)", repo, "run-implementer")
        measure("hub run-local-review (in-process worker)", repo, "run-local-review")
        write_judge_report(repo)
        measure("hub report-judge", repo, "report-judge")
        measure("hub finalize-task", repo, "finalize-task")
        measure("hub log", repo, "log")
        measure("hub next (nothing due)", repo, "next")
        measure("hub backlog list", repo, "backlog", "list")
        measure("hub rules list", repo, "rules", "list")
        measure("hub models (in-process worker)", repo, "models")
    for label, module in (
        ("hub mcp serve (its modules)", "hub.faces.mcp_server"),
        ("hub worker serve (its modules)", "hub.workers.worker_server"),
        ("hub watch (its modules)", "hub.faces.watch"),
    ):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            env=env,
        )
        seconds, sdk = import_seconds(done.stderr)
        if module == "hub.workers.worker_server":
            # Its module loads the SDK inside build_server: count what serving needs.
            done = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", f"import {module}; import mcp.server.mcpserver"],
                capture_output=True,
                text=True,
                env=env,
            )
            seconds, sdk = import_seconds(done.stderr)
        out[label] = {"import_seconds": seconds, "imports_mcp": sdk}
    return out


def median_run(command: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def status_ratio(fake_url: str, runs: int) -> dict[str, float]:
    env = env_for(fake_url, level="WARNING")
    hub_bin = str(Path(sys.executable).parent / "hub")
    with tempfile.TemporaryDirectory(prefix="hub-bench-status-") as tmp:
        files = {"src/app.py": APP_PY, "README.md": "# bench\n"}
        repo = commit_repo(Path(tmp) / "repo", {**files, "hub.yaml": hub_yaml("inprocess", judge=False)})
        settle(repo)
        run_hub(repo, env, "new", *NEW_ARGS)
        python = median_run([sys.executable, "-c", "pass"], repo, env, runs)
        status = median_run([hub_bin, "status"], repo, env, runs)
        # A group option sends the same command through click (hub.faces.entry): the path before issue 25.
        clicked = median_run([hub_bin, "--log-format", "json", "status"], repo, env, runs)
    return {
        "python -c pass": python,
        "hub status": status,
        "ratio": status / python,
        "hub status through click": clicked,
        "ratio through click": clicked / python,
    }


# --- the real server's busy fraction ----------------------------------------------------------------------

REAL_FILES = {f"src/m{n}.py": f"def value{n}():\n    return {n}\n" for n in range(8)}


def real_yaml(url: str, model: str, num_predict: int) -> str:
    role = (
        f"{{model: {model}, backend: openai, num_predict: {num_predict}, "
        "timeouts: {first_token: 600, stall: 120, total: 900}}"
    )
    return (
        f"project: busy\nopenai:\n  base_url: {url}\nroles:\n  implementer: {role}\n"
        f"  local_reviewer: {role}\nmodels:\n  {model}: {{num_ctx: 8192}}\n"
        f"judge:\n  command: {json.dumps('echo ' + shlex.quote(JUDGE_PASS))}\n"
        "limits:\n  parallel_tasks: 2\nollama:\n  slots: 1\n"
    )


def busy_fraction(url: str, model: str, tasks: int, num_predict: int) -> dict[str, Any]:
    """Drain `tasks` small tasks with one `hub next --until-idle`; poll the server's /slots meanwhile."""
    slots_url = url.rstrip("/").removesuffix("/v1") + "/slots"
    samples: list[tuple[float, bool]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with urllib.request.urlopen(slots_url, timeout=5) as response:
                slots = json.loads(response.read())
            samples.append((time.monotonic(), any(s.get("is_processing") for s in slots)))
            stop.wait(0.05)

    with tempfile.TemporaryDirectory(prefix="hub-bench-busy-") as tmp:
        repo = commit_repo(Path(tmp) / "repo", {**REAL_FILES, "hub.yaml": real_yaml(url, model, num_predict)})
        env = env_for("http://127.0.0.1:9", level="INFO")
        for n in range(tasks):
            requirement = f"value{n}() returns {n + 100} instead of {n}"
            run_hub(repo, env, "new", "--title", f"Change value{n}", "--requirement", requirement,
                    "--target", f"src/m{n}.py")  # fmt: skip
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "hub", "next", "--until-idle", "--json"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
        )
        ended = time.monotonic()
        stop.set()
        poller.join(timeout=10)
        merged = len(git(repo, "log", "--merges", "--format=%H", "main").splitlines())
        handoff = repo / "_handoff"
        model_calls = len(list(handoff.glob("*/*/runs/*model-call*.json")))
        try:
            outcome = json.loads(done.stdout)["message"].splitlines()
        except (ValueError, KeyError):
            outcome = [done.stdout[-1500:]]
    busy = [t for t, b in samples if b]
    whole = sum(1 for _, b in samples if b) / max(1, len(samples))
    window = [(t, b) for t, b in samples if busy and busy[0] <= t <= busy[-1]]
    calls = sum(1 for (_, a), (_, b) in itertools.pairwise(samples) if b and not a)
    return {
        "tasks": tasks,
        "merged": merged,
        "exit_code": done.returncode,
        "drain_seconds": ended - started,
        "samples": len(samples),
        "busy_whole_drain": whole,
        "busy_first_to_last_call": sum(1 for _, b in window if b) / max(1, len(window)),
        "model_calls": model_calls,
        "generation_spans": calls,
        "outcome": outcome,
        "idle_seconds_between_calls": (len(window) - sum(1 for _, b in window if b)) * 0.05,
        # What the drain must do before its first call (start, set-up) and after its last (judge, merge).
        "idle_seconds_before_first_call": busy[0] - started if busy else None,
        "idle_seconds_after_last_call": ended - busy[-1] if busy else None,
        "stderr_errors": [line for line in done.stderr.splitlines() if '"level": "error"' in line][-5:],
    }


# --- report -----------------------------------------------------------------------------------------------


def seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"  # None: the server never generated


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def print_report(report: dict[str, Any]) -> None:
    print(
        f"python {report['python']}, {report['cpus']} CPUs, load {report['load'][0]:.2f} -> {report['load_after'][0]:.2f}"
    )
    tasks = report["whole_task"]
    print(
        f"\n1. a whole task, hub time (FakeOllama answers at once), median of {report['runs']} runs, seconds"
    )
    print(
        f"  {'':<12} {'by hand':>9} {'(4 phases)':>11} {'until-idle':>11} {'(its next)':>11}"
        f" {'CPU: by hand':>13} {'(4 phases)':>11} {'(its next)':>11}"
    )
    for worker in WORKERS:
        hand, idle = tasks[f"by hand, {worker}"], tasks[f"until-idle, {worker}"]
        four = sum(hand["commands"][c]["wall"] for c in BY_HAND[2:])
        four_cpu = sum(hand["commands"][c]["cpu"] for c in BY_HAND[2:])
        print(
            f"  {worker:<12} {hand['total']:9.3f} {four:11.3f} {idle['total']:11.3f} "
            f"{idle['commands']['next --until-idle']['wall']:11.3f} {hand['cpu']:13.3f} {four_cpu:11.3f} "
            f"{idle['commands']['next --until-idle']['cpu']:11.3f}"
        )
    print(
        "  (CPU: user + system seconds of the command and every process it ran: what the load does not inflate)"
    )
    base = tasks["by hand, stdio"]["total"]
    print(f"  in-process / stdio, by hand: {tasks['by hand, inprocess']['total'] / base:.2f}")
    print("\n2. each command by hand: wall = start-up + work (the phase's own log line), seconds")
    print(f"  {'':<18}" + "".join(f"{w:>26}" for w in WORKERS))
    for command in BY_HAND:
        cells = []
        for worker in WORKERS:
            c = tasks[f"by hand, {worker}"]["commands"][command]
            cells.append(f"{c['wall']:8.3f} = {c['start-up']:6.3f} + {c['work']:6.3f}")
        print(f"  {command:<18}" + "".join(f"{cell:>26}" for cell in cells))
    print("\n3. imports per command (-X importtime, top-level cumulative), seconds")
    for label, figures in report["imports"].items():
        sdk = "imports the MCP SDK" if figures["imports_mcp"] else ""
        print(f"  {label:<44} {figures['import_seconds']:7.3f}  {sdk}")
    s = report["status"]
    print(
        f"  python -c pass {s['python -c pass'] * 1000:.1f} ms, hub status {s['hub status'] * 1000:.1f} ms: {s['ratio']:.2f}x"
        f" (through click: {s['hub status through click'] * 1000:.1f} ms, {s['ratio through click']:.2f}x)"
    )
    if "busy" in report:
        b = report["busy"]
        print(
            f"\n4. real server: {b['tasks']} tasks, {b['merged']} merged, exit {b['exit_code']}, drain "
            f"{b['drain_seconds']:.1f} s, {b['model_calls']} model calls in {b['generation_spans']} spans; busy "
            f"{b['busy_whole_drain']:.1%} of the whole drain, {b['busy_first_to_last_call']:.1%} from the first "
            f"call to the last (idle {b['idle_seconds_between_calls']:.1f} s between them, "
            f"{seconds(b['idle_seconds_before_first_call'])} before the first, "
            f"{seconds(b['idle_seconds_after_last_call'])} after the last)"
        )
    print("\ngoals")
    for line in report["goals"]:
        print(f"  {line}")


def goals(report: dict[str, Any]) -> list[str]:
    tasks = report["whole_task"]
    hand = tasks["by hand, inprocess"]
    idle = tasks["until-idle, inprocess"]["commands"]["next --until-idle"]["wall"]
    four = sum(hand["commands"][c]["wall"] for c in BY_HAND[2:])
    startups = {p: hand["commands"][p]["start-up"] for p in MODEL_PHASES}
    four_cpu = sum(hand["commands"][c]["cpu"] for c in BY_HAND[2:])
    idle_cpu = tasks["until-idle, inprocess"]["commands"]["next --until-idle"]["cpu"]
    lines = [
        f"whole task by hand < {GOALS['by hand']} s: {hand['total']:.3f} s with new + setup-task, "
        f"{four:.3f} s the four phases (CPU {four_cpu:.3f} s): {verdict(four < GOALS['by hand'])}",
        f"--until-idle < {GOALS['until-idle']} s: {idle:.3f} s (CPU {idle_cpu:.3f} s): "
        f"{verdict(idle < GOALS['until-idle'])}",
        *(
            f"{p} start-up < {GOALS['model phase start-up']} s: {s:.3f} s: "
            f"{verdict(s < GOALS['model phase start-up'])}"
            for p, s in startups.items()
        ),
        f"hub status < {GOALS['status x python']}x python -c pass: {report['status']['ratio']:.2f}x: "
        f"{verdict(report['status']['ratio'] < GOALS['status x python'])}",
    ]
    if "busy" in report:
        busy = report["busy"]["busy_whole_drain"]
        lines.append(
            f"server busy > {GOALS['busy']:.0%} of the drain: {busy:.1%}: {verdict(busy > GOALS['busy'])}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="tasks per configuration (median); default 3")
    parser.add_argument("--real-url", help="an OpenAI-compatible server for the busy fraction (…/v1)")
    parser.add_argument("--real-model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--real-tasks", type=int, default=4)
    parser.add_argument("--num-predict", type=int, default=256)
    parser.add_argument("--real-only", action="store_true", help="only the real server's busy fraction")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = parser.parse_args(argv)
    if args.real_only and not args.real_url:
        parser.error("--real-only needs --real-url")
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "runs": args.runs,
    }
    if args.real_only:
        report["busy"] = busy_fraction(args.real_url, args.real_model, args.real_tasks, args.num_predict)
        print(json.dumps(report, indent=2))
        return 0
    with FakeOllama() as fake:
        fake.respond_with(IMPL, lambda body: ANSWER)
        fake.respond_with(REV, lambda body: PASS_REVIEW)
        report["whole_task"] = whole_tasks(fake.url, args.runs)
        report["imports"] = command_imports(fake.url)
        report["status"] = status_ratio(fake.url, max(10, args.runs))
    if args.real_url:
        report["busy"] = busy_fraction(args.real_url, args.real_model, args.real_tasks, args.num_predict)
    report["load_after"] = os.getloadavg()
    report["goals"] = goals(report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
