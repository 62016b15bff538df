"""Draining a backlog around one GPU: drain time and model loads, one task at a time against the scheduler.

    .venv/bin/python bench/bench_backlog.py [--tasks 8] [--load 5] [--generate 1] [--judge 1] [--json]

A backlog of `--tasks` proposals, each on a file of its own; the implementer and the reviewer are two
different models; the judge is a command that takes `--judge` seconds and passes. FakeOllama stands for
the model server with a simulated GPU (hub/testing/fake_gpu.py): one slot, one model loaded at a time,
`--load` seconds on every model switch and `--generate` seconds per generation. Cron is played by
`hub next`, run again as soon as it returns, until every proposal is merged.

Three figures, each drain time measured from the first `hub next` to the last merge:
- one task at a time (`limits.parallel_tasks: 1`): each task alternates the two models, so every
  generation is preceded by a load;
- the scheduler (`limits.parallel_tasks` = the number of tasks): every task in flight, model calls
  through the GPU gate, the loaded model first;
- the lower bound: every generation back to back plus one load per distinct model.

Goals: the scheduler drains within 1.3x the lower bound, with at most 4 model loads for 8 tasks
(alternating costs 16).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo  # noqa: E402  (bench/, beside this script)

from hub.testing import FakeOllama  # noqa: E402  (the checkout, not an installed copy)
from hub.testing.fake_gpu import SimulatedGPU  # noqa: E402

IMPL = "impl-model"
REV = "rev-model"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
GOAL_RATIO = 1.3
GOAL_LOADS = 4
MAX_ROUNDS = 200
HUB_YAML = """\
project: bench
roles:
  implementer: {{model: {impl}, backend: {backend}}}
  local_reviewer: {{model: {rev}, backend: {backend}}}
models:
  {impl}: {{num_ctx: 8192}}
  {rev}: {{num_ctx: 8192}}
limits: {{parallel_tasks: {parallel}}}
ollama: {{slots: 1}}
judge:
  command: {judge}
"""
SCRUBBED = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def make_repo(folder: Path, tasks: int, parallel: int, judge_seconds: float, backend: str) -> Path:
    verdict = json.dumps({"verdict": "PASS", "blocking_issues": []})
    judge = f"sleep {judge_seconds:g} && echo {shlex.quote(verdict)}"
    text = HUB_YAML.format(impl=IMPL, rev=REV, parallel=parallel, judge=json.dumps(judge), backend=backend)
    files = {f"src/mod{n}.py": f"def value():\n    return {n}\n" for n in range(tasks)}
    return commit_repo(folder / "repo", {**files, "hub.yaml": text})


def implement(body: dict[str, Any]) -> str:
    """The implementer's answer: the target file, changed (found in the prompt)."""
    prompt = body["messages"][-1]["content"]
    found = re.search(r"### (src/mod\d+\.py)", prompt)
    path = found.group(1) if found else "src/mod0.py"
    return f"{path}\n```python\ndef value():\n    return 'changed'\n```\n"


def env_for(fake: FakeOllama) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED}
    env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="ERROR")
    return env


def hub(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )


