"""`hub board` in a real browser: Playwright drives the system's Chromium (Debian `chromium`) against a
real `hub board` process, while the real CLI moves the tasks (FakeOllama as the model server).

The page is never reloaded by the test: each state must reach it through the page's own live updates.
Without Chromium these tests fail (never skip): the message says what to install.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hub.phases.context import Context
from hub.state.breakers import Trip
from hub.state.store import load
from hub.state.triggers import Trigger
from hub.testing import FakeOllama

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import HubRunner, TaskDriver
    from playwright.sync_api import Browser, Page

# Bounds, not sleeps: the page polls twice a second; a phase on two busy cores takes a few seconds.
SHOWN_MS = 20_000
IMPL, REV = "impl-model", "rev-model"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
VERDICT = json.dumps({"verdict": "PASS", "blocking_issues": []})
CHANGED = 'def greet(name):\n    return "hello, " + name\n'


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail(
            "the board's browser tests need Chromium: `sudo apt-get install -y chromium` "
            "(Debian's package; .ci/run installs it)",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=SHOWN_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path())
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(SHOWN_MS)
    opened = context.new_page()
    yield opened
    context.close()


def start_board(repo: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """A real `hub board` on a free port, and the URL it printed (within 30 s)."""
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
        ready = selector.select(timeout=30)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("board: "):
        process.kill()
        pytest.fail(f"`hub board` printed no URL within 30 s: {line!r}")
    return process, line.removeprefix("board: ").strip()


@pytest.fixture
def board(git_repo: Path) -> Callable[[], str]:
    """Start the board on the test's repository (after the test configured it); stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start() -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "OLLAMA_"))}
        process, url = start_board(git_repo, env)
        started.append(process)
        return url

    yield start  # type: ignore[misc]
    for process in started:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def configure_command_judge(repo: Path, run_git: Callable[..., str]) -> None:
    (repo / "hub.yaml").write_text(
        f"""project: demo
roles:
  implementer: {{model: {IMPL}, backend: mcp}}
  local_reviewer: {{model: {REV}, backend: mcp}}
models:
  {IMPL}: {{num_ctx: 8192}}
  {REV}: {{num_ctx: 8192}}
judge:
  command: {json.dumps("echo " + json.dumps(VERDICT))}
""",
        encoding="utf-8",
    )
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "configure the hub")


def implement(_body: dict[str, Any]) -> str:
    return f"src/app.py\n```python\n{CHANGED}```\n"


def test_page_shows_a_task_from_the_backlog_to_merged_as_the_cli_moves_it(
    git_repo: Path, hub: HubRunner, run_git: Callable[..., str], board: Callable[[], str], page: Page
) -> None:
    from playwright.sync_api import expect

    configure_command_judge(git_repo, run_git)
    page.goto(board())
    expect(page.locator("#live")).to_contain_text("the backlog is empty")
    proposal = git_repo.parent / "proposal.md"
    proposal.write_text("# Greet politely\n\n## Requirements\n\n- say hello, NAME\n\nTarget: src/app.py\n")
    assert hub("backlog", "add", "--file", str(proposal)).returncode == 0
    expect(page.locator("#live tr", has_text="Greet politely")).to_contain_text("proposed")

    shown = []
    with FakeOllama({IMPL: implement, REV: lambda _b: PASS_REVIEW}) as fake:
        for _ in range(12):
            ran = hub("next", env={"OLLAMA_HOST": fake.url}, timeout=120)
            assert ran.returncode == 0, ran.stderr[-2000:]
            tasks = git_repo / "_handoff" / "tasks"
            live = (
                [p for p in tasks.iterdir() if (p / "TASK_CONTRACT.json").exists()] if tasks.is_dir() else []
            )
            if not live:
                break
            contract = load(live[0] / "TASK_CONTRACT.json")
            row = page.locator("#live tr", has_text=contract["task_id"]).first
            expect(row).to_contain_text(contract["status"])
            shown.append(contract["status"])

    task_id = next((git_repo / "_handoff" / "archive").iterdir()).name
    expect(page.locator("#live tr", has_text=task_id).first).to_contain_text("merged")
    expect(page.locator("#live tr", has_text="Greet politely").last).to_contain_text("merged")
    assert {"pending_implementer", "pending_local_review", "pending_judge_review"} <= set(shown), shown
    assert run_git(git_repo, "show", "main:src/app.py") == CHANGED.rstrip("\n")

    page.locator("#live a", has_text=task_id).click()
    expect(page.locator("main")).to_contain_text("say hello, NAME")
    expect(page.locator("#live")).to_contain_text("merged")
    expect(page.locator("main")).to_contain_text("model-call")


def halt(ctx: Context, task: TaskDriver) -> str:
    task_id = task.new(title="Halted task")
    bound = type(task)(ctx.for_task(task_id))
    bound.setup()
    bound.implement()
    bound.run().halt(Trip(Trigger.CRITICAL_FLAW, "the change deletes the tests", {"deleted": "tests/"}))
    return task_id


def test_halt_is_resumed_and_a_verdict_given_from_the_page(
    git_repo: Path, ctx: Context, task: TaskDriver, board: Callable[[], str], page: Page
) -> None:
    from playwright.sync_api import expect

    halted = halt(ctx, task)
    judged = task.new(title="Judged task", target="README.md")
    type(task)(ctx.for_task(judged)).to_judge_review({"README.md": "# demo, changed\n"})
    url = board()
    base, _, token = url.partition("/?token=")

    page.goto(f"{base}/task/{halted}?token={token}")
    expect(page.locator("main .md").first).to_contain_text("critical_flaw")
    note = page.locator("form", has_text="resume to pending_implementer").locator("textarea")
    expect(note).to_have_attribute("required", "")
    note.fill("the tests are kept now")
    page.get_by_role("button", name="Resume to pending_implementer").click()
    expect(page.locator(".flash")).to_contain_text("pending_implementer")
    expect(page.locator("#live")).to_contain_text("pending_implementer")
    contract = load(ctx.for_task(halted).handoff.contract)
    assert contract["status"] == "pending_implementer"
    assert "the tests are kept now" in json.dumps(contract["handoff_data"])

    page.goto(f"{base}/task/{judged}?token={token}")
    expect(page.locator(".highlight")).to_contain_text("# demo, changed")
    page.locator("textarea[name=blocking]").fill("README lost its title")
    page.get_by_role("button", name="FAIL").click()
    expect(page.locator(".flash")).to_contain_text("FAIL")
    contract = load(ctx.for_task(judged).handoff.contract)
    assert contract["handoff_data"]["judge_verdict"] == "FAIL"
    assert contract["handoff_data"]["judge_blocking_issues"][0]["description"] == "README lost its title"
    expect(page.locator("main")).to_contain_text("README lost its title")
