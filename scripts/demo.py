"""`make demo`: one whole task through every phase, against the bundled FakeOllama.

A temporary git repository, a contract, FakeOllama scripted as the implementer and the local reviewer,
every phase run through the real `hub` CLI (the implementer through the MCP worker server), a
scripted PASS verdict, and a merged branch. Then a second task whose first model answer is empty:
a stall, strike 1, recovered on the next attempt.

    python scripts/demo.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from hub.testing import FakeOllama, Reply

IMPLEMENTER = "demo-coder:7b"
REVIEWER = "demo-reviewer:7b"

CALC = """\
def add(a: float, b: float) -> float:
    return a + b
"""

CALC_WITH_SUB = '''\
def add(a: float, b: float) -> float:
    return a + b


def sub(a: float, b: float) -> float:
    """a minus b."""
    return a - b
'''

CALC_WITH_MUL = (
    CALC_WITH_SUB
    + '''

def mul(a: float, b: float) -> float:
    """a times b."""
    return a * b
'''
)

REVIEW_OK = '<think>The diff adds one pure function. Nothing unsafe.</think>\n```json\n{"passed": true, "critical": false, "issues": []}\n```'

HUB_YAML = f"""\
project: demo
roles:
  implementer:
    model: {IMPLEMENTER}
    backend: mcp          # through `hub worker serve`, the MCP worker server
    timeouts: {{first_token: 20, stall: 10, total: 60}}
  local_reviewer:
    model: {REVIEWER}
    backend: ollama       # straight to Ollama's HTTP API
    timeouts: {{first_token: 20, stall: 10, total: 60}}
models:
  {IMPLEMENTER}: {{num_ctx: 8192}}
  {REVIEWER}: {{num_ctx: 8192}}
"""

BOLD, DIM, GREEN, YELLOW, RESET = (
    ("\033[1m", "\033[2m", "\033[32m", "\033[33m", "\033[0m") if sys.stdout.isatty() else ("",) * 5
)


def answer(path: str, content: str, prose: str = "Here is the change.") -> str:
    return f"{prose}\n\n{path}\n```python\n{content}```\n"


class Demo:
    def __init__(self, repo: Path, fake: FakeOllama) -> None:
        self.repo = repo
        self.env = {
            **os.environ,
            "OLLAMA_HOST": fake.url,
            "HUB_LOG_FORMAT": "json",
            "HUB_LOG_LEVEL": "WARNING",
        }

    def sh(self, *args: str) -> str:
        return subprocess.run(args, cwd=self.repo, check=True, capture_output=True, text=True).stdout

    def hub(self, *args: str, expect: int = 0) -> str:
        print(f"{BOLD}$ hub {' '.join(args)}{RESET}")
        proc = subprocess.run(
            [sys.executable, "-m", "hub", *args], cwd=self.repo, env=self.env, capture_output=True, text=True
        )
        out = proc.stdout.strip()
        if out:
            print(textwrap.indent(out, "  "))
        if proc.returncode != expect:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"demo: `hub {' '.join(args)}` exited {proc.returncode}, expected {expect}")
        return out

    def transitions(self) -> list[str]:
        path = self.repo / "_handoff" / "transition.ndjson"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def step(self, *args: str, expect: int = 0) -> None:
        """Run one hub command and print the transitions it recorded."""
        seen = len(self.transitions())
        self.hub(*args, expect=expect)
        for line in self.transitions()[seen:]:
            t = json.loads(line)
            print(
                f"  {DIM}transition{RESET} {t['old_status']} {GREEN}-[{t['event']}]->{RESET} {t['new_status']}"
                f"  {DIM}({t['status_reason']}){RESET}"
            )

    def judge_pass(self) -> None:
        report = {
            "verdict": "PASS",
            "summary": "Meets the requirements.",
            "blocking_issues": [],
            "usage": {"prompt_tokens": 900, "completion_tokens": 40, "model": "scripted judge"},
        }
        # Each task has its folder; the judge's report goes beside the review request it answers.
        (folder,) = (p.parent for p in (self.repo / "_handoff" / "tasks").glob("*/REVIEW_REQUEST.md"))
        (folder / "JUDGE_REPORT.json").write_text(json.dumps(report), encoding="utf-8")
        print(f"{DIM}(the judge writes _handoff/tasks/{folder.name}/JUDGE_REPORT.json: PASS){RESET}")


def make_repo(root: Path) -> Path:
    repo = root / "calc"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "demo@example.invalid"],
        ["config", "user.name", "hub demo"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "calc.py").write_text(CALC, encoding="utf-8")
    (repo / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "calc: add"], cwd=repo, check=True)
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", action="store_true", help="keep the demo repository and print where it is")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hub-demo-"))
    try:
        run(root)
    finally:
        if args.keep:
            print(f"\nthe demo repository is in {root / 'calc'}")
        else:
            subprocess.run(["rm", "-rf", str(root)], check=False)


def run(root: Path) -> None:
    repo = make_repo(root)
    with FakeOllama() as fake:
        demo = Demo(repo, fake)
        print(f"{BOLD}agent-hub demo{RESET}: a repository at {repo}, FakeOllama at {fake.url}\n")
        demo.hub("init")
        (repo / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
        demo.sh("git", "add", "hub.yaml")
        demo.sh("git", "commit", "-q", "-m", "hub: configure")

        print(f"\n{BOLD}1. A task through every phase{RESET}\n")
        fake.script(IMPLEMENTER, answer("calc.py", CALC_WITH_SUB))
        fake.script(REVIEWER, REVIEW_OK)
        demo.step(
            "new",
            "--title",
            "Add sub",
            "--requirement",
            "add sub(a, b) returning a - b",
            "--target",
            "calc.py",
            "--acceptance-command",
            f"{sys.executable} -c 'import calc; assert calc.sub(5, 3) == 2'",
        )
        demo.step("setup-task")
        demo.step("run-implementer")
        demo.step("run-local-review")
        demo.judge_pass()
        demo.step("report-judge")
        demo.step("finalize-task")
        merged = demo.sh("git", "show", "main:calc.py")
        assert merged == CALC_WITH_SUB, "the base branch does not hold the scripted file"
        print(f"\n{GREEN}merged{RESET}: main now holds the implementer's calc.py")
        print(textwrap.indent(demo.sh("git", "log", "--oneline", "--graph", "-5"), "  "))

        print(f"\n{BOLD}2. A stall, recovered on strike 1{RESET}\n")
        fake.script(
            IMPLEMENTER,
            Reply(text="<think>I should think about this...</think>"),
            answer("calc.py", CALC_WITH_MUL),
        )
        fake.script(REVIEWER, REVIEW_OK)
        demo.step(
            "new",
            "--title",
            "Add mul",
            "--requirement",
            "add mul(a, b) returning a * b",
            "--target",
            "calc.py",
        )
        demo.step("next")  # setup-task
        print(f"{DIM}(the model answers with nothing but a think block){RESET}")
        demo.step("next")  # run-implementer: empty output -> strike 1
        demo.step("next")  # run-implementer: attempt 2 succeeds
        demo.step("next")  # run-local-review
        demo.judge_pass()
        demo.step("report-judge")
        demo.step("next")  # finalize-task
        assert demo.sh("git", "show", "main:calc.py") == CALC_WITH_MUL
        print(
            f"\n{GREEN}merged after one stall{RESET}; every model call is in _handoff/archive/<task_id>/runs/:"
        )
        demo.hub("log")
        chats = len(fake.chat_requests())
        print(f"\n{GREEN}demo complete{RESET}: 2 tasks merged, {chats} model calls answered by FakeOllama.")


if __name__ == "__main__":
    main()