def merged(repo: Path) -> int:
    try:
        doc = json.loads((repo / "_handoff" / "backlog.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return sum(1 for e in doc.get("tasks", []) if e.get("status") == "merged")


def drain(args: argparse.Namespace, parallel: int) -> dict[str, Any]:
    gpu = SimulatedGPU(slots=1, max_loaded=1, load_seconds=args.load, generation_seconds=args.generate)
    with tempfile.TemporaryDirectory(prefix="hub-bench-backlog-") as tmp, FakeOllama(gpu=gpu) as fake:
        fake.respond_with(IMPL, implement)
        fake.respond_with(REV, lambda _body: PASS_REVIEW)
        repo = make_repo(Path(tmp), args.tasks, parallel, args.judge, args.backend)
        env = env_for(fake)
        for n in range(args.tasks):
            proposal = (
                f"# Change mod{n}\n\nTarget: src/mod{n}.py\n\n## Requirements\n- value() returns 'changed'\n"
            )
            done = hub(repo, env, "backlog", "add", proposal)
            if done.returncode != 0:
                raise SystemExit(f"hub backlog add: {done.stderr}")
        started = time.perf_counter()
        rounds = 0
        while merged(repo) < args.tasks:
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise SystemExit(f"not drained after {MAX_ROUNDS} rounds of hub next: {merged(repo)} merged")
            done = hub(repo, env, "next")
            if done.returncode not in (0, 75):
                raise SystemExit(f"hub next exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        seconds = time.perf_counter() - started
        return {
            "parallel_tasks": parallel,
            "drain_seconds": round(seconds, 2),
            "hub_next_runs": rounds,
            "model_loads": gpu.stats.loads,
            "generations": gpu.stats.generations,
            "max_concurrent_generations": gpu.stats.max_concurrent,
            "load_order": [m for m, _ in gpu.stats.load_order],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--load", type=float, default=5.0, help="seconds per model load (default 5)")
    parser.add_argument("--generate", type=float, default=1.0, help="seconds per generation (default 1)")
    parser.add_argument("--judge", type=float, default=1.0, help="seconds the judge command takes")
    parser.add_argument(
        "--backend",
        choices=("ollama", "mcp"),
        default="ollama",
        help="how the phases reach the model (with --load 0 --generate 0: the hub's own overhead per task)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    one = drain(args, 1)
    scheduled = drain(args, args.tasks)
    generations = scheduled["generations"]
    # Guarded: with --load 0 --generate 0 there is no GPU time, and what is left is the hub's own.
    lower = max(generations * args.generate + 2 * args.load, 1e-9)
    report = {
        "tasks": args.tasks,
        "backend": args.backend,
        "load_seconds": args.load,
        "generation_seconds": args.generate,
        "judge_seconds": args.judge,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "one_at_a_time": one,
        "scheduler": scheduled,
        "lower_bound_seconds": round(lower, 2),
        "scheduler_ratio_to_lower_bound": round(scheduled["drain_seconds"] / lower, 2),
        "one_at_a_time_ratio_to_lower_bound": round(one["drain_seconds"] / lower, 2),
        "goals": {
            f"scheduler within {GOAL_RATIO}x the lower bound": scheduled["drain_seconds"]
            <= GOAL_RATIO * lower,
            f"at most {GOAL_LOADS} loads": scheduled["model_loads"] <= GOAL_LOADS,
        },
    }
    per_task = {
        name: row["drain_seconds"] / args.tasks for name, row in (("one", one), ("scheduler", scheduled))
    }
    report["seconds_per_task"] = {k: round(v, 2) for k, v in per_task.items()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{args.tasks} tasks, backend {args.backend}; load {args.load:g} s, generation {args.generate:g} s, "
        f"judge {args.judge:g} s"
    )
    print(f"{'':24}{'drain s':>10}{'loads':>8}{'gens':>6}{'x lower':>9}{'hub next':>10}")
    gpu_time = args.load > 0 or args.generate > 0
    for name, row in (("one task at a time", one), ("scheduler", scheduled)):
        ratio = f"{row['drain_seconds'] / lower:.2f}" if gpu_time else "-"
        print(
            f"{name:24}{row['drain_seconds']:>10.1f}{row['model_loads']:>8}{row['generations']:>6}"
            f"{ratio:>9}{row['hub_next_runs']:>10}"
        )
    if gpu_time:
        print(f"{'lower bound':24}{lower:>10.1f}{2:>8}{generations:>6}{1.0:>9.2f}")
    print(
        f"seconds per task (drain / tasks): one at a time {per_task['one']:.2f}, "
        f"scheduler {per_task['scheduler']:.2f}"
    )
    if gpu_time:  # without GPU time there is no lower bound to compare with: the hub's own overhead
        for goal, met in report["goals"].items():
            print(f"goal: {goal}: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
