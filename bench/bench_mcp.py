"""The hub as an MCP server and as a watcher: what the extra layers cost.

    .venv/bin/python bench/bench_mcp.py [--repeat N] [--samples N]

Two measurements:
- `scan_code` on a 300-line Python file through `hub mcp serve` over stdio (the official client, one
  session, the call round trip only), against `ast-grep scan` run directly on the same file with the same
  rules (a process per scan, as a person or script would run it), and against `hub.review.scan.scan_code`
  called in process (the function the tool wraps). Medians in milliseconds.
- The time from a contract becoming due (TASK_CONTRACT.json written atomically) to `hub watch` starting
  its phase (the phase taking the handoff lock), with file-system events and with `--poll`; each sample
  then runs the task to a merge (FakeOllama models, a command judge) so the next starts from an idle
  watcher. Also the start-up of a bare `python -m hub --version`, the floor of a phase child.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo  # noqa: E402  (bench/, beside this script)

from hub.core.log import configure  # noqa: E402
from hub.review import rules  # noqa: E402  (the checkout, not an installed copy)
from hub.review.scan import scan_code  # noqa: E402

JUDGE_PASS = (
    "import json, os, sys\n"
    "sys.stdin.read()\n"
    "with open(os.environ['HUB_JUDGE_REPORT'], 'w', encoding='utf-8') as f:\n"
    "    json.dump({'verdict': 'PASS', 'summary': 'ok'}, f)\n"
)


def ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def make_repo(path: Path, hub_yaml: str = "project: bench\n") -> Path:
    app = 'def greet(name):\n    return "hello " + name\n'
    return commit_repo(path, {"src/app.py": app, "hub.yaml": hub_yaml})


# --- scan_code through MCP ------------------------------------------------------------------------------


def three_hundred_lines() -> str:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines = (stdlib / "subprocess.py").read_text(encoding="utf-8").splitlines()[300:600]
    return "\n".join(lines) + "\nresult = eval(user_input)\n"


def bench_scan(work: Path, repeat: int) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    repo = make_repo(work / "scan-repo")
    code = three_hundred_lines()
    source = work / "scanned.py"
    source.write_text(code, encoding="utf-8")
    config = work / "sgconfig.yml"
    config.write_text(f"ruleDirs:\n  - {rules.packaged_rules_dir()}\n", encoding="utf-8")
    binary = rules.ast_grep_binary()

    def direct() -> int:
        done = subprocess.run(
            [binary, "scan", "-c", str(config), "--json=stream", source.name],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        return sum(1 for line in done.stdout.splitlines() if line.strip())

    def in_process() -> int:
        return len(scan_code(code, "python", repo))

    async def sampled() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "hub", "--repo", str(repo), "mcp", "serve"],
            env={"HUB_LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO)},
            cwd=str(repo),
        )
        spawned = time.perf_counter()
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60.0) as session,
        ):
            await session.initialize()
            ready = time.perf_counter() - spawned
            args = {"code": code, "language": "python"}
            # Warm all three (rule files read and cached, the binary in the OS cache), then sample them in
            # turn so that load from elsewhere on the machine hits each alike.
            first = await session.call_tool("scan_code", args)
            found = len((first.structured_content or {}).get("issues", []))
            direct()
            in_process()
            taken: dict[str, list[float]] = {"mcp": [], "direct": [], "local": []}
            for _ in range(repeat):
                started = time.perf_counter()
                await session.call_tool("scan_code", args)
                taken["mcp"].append(time.perf_counter() - started)
                for name, fn in (("direct", direct), ("local", in_process)):
                    started = time.perf_counter()
                    fn()
                    taken[name].append(time.perf_counter() - started)
        return {"taken": taken, "found": found, "ready": ready}

    result = anyio.run(sampled)
    taken = result["taken"]
    return {
        "lines": code.count("\n"),
        "findings": {"mcp": result["found"], "ast-grep": direct(), "in_process": in_process()},
        "scan_code_via_mcp_ms": ms(taken["mcp"]),
        "ast_grep_cli_direct_ms": ms(taken["direct"]),
        "scan_code_in_process_ms": ms(taken["local"]),
        "mcp_server_spawn_to_initialized_ms": round(result["ready"] * 1000, 1),
        "repeat": repeat,
    }


# --- contract due -> watch starts the phase ----------------------------------------------------------


def wait_until(predicate: Any, seconds: float, step: float = 0.001) -> float:
    """perf_counter() at the first moment predicate() holds (a bench may poll; tests may not)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if predicate():
            return time.perf_counter()
        time.sleep(step)
    raise SystemExit(f"timed out after {seconds}s waiting for {predicate}")


