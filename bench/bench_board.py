"""`hub board` with 50 tasks: how fast a page loads, how soon a transition shows, and that nothing is
served without the token or to another site.

    .venv/bin/python bench/bench_board.py [--tasks 50] [--loads 20] [--updates 5] [--json]

A repository with `--tasks` tasks made by `hub.phases.setup.create` (the contracts `hub new` writes) and a
real `hub board` process on a free port. Three figures:
- load: the index page (`GET /`, every task's `hub status` view) and its live part (`GET /live`, what
  the page polls), median and worst of `--loads` requests over one keep-alive connection;
- update: a task halted in-process (a transition as any phase records it), from the contract's write
  until the index open in Chromium (Playwright, the system's `chromium`) shows it, without a reload:
  median and worst of `--updates`;
- refused: requests without the token, with a wrong one, naming another Host or from another Origin,
  and a cross-site POST: how many were served (must be 0).

Goals: load under 300 ms (median), update within 1 s, 0 served.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import statistics
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

GOAL_LOAD_MS = 300.0
GOAL_UPDATE_MS = 1000.0


def make_tasks(repo: Path, count: int) -> list[str]:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.setup import create

    ctx = Context(load_config(repo, env={}))
    ids = []
    for n in range(count):
        outcome = create(
            ctx,
            {"title": f"Task {n}", "requirements": [f"requirement {n}"], "target_file": "src/app.py"},
        )
        ids.append(str(outcome.task_id))
    return ids


def halt(repo: Path, task_id: str) -> None:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.run import Run
    from hub.state.breakers import Trip
    from hub.state.store import load
    from hub.state.triggers import Trigger

    ctx = Context(load_config(repo, env={}), task_id=task_id)
    Run(ctx, load(ctx.handoff.contract), "bench").halt(Trip(Trigger.CRITICAL_FLAW, "bench halt", {}))


def start_board(repo: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "hub", "board", "--port", "0"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.select(timeout=60)
    line = process.stdout.readline()
    if not line.startswith("board: "):
        process.kill()
        raise SystemExit(f"hub board printed no URL: {line!r}")
    return process, line.removeprefix("board: ").strip()


def measure_loads(url: str, loads: int) -> dict[str, float]:
    import httpx

    base, _, token = url.partition("/?token=")
    figures: dict[str, float] = {}
    with httpx.Client() as client:
        for name, target in (("index", url), ("live", f"{base}/live?token={token}")):
            client.get(target).raise_for_status()  # warm: the first request imports the views
            times = []
            for _ in range(loads):
                started = time.perf_counter()
                client.get(target).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
            figures[f"{name}_median_ms"] = round(statistics.median(times), 1)
            figures[f"{name}_max_ms"] = round(max(times), 1)
    return figures


def measure_updates(repo: Path, url: str, ids: list[str], updates: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if not chromium:
        raise SystemExit("bench_board needs Chromium: `sudo apt-get install -y chromium`")
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        page.goto(url)
        for task_id in ids[:updates]:
            row = page.locator("#live tr", has_text=task_id).first
            row.wait_for()
            halt(repo, task_id)
            # From the transition's write (the contract's mtime, wall clock), not from the call: the
            # hub's own cost of halting is not the board's.
            contract = next((repo / "_handoff" / "tasks").glob(f"{task_id}/TASK_CONTRACT.json"))
            written = contract.stat().st_mtime_ns
            page.wait_for_function(
                "id => [...document.querySelectorAll('#live tr')].some("
                "r => r.textContent.includes(id + '') && r.textContent.includes('erik_consultation'))",
                arg=task_id,
                polling="raf",
                timeout=10_000,
            )
            times.append((time.time_ns() - written) / 1e6)
        browser.close()
    return {"update_median_ms": round(statistics.median(times), 1), "update_max_ms": round(max(times), 1)}


def count_refused(url: str, task_id: str) -> dict[str, int]:
    import httpx

    base, _, token = url.partition("/?token=")
    port = base.rsplit(":", 1)[1]
    tries: list[tuple[str, str, dict[str, str]]] = [
        ("GET", f"{base}/", {}),
        ("GET", f"{base}/?token=", {}),
        ("GET", f"{base}/?token={token[:-1]}", {}),
        ("GET", f"{base}/live?token=wrong", {}),
        ("GET", url, {"Host": f"evil.example:{port}"}),
        ("GET", url, {"Host": "attacker.test"}),
        ("GET", url, {"Origin": "http://evil.example"}),
        ("GET", f"{base}/live?token={token}", {"Origin": f"http://localhost:{int(port) + 1}"}),
        ("POST", f"{base}/task/{task_id}/resume?token={token}", {"Origin": "http://evil.example"}),
        ("POST", f"{base}/task/{task_id}/resume?token={token}", {}),
        ("POST", f"{base}/task/{task_id}/resume?token={token}", {"Origin": "null"}),
        ("POST", f"{base}/task/{task_id}/resume", {"Origin": base}),
    ]
    served = 0
    for method, target, headers in tries:
        answer = httpx.request(method, target, headers=headers, data={"to": "pending_implementer"})
        served += answer.status_code < 400
    return {"refusal_tries": len(tries), "served_without_token_or_from_another_origin": served}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from hub.core.config import default_yaml

    with tempfile.TemporaryDirectory(prefix="bench-board-") as folder:
        repo = commit_repo(
            Path(folder) / "repo",
            {"hub.yaml": default_yaml("bench"), "src/app.py": "def greet(name):\n    return name\n"},
        )
        ids = make_tasks(repo, args.tasks)
        process, url = start_board(repo)
        try:
            figures: dict[str, Any] = {"tasks": args.tasks}
            figures |= measure_loads(url, args.loads)
            figures |= count_refused(url, ids[-1])
            figures |= measure_updates(repo, url, ids, args.updates)
        finally:
            process.terminate()
            process.wait(timeout=10)
            if process.stdout:
                process.stdout.close()
    figures["goals_met"] = (
        figures["index_median_ms"] < GOAL_LOAD_MS
        and figures["update_max_ms"] < GOAL_UPDATE_MS
        and figures["served_without_token_or_from_another_origin"] == 0
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"{args.tasks} tasks: index {figures['index_median_ms']} ms median ({figures['index_max_ms']} max), "
            f"live part {figures['live_median_ms']} ms (goal < {GOAL_LOAD_MS:.0f} ms)\n"
            f"a transition on the open page: {figures['update_median_ms']} ms median "
            f"({figures['update_max_ms']} max; goal < {GOAL_UPDATE_MS:.0f} ms)\n"
            f"served without the token or from another origin: "
            f"{figures['served_without_token_or_from_another_origin']} of {figures['refusal_tries']} tries (goal 0)\n"
            f"goals met: {figures['goals_met']}"
        )
    return figures


if __name__ == "__main__":
    main()
