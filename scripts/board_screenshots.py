"""The README's pictures of `hub board`: the index, a task waiting for a verdict with its diff, a halt.

    .venv/bin/python scripts/board_screenshots.py [--out docs]

A throwaway repository where the real CLI moves three tasks against FakeOllama (no judge configured,
so they wait for a person's verdict), one of them then halted the way a phase halts it, and a proposal
left in the backlog; a real `hub board` serves them and the system's Chromium (Playwright) takes
`board-index.png`, `board-task.png` and `board-halt.png`.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hub.testing import FakeOllama  # noqa: E402  (the checkout, not an installed copy)

IMPL, REV = "qwen2.5-coder:7b", "qwen2.5-coder:14b"
HUB_YAML = f"""project: demo
roles:
  implementer: {{model: "{IMPL}", backend: mcp}}
  local_reviewer: {{model: "{REV}", backend: mcp}}
models:
  "{IMPL}": {{num_ctx: 8192}}
  "{REV}": {{num_ctx: 8192}}
limits: {{parallel_tasks: 4}}
"""
FILES = {
    "src/greet.py": 'def greet(name):\n    return "hello " + name\n',
    "src/slug.py": "def slug(text):\n    return text.lower()\n",
    "src/total.py": "def total(items):\n    return sum(items)\n",
}
CHANGED = {
    "src/greet.py": 'def greet(name: str) -> str:\n    """A polite greeting."""\n    return f"hello, {name}"\n',
    "src/slug.py": 'import re\n\n\ndef slug(text):\n    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")\n',
    "src/total.py": "def total(items):\n    return round(sum(items), 2)\n",
}
REVIEW = '{"passed": true, "critical": false, "issues": [{"severity": "minor", "description": "no test for an empty name"}]}'


def implement(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    for rel, text in CHANGED.items():
        if f"### {rel}" in prompt:
            return f"{rel}\n```python\n{text}```\n"
    return "no target"


def hub(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
    done = subprocess.run(
        [sys.executable, "-m", "hub", *args],
        cwd=repo,
        env=clean | (env or {}),
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 4):
        raise SystemExit(f"hub {' '.join(args)}: {done.stderr[-2000:]}")
    return done.stdout


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Demo")
    git(repo, "config", "user.email", "demo@example.invalid")
    for rel, text in {**FILES, "hub.yaml": HUB_YAML}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    hub(repo, "init")


def halt(repo: Path, task_id: str) -> None:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.run import Run
    from hub.state.breakers import Trip
    from hub.state.store import load
    from hub.state.triggers import Trigger

    ctx = Context(load_config(repo, env={}), task_id=task_id)
    trip = Trip(
        Trigger.CRITICAL_FLAW,
        "the local review found the slug of an empty title empty",
        {"finding": "slug('!!!') returns '' and the caller uses it as a file name"},
    )
    Run(ctx, load(ctx.handoff.contract), "review").halt(trip)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if not chromium:
        raise SystemExit("needs Chromium: `sudo apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="board-shots-") as folder:
        repo = Path(folder) / "demo"
        make_repo(repo)
        titles = {
            "src/greet.py": "Greet politely",
            "src/slug.py": "Slugs of any title",
            "src/total.py": "Round totals",
        }
        ids = {}
        for rel, title in titles.items():
            out = hub(repo, "new", "--title", title, "--requirement", f"{title.lower()}", "--target", rel)
            ids[rel] = out.strip().split()[-1] if out.strip() else ""
        hub(repo, "backlog", "add", "Retry a failed upload\n\nTarget: src/total.py")
        with FakeOllama({IMPL: implement, REV: lambda _b: REVIEW}) as fake:
            hub(repo, "next", "--until-idle", env={"OLLAMA_HOST": fake.url})
        tasks = sorted((repo / "_handoff" / "tasks").iterdir())
        by_title = {}
        from hub.state.store import load

        for folder_ in tasks:
            by_title[load(folder_ / "TASK_CONTRACT.json")["title"]] = folder_.name
        halted = by_title["Slugs of any title"]
        halt(repo, halted)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
        board = subprocess.Popen(
            [sys.executable, "-m", "hub", "board", "--port", "0"],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert board.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(board.stdout, selectors.EVENT_READ)
            selector.select(timeout=60)
        url = board.stdout.readline().removeprefix("board: ").strip()
        base, _, token = url.partition("/?token=")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium)
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                shots = {
                    "board-index.png": url,
                    "board-task.png": f"{base}/task/{by_title['Greet politely']}?token={token}",
                    "board-halt.png": f"{base}/task/{halted}?token={token}",
                }
                args.out.mkdir(parents=True, exist_ok=True)
                for name, target in shots.items():
                    page.goto(target)
                    page.screenshot(path=str(args.out / name), full_page=True)
                    print(args.out / name)
                browser.close()
        finally:
            board.terminate()
            board.wait(timeout=10)
            board.stdout.close()


if __name__ == "__main__":
    main()
