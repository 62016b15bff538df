"""`make demo`: one whole task through every phase, against the bundled FakeOllama.

A temporary git repository, a contract, FakeOllama scripted as the implementer and the local reviewer,
every phase run through the real `hub` CLI (the implementer through the MCP worker server), a
scripted PASS verdict, and a merged branch; the model's answers and the diff are shown. Then a
second task whose model stalls twice: the task halts, the demo prints ERIK_HALT.md, resumes it the way
the halt file says (with a note for the implementer), and the task merges.

    python scripts/demo.py [--keep]        # make demo ARGS=--keep
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

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


def quoted(text: str) -> str:
    return textwrap.indent(text, "  | ", predicate=lambda _line: True)


def answer(path: str, content: str, prose: str = "Here is the change.") -> str:
    return f"{prose}\n\n{path}\n```python\n{content}```\n"


class Demo:
    """Runs `hub` in the demo repository and shows what each step did: the command (copyable, shell
    quoted), its output, the transitions it recorded and the state the task is in afterwards."""

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

    def hub(self, *args: str, expect: int = 0, quiet: bool = False) -> str:
        if not quiet:
            print(f"{BOLD}$ {shlex.join(['hub', *args])}{RESET}")
        proc = subprocess.run(
            [sys.executable, "-m", "hub", *args], cwd=self.repo, env=self.env, capture_output=True, text=True
        )
        out = proc.stdout.strip()
        if out and not quiet:
            print(textwrap.indent(out, "  "))
        if proc.returncode != expect:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"demo: `hub {shlex.join(args)}` exited {proc.returncode}, expected {expect}")
        if proc.returncode and not quiet:
            print(f"  {DIM}(exit {proc.returncode}){RESET}")
        return out

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.hub("status", "--json", quiet=True)))

    def transitions(self) -> list[str]:
        path = self.repo / "_handoff" / "transition.ndjson"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def step(self, *args: str, expect: int = 0) -> None:
        """Run one hub command; print the transitions it recorded and the state it left the task in."""
        seen = len(self.transitions())
        self.hub(*args, expect=expect)
        for line in self.transitions()[seen:]:
            t = json.loads(line)
            print(
                f"  {DIM}transition{RESET} {t['old_status']} {GREEN}-[{t['event']}]->{RESET} {t['new_status']}"
                f"  {DIM}({t['status_reason']}){RESET}"
            )
        tasks = self.status()["tasks"]
        if tasks:
            doc = tasks[0]  # the demo runs one task at a time
            nxt = doc["next"]
            then = f"hub {nxt['phase']}" if nxt["phase"] else nxt["why"]
            print(f"  {YELLOW}state{RESET} {doc['status']}, attempt {doc['attempt']}; next: {then}\n")
        else:
            print(f"  {YELLOW}state{RESET} no active task (merged and archived)\n")

    def model_answer(self, task_id: str, role: str = "implementer") -> None:
        """The last answer `role` gave, as the hub recorded it (`hub log --task ID --json`)."""
        entries = json.loads(self.hub("log", "--task", task_id, "--json", quiet=True))
        calls = [e for e in entries if e.get("kind") == "model-call" and e.get("role") == role]
        if not calls:
            return
        call = calls[-1]
        print(
            f"  {DIM}the {role}'s answer ({call['model']}, {call['completion_tokens']} tokens;"
            f" `hub log --task {task_id}` shows every call):{RESET}"
        )
        if call.get("thinking") and call["thinking"].strip() not in call["response"]:
            print(quoted(f"<think>{call['thinking'].strip()}</think>"))
        print(quoted(call["response"].strip() or "(nothing outside the think block)"))
        print()

    def diff(self, task_id: str) -> None:
        branch = f"task/{task_id}"
        print(f"  {DIM}the change on {branch} (git diff main...{branch}):{RESET}")
        print(textwrap.indent(self.sh("git", "diff", "main..." + branch).rstrip(), "  "))
        print()

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
        print(
            f"{DIM}(the judge, here a script, reads _handoff/tasks/{folder.name}/REVIEW_REQUEST.md and writes"
            f" JUDGE_REPORT.json beside it: PASS){RESET}"
        )


def make_repo(repo: Path) -> Path:
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
    parser.add_argument(
        "--keep", action="store_true", help="keep the demo repository afterwards and say where it is"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hub-demo-"))
    repo = root / "calc"
    try:
        run(repo)
    finally:
        if args.keep:
            print(f"\n{BOLD}kept{RESET}: the demo repository is {repo}; look around with")
            print(
                f"    cd {shlex.quote(str(repo))} && git log --graph --oneline --all && ls _handoff/archive"
            )
        else:
            shutil.rmtree(root, ignore_errors=True)
            print(
                f"\n{DIM}the demo repository was deleted; keep it with `make demo ARGS=--keep`"
                f" (or `python scripts/demo.py --keep`){RESET}"
            )


def new_task(demo: Demo, title: str, requirement: str, command: str | None = None) -> str:
    args = ["new", "--title", title, "--requirement", requirement, "--target", "calc.py"]
    if command:
        args += ["--acceptance-command", command]
    demo.step(*args)
    return str(demo.status()["tasks"][-1]["task_id"])


def run(repo: Path) -> None:
    make_repo(repo)
    with FakeOllama() as fake:
        demo = Demo(repo, fake)
        print(f"{BOLD}agent-hub demo{RESET}: a git repository at {repo}, FakeOllama at {fake.url}")
        print(
            f"{DIM}every `$ ...` line below is a command you can copy: the same steps work in your own"
            f" repository, with your Ollama answering instead of FakeOllama (gone when the demo ends){RESET}\n"
        )
        demo.hub("init")
        (repo / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
        print(
            f"{DIM}(hub.yaml: the implementer through the MCP worker server, the reviewer straight to Ollama;"
            f" the hub reads it as it is, committed or not: committed here to keep it with the project){RESET}"
        )
        print(f"{BOLD}$ git add hub.yaml && git commit -m 'hub: configure'{RESET}\n")
        demo.sh("git", "add", "hub.yaml")
        demo.sh("git", "commit", "-q", "-m", "hub: configure")

        print(f"\n{BOLD}1. A task through every phase{RESET}\n")
        fake.script(IMPLEMENTER, answer("calc.py", CALC_WITH_SUB))
        fake.script(REVIEWER, REVIEW_OK)
        check = f'{shlex.quote(sys.executable)} -c "import calc; assert calc.sub(5, 3) == 2"'
        task_id = new_task(demo, "Add sub", "add sub(a, b) returning a - b", check)
        demo.step("setup-task")
        demo.step("run-implementer")
        demo.model_answer(task_id)
        demo.diff(task_id)
        demo.step("run-local-review")
        demo.model_answer(task_id, "local_reviewer")
        demo.judge_pass()
        demo.step("report-judge")
        demo.step("finalize-task")
        merged = demo.sh("git", "show", "main:calc.py")
        assert merged == CALC_WITH_SUB, "the base branch does not hold the scripted file"
        print(f"{GREEN}merged{RESET}: main now holds the implementer's calc.py")
        print(textwrap.indent(demo.sh("git", "log", "--oneline", "--graph", "-5"), "  "))

        print(f"\n{BOLD}2. Two stalls halt the task; a person reads the halt file and resumes it{RESET}\n")
        fake.script(
            IMPLEMENTER,
            Reply(text="<think>I should think about this...</think>"),
            Reply(text="I would add a mul function."),
            answer("calc.py", CALC_WITH_MUL),
        )
        fake.script(REVIEWER, REVIEW_OK)
        task_id = new_task(demo, "Add mul", "add mul(a, b) returning a * b")
        demo.step("next")  # setup-task
        print(f"{DIM}(the model answers with nothing but a think block: strike 1, the hub retries){RESET}")
        demo.step("next")
        demo.model_answer(task_id)
        print(f"{DIM}(the model answers with prose and no edit: strike 2, the task halts){RESET}")
        demo.step("next", expect=4)
        halt = repo / "_handoff" / "tasks" / task_id / "ERIK_HALT.md"
        print(f"{BOLD}_handoff/tasks/{task_id}/ERIK_HALT.md{RESET}, what a person reads:")
        print(quoted(halt.read_text(encoding="utf-8").strip()))
        print(
            f"\n{DIM}(the person does what the halt file says: replaces the <<REPLACE: ...>> note"
            f" and runs the command){RESET}"
        )
        demo.step(
            "resume",
            "--to",
            "pending_implementer",
            "--note",
            "Answer with the whole calc.py in a code block.",
        )
        demo.step("next")  # run-implementer: attempt 3 succeeds
        demo.model_answer(task_id)
        demo.diff(task_id)
        demo.step("next")  # run-local-review
        demo.judge_pass()
        demo.step("next")  # report-judge (a waiting report is applied)
        demo.step("next")  # finalize-task
        assert demo.sh("git", "show", "main:calc.py") == CALC_WITH_MUL
        print(f"{GREEN}merged after a halt{RESET}; the whole history, every model call included:")
        demo.hub("log", "--task", task_id)
        chats = len(fake.chat_requests())
        print(f"\n{GREEN}demo complete{RESET}: 2 tasks merged, {chats} model calls answered by FakeOllama.")


if __name__ == "__main__":
    main()
