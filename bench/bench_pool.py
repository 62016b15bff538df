"""A pool of two model servers (`ollama.hosts`) draining a backlog, with one server killed midway.

    .venv/bin/python bench/bench_pool.py [--tasks 8] [--generate 0.5] [--repeat 3] [--json]

Two FakeOllamas, each with a simulated GPU (one slot, both models loaded, `--generate` seconds per
generation), serve a backlog of `--tasks` proposals (each on its own file, every task in flight). Cron
is played by `hub next`, run again as soon as it returns, until every proposal is merged or halted.

Two drains, `--repeat` times each (medians reported):
- both servers up throughout (the baseline);
- the first server killed (stopped: refused connections, its calls in flight reset) once it has
  answered a quarter of the generations the drain needs, and never back.

Reported: tasks merged and halted, drain seconds, the time the kill cost beyond the baseline, and the
calls each server answered. Goal: every task merged, none halted, and the kill costing seconds (a
server mark and a retry), not limits.server_wait_minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
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
MAX_ROUNDS = 300
SCRUBBED = ("OLLAMA_HOST", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
HUB_YAML = """\
project: bench
roles:
  implementer: {{model: {impl}, backend: ollama}}
  local_reviewer: {{model: {rev}, backend: ollama}}
models:
  {impl}: {{num_ctx: 8192}}
  {rev}: {{num_ctx: 8192}}
limits: {{parallel_tasks: {tasks}, server_wait_minutes: 5}}
ollama: {{hosts: {hosts}}}
judge:
  command: {judge}
"""


def implement(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    found = re.search(r"### (src/mod\d+\.py)", prompt)
    path = found.group(1) if found else "src/mod0.py"
    return f"{path}\n```python\ndef value():\n    return 'changed'\n```\n"


def backlog(repo: Path) -> dict[str, int]:
    try:
        doc = json.loads((repo / "_handoff" / "backlog.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, int] = {}
    for entry in doc.get("tasks", []):
        out[str(entry.get("status"))] = out.get(str(entry.get("status")), 0) + 1
    return out


def halted(repo: Path) -> int:
    return len(list((repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md")))


def drain(tasks: int, generate: float, kill: bool) -> dict[str, Any]:
    servers = [
        FakeOllama({IMPL: implement, REV: lambda _b: PASS_REVIEW}, gpu=SimulatedGPU(1, 2, 0.0, generate))
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    first, second = servers
    killed_at: list[float] = []
    stop_watch = threading.Event()

    def killer() -> None:
        # A quarter of the drain's generations (two per task) answered by the first server, then kill.
        while not stop_watch.wait(0.02):
            if first.gpu is not None and first.gpu.stats.generations >= max(1, tasks // 2):
                first.stop()
                killed_at.append(time.perf_counter())
                return

    try:
        with tempfile.TemporaryDirectory(prefix="hub-bench-pool-") as tmp:
            verdict = json.dumps({"verdict": "PASS", "blocking_issues": []})
            text = HUB_YAML.format(
                impl=IMPL,
                rev=REV,
                tasks=tasks,
                hosts=json.dumps([s.url for s in servers]),
                judge=json.dumps(f"echo {shlex.quote(verdict)}"),
            )
            files = {f"src/mod{n}.py": f"def value():\n    return {n}\n" for n in range(tasks)}
            repo = commit_repo(Path(tmp) / "repo", {**files, "hub.yaml": text})
            env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_") and k not in SCRUBBED}
            env.update(HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="ERROR")

            def hub(*args: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [sys.executable, "-m", "hub", *args], cwd=repo, env=env, capture_output=True, text=True
                )

            for n in range(tasks):
                proposal = (
                    f"# Change mod{n}\n\nTarget: src/mod{n}.py\n\n## Requirements\n- value() is 'changed'\n"
                )
                done = hub("backlog", "add", proposal)
                if done.returncode != 0:
                    raise SystemExit(f"hub backlog add: {done.stderr}")
            watch = threading.Thread(target=killer, daemon=True)
            if kill:
                watch.start()
            started = time.perf_counter()
            rounds = 0
            errors: list[str] = []
            while backlog(repo).get("merged", 0) + halted(repo) < tasks:
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise SystemExit(f"not drained after {MAX_ROUNDS} rounds of hub next: {backlog(repo)}")
                done = hub("next")
                if done.returncode == 1:
                    # Concurrent set-ups racing on git's worktree records (issue 23's to fix): the
                    # task stays pending and the next round sets it up. Counted, not hidden.
                    errors.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "exit 1")
                elif done.returncode not in (0, 4, 75):
                    raise SystemExit(f"hub next exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
            seconds = time.perf_counter() - started
            stop_watch.set()
            return {
                "killed": kill,
                "killed_after_seconds": round(killed_at[0] - started, 2) if killed_at else None,
                "merged": backlog(repo).get("merged", 0),
                "halted": halted(repo),
                "drain_seconds": round(seconds, 2),
                "hub_next_runs": rounds,
                "hub_next_exit_1": len(errors),
                "calls_per_server": [len(s.chat_requests()) for s in servers],
            }
    finally:
        stop_watch.set()
        for server in servers:
            server.stop()
        del second


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--generate", type=float, default=0.5, help="seconds per generation (default 0.5)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "killed": []}
    for _ in range(args.repeat):
        runs["baseline"].append(drain(args.tasks, args.generate, kill=False))
        runs["killed"].append(drain(args.tasks, args.generate, kill=True))
    base = statistics.median(r["drain_seconds"] for r in runs["baseline"])
    hit = statistics.median(r["drain_seconds"] for r in runs["killed"])
    report = {
        "tasks": args.tasks,
        "generation_seconds": args.generate,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "runs": runs,
        "median_drain_seconds": {"baseline": base, "killed": hit},
        "kill_cost_seconds": round(hit - base, 2),
        "ratio": round(hit / base, 2),
        "goals": {
            "every task merged, none halted": all(
                r["merged"] == args.tasks and r["halted"] == 0 for rs in runs.values() for r in rs
            ),
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.tasks} tasks on two servers, generation {args.generate:g} s, {args.repeat} runs each")
    print(f"{'':10}{'merged':>8}{'halted':>8}{'drain s':>9}{'killed at s':>12}{'calls A/B':>11}{'exit 1':>8}")
    for name, rows in runs.items():
        for row in rows:
            at = "-" if row["killed_after_seconds"] is None else f"{row['killed_after_seconds']:.1f}"
            calls = "/".join(str(c) for c in row["calls_per_server"])
            print(
                f"{name:10}{row['merged']:>8}{row['halted']:>8}{row['drain_seconds']:>9.1f}{at:>12}{calls:>11}"
                f"{row['hub_next_exit_1']:>8}"
            )
    print(
        f"median drain: baseline {base:.1f} s, one server killed {hit:.1f} s: +{hit - base:.1f} s ({hit / base:.2f}x)"
    )
    print("goals:", ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in report["goals"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
