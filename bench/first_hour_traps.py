"""Issue 36's ten first-hour traps, re-tried as a new user meets them: each trap's command(s) in a clean
environment (a new empty HOME, PATH=<hub's bin>:/usr/bin:/bin, no git identity unless the trap's user set
one in the repository) against FakeOllama on a free port, never the real model server. Prints one row a
trap: item, trap, command, exit code, seconds, the first line printed, whether a person had to undo
anything by hand, and whether the answer is the clear one the issue asks for.

    git clone <repo> /var/tmp/fh-clone && make -C /var/tmp/fh-clone install
    python3 -m venv /var/tmp/fh-plain && /var/tmp/fh-plain/bin/pip install /var/tmp/fh-clone  # no pytest
    /var/tmp/fh-clone/.venv/bin/python bench/first_hour_traps.py --clone /var/tmp/fh-clone \\
        --installed /var/tmp/fh-plain/bin [--install-check]

Item 1 runs only the three tests the issue names, three times (not the whole suite); item 5 runs
`scripts/install_check.sh` only with --install-check (minutes: it installs the hub four ways)."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub.testing import FakeOllama

MODEL = "qwen2.5-coder:7b"  # what `hub init`'s hub.yaml asks for
REAL = "qwen2.5-coder-1.5b"  # what scripts/real_model.sh serves
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
CALC = "def add(a, b):\n    return a + b\n"
ITEM1_TESTS = (
    "tests/safety/test_sandbox.py::test_run_and_var_run_with_their_daemon_sockets_are_not_there",
    "tests/test_first_hour.py::test_a_broken_contract_never_ends_in_a_traceback_and_changes_nothing",
    "tests/workers/test_providers_cli.py::"
    "test_a_cold_load_behind_ollamas_v1_runs_on_the_load_clock_not_the_first_token_clock",
)
# `hub` as started at a terminal, where Ctrl-C raises KeyboardInterrupt (a script started in the
# background inherits SIGINT ignored).
AS_AT_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'hub'; runpy.run_module('hub', run_name='__main__')"
)


@dataclass
class Row:
    item: str
    trap: str
    command: str
    code: int | None
    seconds: float
    first: str
    undo: str
    clear: bool

    @classmethod
    def of(
        cls, item: str, trap: str, command: str, done: Done, clear: bool, undo: str = "none", first: str = ""
    ) -> Row:
        return cls(item, trap, command, done.code, done.seconds, first or done.first, undo, clear)


@dataclass
class Done:
    code: int
    seconds: float
    out: str
    err: str

    @property
    def first(self) -> str:
        """The first line a person reads: stdout's, else stderr's that is not a JSON log line."""
        for text in (self.out, self.err):
            for line in text.splitlines():
                if line.strip() and not line.lstrip().startswith("{"):
                    return line.strip()[:160]
        return ""


def together(runs: list[Done]) -> Done:
    """Commands run one after the other, as one: the last one's exit code and output, their seconds."""
    return Done(runs[-1].code, round(sum(r.seconds for r in runs), 1), runs[-1].out, runs[-1].err)


def linked(venv_bin: Path, folder: Path) -> Path:
    """`folder` holding only `hub` and `hub-standin`, as README's install routes leave them on PATH (not
    the venv's python and pytest, which a pipx user does not have there)."""
    folder.mkdir(parents=True)
    for name in ("hub", "hub-standin"):
        (folder / name).symlink_to(venv_bin / name)
    return folder


def pick(done: Done, needle: str) -> str:
    """The first line printed that holds `needle`, else the first line."""
    lines = (done.out + "\n" + done.err).splitlines()
    return next((ln.strip()[:160] for ln in lines if needle in ln), done.first)


