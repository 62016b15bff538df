"""What the MCP bridge costs: one model call through a worker server against the same call made directly.

    .venv/bin/python bench/bench_bridge.py [--calls N] [--spawns N] [--json]

All paths talk to the same FakeOllama (a short scripted reply), so the differences are the bridge's own:
- direct: `OllamaProvider.generate` (httpx, streamed NDJSON), and a bare httpx POST with `stream: false`;
- hub: `WorkerClient.generate` -> MCP stdio -> `hub worker serve` (`ollama_run`) -> OllamaProvider;
- npm: `WorkerClient.generate` -> MCP stdio -> npm ollama-mcp 2.x (`ollama_chat`, non-streamed).
Call figures are medians of `--calls` calls after a warm-up, with the servers already up, the paths taking
turns call by call so that a busy machine weighs on all of them alike; spawn-to-ready
is from spawning the server to the end of the initialize handshake, median of `--spawns` starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hub.core.config import WorkerServer  # noqa: E402  (the checkout, not an installed copy)
from hub.testing import FakeOllama  # noqa: E402
from hub.workers.base import ChatRequest  # noqa: E402

REPLY = "def add(a, b):\n    return a + b\n"
MODEL = "bench-coder:7b"
WARMUP = 5
GOAL_ADDED_MS = 5.0
HUB_SERVER = WorkerServer(name="hub", command=(sys.executable, "-m", "hub", "worker", "serve"))
NPM_SERVER = WorkerServer(
    name="npm-ollama-mcp", command=("node", str(REPO / "node_modules" / "ollama-mcp" / "dist" / "index.js"))
)


def interleaved_ms(
    paths: dict[str, Callable[[], Any]], calls: int, warmup: int = WARMUP
) -> dict[str, list[float]]:
    """Time the paths in turn, one call each per round, so a busy machine weighs on all of them alike."""
    for fn in paths.values():
        for _ in range(warmup):
            fn()
    out: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(calls):
        for name, fn in paths.items():
            started = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - started) * 1000)
    return out


def summary(name: str, samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "name": name,
        "n": len(samples),
        "median_ms": round(statistics.median(samples), 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
    }


def bench_calls(fake: FakeOllama, calls: int, logs: Path) -> list[dict[str, Any]]:
    import httpx

    from hub.workers.bridge import WorkerClient
    from hub.workers.ollama import OllamaProvider

    request = ChatRequest(model=MODEL, prompt="write add(a, b)", num_ctx=4096)
    body = {"model": MODEL, "messages": [{"role": "user", "content": request.prompt}], "stream": False}

    def checked(worker: WorkerClient) -> Callable[[], None]:
        def call() -> None:
            if worker.generate(request).text != REPLY.strip():
                raise SystemExit(f"{worker.server.name}: wrong reply")

        return call

    with (
        OllamaProvider(fake.url) as provider,
        httpx.Client(base_url=fake.url) as http,
        WorkerClient(HUB_SERVER, fake.url, log_dir=logs) as hub_worker,
        WorkerClient(NPM_SERVER, fake.url, log_dir=logs) as npm_worker,
    ):
        hub_worker.connect()
        npm_worker.connect()
        paths: dict[str, Callable[[], Any]] = {
            "direct OllamaProvider (httpx, streamed)": lambda: provider.generate(request),
            "direct httpx POST (stream: false)": lambda: http.post("/api/chat", json=body).raise_for_status(),
            "bridge: hub worker serve (ollama_run)": checked(hub_worker),
            "bridge: npm ollama-mcp (ollama_chat)": checked(npm_worker),
        }
        samples = interleaved_ms(paths, calls)
    rows = [summary(name, values) for name, values in samples.items()]
    baseline = rows[0]["median_ms"]
    for row in rows:
        row["added_ms"] = round(row["median_ms"] - baseline, 3)
        row["ratio"] = round(row["median_ms"] / baseline, 2) if baseline else None
    return rows


def bench_spawn(fake: FakeOllama, spawns: int, logs: Path) -> list[dict[str, Any]]:
    from hub.workers.mcp_client import MCPClient

    rows = []
    for label, server in (("hub worker serve", HUB_SERVER), ("npm ollama-mcp", NPM_SERVER)):
        ready, stops = [], []
        for _ in range(spawns):
            client = MCPClient.for_server(server, env={"OLLAMA_HOST": fake.url}, log_dir=logs)
            started = time.perf_counter()
            client.start()
            ready.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            client.stop()
            stops.append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                **summary(f"spawn-to-ready: {label}", ready),
                "stop_median_ms": round(statistics.median(stops), 1),
            }
        )
    return rows


def render(calls: list[dict[str, Any]], spawns: list[dict[str, Any]]) -> str:
    lines = [f"{'per call (server up)':<48} {'median ms':>10} {'p90 ms':>9} {'added ms':>9} {'ratio':>6}"]
    for r in calls:
        lines.append(
            f"{r['name']:<48} {r['median_ms']:>10.2f} {r['p90_ms']:>9.2f} {r['added_ms']:>+9.2f} {r['ratio']:>6}"
        )
    lines.append("")
    lines.append(f"{'server start':<48} {'median ms':>10} {'p90 ms':>9} {'stop ms':>9}")
    for r in spawns:
        lines.append(
            f"{r['name']:<48} {r['median_ms']:>10.1f} {r['p90_ms']:>9.1f} {r['stop_median_ms']:>9.1f}"
        )
    hub_added = next(r["added_ms"] for r in calls if "hub worker serve" in r["name"])
    verdict = "met" if hub_added < GOAL_ADDED_MS else "NOT met"
    lines.append("")
    lines.append(
        f"goal: under {GOAL_ADDED_MS:g} ms added per call through hub worker serve: {verdict} ({hub_added:+.2f} ms)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50, help="calls per path (median)")
    parser.add_argument("--spawns", type=int, default=10, help="server starts per server (median)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")
    args = parser.parse_args(argv)

    from hub.core.log import configure

    configure("console", "WARNING")  # library DEBUG lines would swamp the table
    results: dict[str, Any] = {"cpus": os.cpu_count(), "calls": [], "spawns": []}
    with FakeOllama() as fake, tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp:
        fake.respond_with(MODEL, lambda body: REPLY)
        results["calls"] = bench_calls(fake, args.calls, Path(tmp))
        results["spawns"] = bench_spawn(fake, args.spawns, Path(tmp))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"MCP bridge vs direct, FakeOllama on loopback, {os.cpu_count()} cores")
        print(render(results["calls"], results["spawns"]))
    return results


if __name__ == "__main__":
    main()