def bench_watch(work: Path, samples: int, poll: bool) -> dict[str, Any]:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.setup import create
    from hub.testing import FakeOllama

    judge = work / "judge.py"
    judge.write_text(JUDGE_PASS, encoding="utf-8")
    hub_yaml = f"""project: bench
roles:
  implementer: {{model: impl, backend: ollama}}
  local_reviewer: {{model: rev, backend: ollama}}
judge:
  command: {json.dumps(f"{shlex.quote(sys.executable)} {shlex.quote(str(judge))}")}
"""
    repo = make_repo(work / ("watch-poll" if poll else "watch-events"), hub_yaml)
    counter = {"n": 0}

    def implement(_body: dict[str, Any]) -> str:
        counter["n"] += 1
        return f'src/app.py\n```python\ndef greet(name):\n    return "hello {counter["n"]}, " + name\n```\n'

    latencies = []
    with FakeOllama() as fake:
        fake.add_model("impl")
        fake.add_model("rev")
        fake.respond_with("impl", implement)
        fake.respond_with("rev", lambda _body: '{"passed": true, "critical": false, "issues": []}')
        env = {**os.environ, "OLLAMA_HOST": fake.url, "PYTHONPATH": str(REPO), "HUB_LOG_FORMAT": "json"}
        argv = [sys.executable, "-m", "hub", "watch", "--interval", "30", *(["--poll"] if poll else [])]
        watcher = subprocess.Popen(
            argv, cwd=repo, env=env, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        root = Context(load_config(repo, env={})).handoff_root
        try:
            wait_until(lambda: root.dir.is_dir(), 30)
            time.sleep(1.0)  # let the watcher settle into waiting
            for i in range(samples):
                ctx = Context(load_config(repo, env={}))
                made = create(
                    ctx, {"title": f"Greet {i}", "requirements": ["a comma"], "target_file": "src/app.py"}
                )
                due = time.perf_counter()  # the contract is on disk: due from here, as for `hub next` below
                hand = ctx.for_task(str(made.task_id)).handoff  # the task's own folder, lock and contract
                started = wait_until(lambda h=hand: h.lock_owner.exists(), 60)
                latencies.append(started - due)
                # Let the task run to its merge so the next sample starts from an idle watcher.
                wait_until(lambda h=hand: not h.contract.exists() and not h.lock_owner.exists(), 120, 0.02)
                time.sleep(0.5)
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
    return {
        "mode": "polling" if poll else "events",
        "samples": samples,
        "due_to_phase_start_ms": ms(latencies),
    }


def bench_hub_next(work: Path, samples: int) -> float:
    """The floor under the watcher's figure: `hub next` spawned by hand on a due contract, to its lock."""
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.setup import create

    env = {**os.environ, "PYTHONPATH": str(REPO), "HUB_LOG_LEVEL": "WARNING"}
    latencies = []
    for i in range(samples):
        # A repository per sample: the task set up here would otherwise be due again in the next.
        repo = make_repo(work / f"next-direct-{i}")
        ctx = Context(load_config(repo, env={}))
        outcome = create(
            ctx, {"title": f"Greet {i}", "requirements": ["a comma"], "target_file": "src/app.py"}
        )
        hand = ctx.for_task(str(outcome.task_id)).handoff
        due = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "hub", "next"], cwd=repo, env=env, stdout=subprocess.DEVNULL
        )
        latencies.append(wait_until(lambda h=hand: h.lock_owner.exists(), 60) - due)
        child.wait(timeout=60)
    return ms(latencies)


def bare_startup(repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hub", "--version"], capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return ms(samples)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="scan_code calls per variant")
    parser.add_argument("--samples", type=int, default=7, help="contracts per watcher mode")
    args = parser.parse_args(argv)
    configure("console", "WARNING")
    work = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        results = {
            "scan_code": bench_scan(work, args.repeat),
            "watch": [
                bench_watch(work, args.samples, poll=False),
                bench_watch(work, args.samples, poll=True),
            ],
            "hub_next_spawned_directly_ms": bench_hub_next(work, args.samples),
            "python_-m_hub_--version_ms": bare_startup(10),
            "cpus": os.cpu_count(),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    scan = results["scan_code"]
    print(f"scan_code on {scan['lines']} lines (median of {scan['repeat']}):")
    print(f"  through hub mcp serve (stdio)  {scan['scan_code_via_mcp_ms']:8.1f} ms")
    print(f"  ast-grep scan run directly     {scan['ast_grep_cli_direct_ms']:8.1f} ms")
    print(f"  hub.review.scan.scan_code in process {scan['scan_code_in_process_ms']:8.1f} ms")
    print(f"  (server spawn to initialized   {scan['mcp_server_spawn_to_initialized_ms']:8.1f} ms, once)")
    for w in results["watch"]:
        print(
            f"contract due -> hub watch starts the phase ({w['mode']}, median of {w['samples']}): "
            f"{w['due_to_phase_start_ms']:.1f} ms"
        )
    print(
        f"contract due -> `hub next` spawned by hand takes the lock: {results['hub_next_spawned_directly_ms']:.1f} ms"
    )
    print(f"python -m hub --version: {results['python_-m_hub_--version_ms']:.1f} ms")
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