class Lab:
    """The throwaway home, the hub to run, and a FakeOllama on a free port."""

    def __init__(self, clone: Path, home: Path) -> None:
        self.clone, self.home = clone, home
        self.work = Path(tempfile.mkdtemp(prefix="first-hour-traps.", dir=home.parent))
        self.bin = linked(clone / ".venv" / "bin", self.work / "bin")

    def env(self, **extra: str) -> dict[str, str]:
        return {"HOME": str(self.home), "PATH": f"{self.bin}:/usr/bin:/bin", "LANG": "C.UTF-8", **extra}

    def run(
        self, args: Sequence[str], cwd: Path, timeout: float = 300, bin_dir: Path | None = None, **env: str
    ) -> Done:
        environ = self.env(**env)
        if bin_dir is not None:
            environ["PATH"] = f"{bin_dir}:/usr/bin:/bin"
        started = time.perf_counter()
        done = subprocess.run(
            list(args), cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout, check=False
        )
        return Done(done.returncode, round(time.perf_counter() - started, 1), done.stdout, done.stderr)

    def repo(self, name: str, identity: bool = True) -> Path:
        """A user's repository holding calc.py, with `hub init`'s hub.yaml committed."""
        repo = self.work / name
        repo.mkdir()
        git = ["git", "-C", str(repo)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        if identity:
            subprocess.run([*git, "config", "user.name", "New User"], check=True)
            subprocess.run([*git, "config", "user.email", "new@example.invalid"], check=True)
        (repo / "calc.py").write_text(CALC, encoding="utf-8")
        self.run(["hub", "init"], repo)
        who = (
            {} if identity else {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u"}
        )
        who = who and {**who, "GIT_COMMITTER_EMAIL": "u@x"}
        for args in (["add", "-A"], ["commit", "-q", "-m", "initial"]):
            subprocess.run([*git, *args], check=True, env={**self.env(), **who})
        return repo


def answer(body: str) -> str:
    return f"calc.py\n```python\n{CALC}\n\n{body}```\n"


SUB = answer("def sub(a, b):\n    return a - b\n")


def task(lab: Lab, repo: Path, fake: FakeOllama, *extra: str) -> Done:
    return lab.run(
        [
            "hub",
            "new",
            "--title",
            "Add sub",
            "--requirement",
            "sub(a, b) returns a - b",
            "--target",
            "calc.py",
            *extra,
        ],
        repo,
        OLLAMA_HOST=fake.url,
    )


def nexts(lab: Lab, repo: Path, fake: FakeOllama, times: int) -> list[Done]:
    return [lab.run(["hub", "next"], repo, OLLAMA_HOST=fake.url) for _ in range(times)]


def status(lab: Lab, repo: Path) -> dict[str, Any]:
    return dict(json.loads(lab.run(["hub", "status", "--json"], repo).out))


# -- the traps --------------------------------------------------------------------------------------------


def item1(lab: Lab) -> list[Row]:
    rows = []
    pytest = str(lab.clone / ".venv" / "bin" / "pytest")
    for n in range(3):
        done = lab.run([pytest, "-q", "-p", "no:cacheprovider", *ITEM1_TESTS], lab.clone, timeout=900)
        last = done.out.strip().splitlines()[-1] if done.out.strip() else done.first
        trap = f"the issue's 3 tests under {lab.clone} (run {n + 1})"
        rows.append(Row.of("1", trap, "pytest -q <3 tests>", done, done.code == 0, first=last))
    return rows


def item2(lab: Lab, installed: Path | None) -> list[Row]:
    if installed is None:
        return [
            Row("2", "hub eval from an installed hub", "-", None, 0, "not run: no --installed", "-", False)
        ]
    with FakeOllama() as fake:
        fake.add_model(MODEL)
        repo = lab.repo("eval-installed")
        done = lab.run(
            ["hub", "eval", str(lab.clone / "evals" / "python")],
            repo,
            bin_dir=linked(installed, lab.work / "installed-bin"),
            OLLAMA_HOST=fake.url,
        )
        calls = len(fake.chat_requests(MODEL))
    text = done.out + done.err
    return [
        Row.of(
            "2",
            "hub eval from a hub installed without pytest",
            "hub eval evals/python",
            done,
            done.code == 2 and "pytest" in text and calls == 0,
            undo="none" if calls == 0 else f"{calls} model calls spent",
        )
    ]


def item3(lab: Lab) -> list[Row]:
    repo = lab.repo("anonymous", identity=False)
    with FakeOllama({MODEL: [SUB, PASS_REVIEW]}) as fake:
        doctor = lab.run(["hub", "doctor"], repo, OLLAMA_HOST=fake.url)
        task(lab, repo, fake)
        runs = nexts(lab, repo, fake, 3)
    state = status(lab, repo)["tasks"][0]["status"]
    named = "user.name" in doctor.out + doctor.err or "identity" in doctor.out + doctor.err
    return [
        Row.of(
            "3", "no git identity: hub doctor", "hub doctor", doctor, named, first=pick(doctor, "identity")
        ),
        Row.of(
            "3",
            "no git identity: a whole task",
            "hub new; hub next x3",
            together(runs),
            state == "pending_judge_review",
            undo="none" if state == "pending_judge_review" else "yes",
            first=f"state {state}",
        ),
    ]


def item4(lab: Lab) -> list[Row]:
    repo = lab.repo("cannot-run")
    with FakeOllama({MODEL: [SUB, PASS_REVIEW]}) as fake:
        task(lab, repo, fake, "--acceptance-command", "python -m pytest -q")
        runs = nexts(lab, repo, fake, 2)
        calls = len(fake.chat_requests(MODEL))
    halted = runs[-1]
    return [
        Row.of(
            "4",
            "an acceptance command that cannot run (no `python`)",
            "hub next x2",
            together(runs),
            calls == 0 and halted.code != 0,
            undo="none" if calls == 0 else f"{calls} model calls spent",
        )
    ]


def item5(lab: Lab, run_it: bool) -> list[Row]:
    if not run_it:
        return [
            Row("5", "the README's install routes", "-", None, 0, "not run (--install-check)", "-", False)
        ]
    done = lab.run(["bash", "scripts/install_check.sh"], lab.clone, timeout=3600, TMPDIR=str(lab.work))
    routes = [ln for ln in done.out.splitlines() if "passed in" in ln]
    return [
        Row.of(
            "5",
            "the README's install routes (no pipx)",
            "scripts/install_check.sh",
            done,
            done.code == 0,
            first="; ".join(routes),
        )
    ]


def item6(lab: Lab) -> list[Row]:
    repo = lab.repo("conflict")
    verdict = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})
    with FakeOllama({MODEL: [SUB, PASS_REVIEW, PASS_REVIEW]}) as fake:
        task(lab, repo, fake)
        nexts(lab, repo, fake, 3)
        (repo / "calc.py").write_text(CALC + "\n\ndef sub(a, b):\n    return b - a\n", encoding="utf-8")
        subprocess.run(
            ["git", "-C", str(repo), "commit", "-qam", "meanwhile on main"], check=True, env=lab.env()
        )
        (task_dir,) = (repo / "_handoff" / "tasks").iterdir()
        (task_dir / "JUDGE_REPORT.json").write_text(verdict, encoding="utf-8")
        runs = nexts(lab, repo, fake, 2)
        halted = runs[-1]
        state = status(lab, repo)["tasks"][0]
        # What the halt says, done literally: `git merge main` in the task's worktree, resolve (the
        # task's side), `git add`, `git commit --no-edit`, the resume line; then the phases as they come.
        worktree = Path(str(state.get("worktree") or ""))
        said = halted.out + halted.err
        undo = "yes: the halt names no way out"
        if worktree.is_dir() and "git merge main" in said and "git commit --no-edit" in said:
            g = ["git", "-C", str(worktree)]
            for step in (["merge", "main"], ["checkout", "--ours", "calc.py"], ["add", "calc.py"]):
                subprocess.run([*g, *step], capture_output=True, check=False, env=lab.env())
            subprocess.run([*g, "commit", "--no-edit"], capture_output=True, check=False, env=lab.env())
            lab.run(["hub", "resume", "--to", "review_complete"], repo, OLLAMA_HOST=fake.url)
            for _ in range(6):
                now = status(lab, repo)["tasks"]
                if not now or now[0]["status"] == "merged":
                    break
                if now[0]["status"] == "pending_judge_review":
                    (task_dir / "JUDGE_REPORT.json").write_text(verdict, encoding="utf-8")
                nexts(lab, repo, fake, 1)
            main = subprocess.run(
                ["git", "-C", str(repo), "show", "main:calc.py"], capture_output=True, text=True, check=False
            ).stdout
            undo = (
                "none: its steps merged it" if "return a - b" in main else "yes: its steps did not merge it"
            )
    return [
        Row.of(
            "6",
            "a git_conflict halt at the merge",
            "hub next (finalize)",
            together(runs),
            undo.startswith("none"),
            undo=undo,
        )
    ]


def item7(lab: Lab) -> list[Row]:
    repo = lab.repo("eval-no-server")
    done = lab.run(
        ["hub", "eval", str(lab.clone / "evals" / "python")], repo, OLLAMA_HOST="http://127.0.0.1:9"
    )
    return [
        Row.of(
            "7",
            "hub eval with no model server",
            "hub eval evals/python",
            done,
            done.code == 2 and done.seconds < 60,
            undo="none",
        )
    ]


def item8(lab: Lab) -> list[Row]:
    repo = lab.repo("ctrl-c")
    (repo / "other.py").write_text("VALUE = 0\n", encoding="utf-8")
    text = (repo / "hub.yaml").read_text(encoding="utf-8")
    text = text.replace("  host: http://127.0.0.1:11434", "  slots: 1")
    text = text.replace("limits:\n", "limits:\n  parallel_tasks: 2\n", 1)
    (repo / "hub.yaml").write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "two at once, one slot"], check=True)
    calls: list[str] = []
    asked, release = threading.Semaphore(0), threading.Event()

    def implement(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        calls.append(prompt)
        asked.release()
        if len(calls) == 1:
            release.wait(60)
        rel = "calc.py" if "### calc.py" in prompt else "other.py"
        return f"{rel}\n```python\n{'VALUE = 1' if rel == 'other.py' else CALC.strip()}\n```\n"

    with FakeOllama({MODEL: implement}) as fake:
        for rel in ("calc.py", "other.py"):
            lab.run(["hub", "new", "--title", f"Change {rel}", "--requirement", "r", "--target", rel], repo)
        lab.run(["hub", "next"], repo, OLLAMA_HOST=fake.url)  # both set up
        python = str(lab.clone / ".venv" / "bin" / "python")
        started = time.perf_counter()
        proc = subprocess.Popen(
            [python, "-c", AS_AT_A_TERMINAL, "next"],
            cwd=repo,
            env=lab.env(OLLAMA_HOST=fake.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        asked.acquire(timeout=60)
        time.sleep(1)  # the other task reaches the slot's queue (a bench, not a test: no event to wait on)
        proc.send_signal(signal.SIGINT)
        release.set()
        out, err = proc.communicate(timeout=120)
        seconds = round(time.perf_counter() - started, 1)
        started_calls = len(calls)
        again = lab.run(["hub", "next"], repo, OLLAMA_HOST=fake.url)
    done = Done(proc.returncode, seconds, out, err)
    return [
        Row.of(
            "8",
            "a first Ctrl-C with two tasks and one slot",
            "hub next; Ctrl-C",
            done,
            done.code == 130 and started_calls == 1,
            undo="none" if again.code in (0, 4) else f"yes (next run: {again.code})",
        )
    ]


def item9(lab: Lab) -> list[Row]:
    repo = lab.repo("real-model")
    subprocess.run(["git", "-C", str(repo), "rm", "-q", "hub.yaml"], check=True)
    script = str(lab.clone / "scripts" / "real_model.sh")
    with FakeOllama() as fake:
        fake.add_model(REAL)
        port = fake.url.rsplit(":", 1)[1]
        cache = str(lab.work / "cache")
        write = ["bash", script, "write-config", str(repo / "hub.yaml")]
        first = lab.run(write, repo, PORT=port, AGENT_HUB_CACHE=cache)
        second = lab.run(write, repo, PORT=port, AGENT_HUB_CACHE=cache)
        subprocess.run(["git", "-C", str(repo), "add", "hub.yaml"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", "the real model"], check=True)
        doctor = lab.run(["hub", "doctor"], repo, OLLAMA_HOST="http://127.0.0.1:9")
    return [
        Row.of(
            "9",
            "real_model.sh write-config, twice",
            "real_model.sh write-config hub.yaml (x2)",
            together([first, second]),
            first.code == second.code == 0,
            undo="none" if first.code == second.code == 0 else "yes",
        ),
        Row.of(
            "9", "hub doctor with the written hub.yaml", "hub doctor", doctor, doctor.code == 0, undo="none"
        ),
    ]


def item10(lab: Lab) -> list[Row]:
    rows = []
    bad = lab.work / "bad.yaml"
    bad.write_text("models: [\n", encoding="utf-8")

    def row(trap: str, command: str, done: Done, clear: bool, needle: str = "") -> None:
        first = pick(done, needle) if needle else done.first
        rows.append(Row("10", trap, command, done.code, done.seconds, first, "none", clear))

    done = lab.run(["hub-standin", "--script", str(bad)], lab.work, timeout=30)
    row(
        "hub-standin: a YAML error",
        "hub-standin --script bad.yaml",
        done,
        done.code == 2 and "Traceback" not in done.err,
    )
    with FakeOllama() as fake:
        fake.add_model(MODEL)
        port = fake.url.rsplit(":", 1)[1]
        done = lab.run(["hub-standin", "--port", port], lab.work, timeout=30)
        row(
            "hub-standin: a busy port",
            f"hub-standin --port {port}",
            done,
            done.code != 0 and "Traceback" not in done.err,
        )
        repo = lab.repo("smaller")
        done = lab.run(["hub", "resume", "--to", "bogus"], repo)
        row("hub resume --to bogus", "hub resume --to bogus", done, done.code == 2)
        done = lab.run(["hub", "status"], repo, OLLAMA_HOTS="http://127.0.0.1:1")
        row(
            "a misspelt OLLAMA_HOST",
            "OLLAMA_HOTS=... hub status",
            done,
            "OLLAMA_HOST" in done.err,
            "OLLAMA_HOTS",
        )
        one = lab.clone / "evals" / "python" / "vowel-count"
        done = lab.run(["hub", "eval", str(one)], lab.work, OLLAMA_HOST=fake.url)
        row(
            "hub eval on one exercise's folder",
            "hub eval evals/python/vowel-count",
            done,
            done.code == 2 and "--only" in done.err,
        )
        text = (
            (repo / "hub.yaml")
            .read_text(encoding="utf-8")
            .replace(f"model: {MODEL}", "model: qwen2.5-coder:7bb")
        )
        (repo / "hub.yaml").write_text(text, encoding="utf-8")
        done = lab.run(["hub", "doctor"], repo, OLLAMA_HOST=fake.url)
        said = done.out + done.err
        row(
            "hub doctor: a misspelt model",
            "hub doctor (model qwen2.5-coder:7bb)",
            done,
            f"did you mean {MODEL}" in said,
            "did you mean",
        )
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "hub.yaml"], check=True)
        fake.script(MODEL, SUB, PASS_REVIEW)
        task(lab, repo, fake)
        nexts(lab, repo, fake, 3)
        (task_dir,) = (repo / "_handoff" / "tasks").iterdir()
        bare = {"verdict": "FAIL", "summary": "no", "blocking_issues": []}
        (task_dir / "JUDGE_REPORT.json").write_text(json.dumps(bare), encoding="utf-8")
        done = lab.run(["hub", "report-judge"], repo)
        row("a FAIL verdict with no blocking issue", "hub report-judge", done, done.code != 0)
        rows.append(retry_counted_as_cached(lab))
        broken = repo / "_handoff" / "tasks" / "broken-1" / "TASK_CONTRACT.json"
        broken.parent.mkdir()
        broken.write_text('{"task_id": "broken-1", "status": 7}', encoding="utf-8")
        done = lab.run(["hub", "status"], repo)
        row(
            "one broken contract beside a good task",
            "hub status",
            done,
            "Add sub" in done.out and "broken-1" in done.out + done.err,
        )
    return rows


def retry_counted_as_cached(lab: Lab) -> Row:
    """A rework after a FAIL verdict, each phase a process of its own, against a server that counts
    prompts as Ollama does (its prompt cache): no 'prompt truncated' warning."""
    repo = lab.repo("cached")
    issue = {"id": "B1", "severity": "major", "file": "calc.py", "line": 5, "description": "no docstring"}
    verdict = json.dumps({"verdict": "FAIL", "summary": "no", "blocking_issues": [issue]})
    documented = answer('def sub(a, b):\n    """a - b"""\n    return a - b\n')
    with FakeOllama({MODEL: [SUB, PASS_REVIEW, documented, PASS_REVIEW]}, prompt_cache=True) as fake:
        task(lab, repo, fake)
        runs = nexts(lab, repo, fake, 3)
        (task_dir,) = (repo / "_handoff" / "tasks").iterdir()
        (task_dir / "JUDGE_REPORT.json").write_text(verdict, encoding="utf-8")
        runs += nexts(lab, repo, fake, 3)
    said = "".join(r.err for r in runs)
    warned = said.count("worker.prompt_truncated")
    return Row("10", "a rework's prompt cache hit (--prompt-cache)", "hub next x6", runs[-1].code,
               round(sum(r.seconds for r in runs), 1), f"{warned} 'prompt truncated' warnings", "none", warned == 0)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clone", type=Path, required=True, help="a fresh clone with `make install` done")
    parser.add_argument("--home", type=Path, help="the new user's empty HOME (default: a new folder)")
    parser.add_argument(
        "--installed", type=Path, help="bin folder of a hub installed without pytest (item 2)"
    )
    parser.add_argument("--install-check", action="store_true", help="item 5: run scripts/install_check.sh")
    parser.add_argument("--only", action="append", help="these items only (repeat)")
    args = parser.parse_args(argv)
    clone = args.clone.resolve()
    home = (args.home or Path(tempfile.mkdtemp(prefix="first-hour-home.", dir=clone.parent))).resolve()
    home.mkdir(parents=True, exist_ok=True)
    lab = Lab(clone, home)
    traps: dict[str, Callable[[], list[Row]]] = {
        "1": lambda: item1(lab),
        "2": lambda: item2(lab, args.installed),
        "3": lambda: item3(lab),
        "4": lambda: item4(lab),
        "5": lambda: item5(lab, args.install_check),
        "6": lambda: item6(lab),
        "7": lambda: item7(lab),
        "8": lambda: item8(lab),
        "9": lambda: item9(lab),
        "10": lambda: item10(lab),
    }
    rows: list[Row] = []
    try:
        for item, trap in traps.items():
            if args.only and item not in args.only:
                continue
            try:
                got = trap()
            except Exception as exc:  # a bench that reports every trap, even past one that broke it
                got = [Row(item, "the trap's own setup failed", "-", None, 0, repr(exc)[:160], "?", False)]
            for row in got:
                rows.append(row)
                print(
                    f"{row.item:>2}  {'ok ' if row.clear else 'NO '} {row.code!s:>4}  {row.seconds:7.1f} s  "
                    f"{row.trap}  [{row.command}]  {row.first}  (undo: {row.undo})",
                    flush=True,
                )
    finally:
        shutil.rmtree(lab.work, ignore_errors=True)
    print("\n| item | trap | command | exit | s | first line | undo by hand | clear |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        first = r.first.replace("|", "\\|")
        print(
            f"| {r.item} | {r.trap} | `{r.command}` | {r.code} | {r.seconds} | {first} | {r.undo} | "
            f"{'yes' if r.clear else 'NO'} |"
        )
    return 0 if all(r.clear for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
