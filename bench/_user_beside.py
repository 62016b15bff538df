"""`bench_kills.py --user-beside`: the person who keeps working in their checkout while tasks merge.

Per rate, a fresh repository with N tasks in flight (one file each), the user's own unsaved README edit
and untracked notes, FakeOllama and a judge that passes. While `hub next` runs again and again (as cron
would; exit 75 is retried at once), the user, a thread of this process, works in the checkout: a commit
of their own file every RATE seconds (`git commit -- user/log.md`, or now and then `git commit -a`, which
sweeps in whatever is staged), and between commits touches tracked files (a new mtime, the same
content: the tasks' files among them) and holds `.git/index.lock` for a moment, as their git does.

Reports per rate: tasks merged, halted, still waiting; the user's commits made and kept on main; and
anything of the hub's left in the user's index or work tree (the status beyond the user's own README
edit and notes, and the task files' contents against HEAD). Goal: all merged, 0 halted, 0 left.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _repo import IMPL, PASS_REVIEW, REV, commit_repo, git, passing_hub_yaml

from hub.testing import FakeOllama

USER_EDIT = "# beside\n\nthe user's own unsaved edit\n"
USER_UNTRACKED = "the user's untracked notes\n"
# How long `hub next` is run again and again per rate before what is not merged counts as waiting.
MAX_SECONDS = 300.0


def task_files(tasks: int) -> dict[str, str]:
    return {f"src/f{i}.py": f"X = {i}\n" for i in range(1, tasks + 1)}


def fixed(name: str) -> str:
    return f"X = {int(name.removeprefix('src/f').removesuffix('.py')) + 100}\n"


def answer(body: dict[str, Any]) -> str:
    """The implementer's answer for whichever task asks: its own file, fixed."""
    text = json.dumps(body.get("messages", ""))
    name = next(n for n in (f"src/f{i}.py" for i in range(1, 10)) if n in text)
    return f"{name}\n```python\n{fixed(name)}```\n"


@dataclass
class User:
    """The person in the checkout: commits, touches, index.lock holds, and what their git refused."""

    repo: Path
    rate: float
    rng: random.Random
    stop: threading.Event = field(default_factory=threading.Event)
    commits: list[str] = field(default_factory=list)
    refused: int = 0
    touches: int = 0
    locks: int = 0

    def run(self) -> None:
        tracked = [p for p in git(self.repo, "ls-files").split("\n") if p.startswith("src/")]
        next_commit = time.monotonic() + self.rng.uniform(0, self.rate)
        while not self.stop.is_set():
            if time.monotonic() >= next_commit:
                self.commit()
                next_commit = time.monotonic() + self.rate
            elif self.rng.random() < 0.5:
                self.touch(self.repo / self.rng.choice(tracked))
            else:
                self.hold_lock()
            self.stop.wait(self.rng.uniform(0.05, min(1.0, self.rate / 4)))

    def commit(self) -> None:
        n = len(self.commits) + 1
        with (self.repo / "user" / "log.md").open("a", encoding="utf-8") as log:
            log.write(f"entry {n}\n")
        # Mostly their own file only (`git commit -- path`); now and then staged first, then everything
        # staged committed (which sweeps in whatever else is in the index at that moment).
        if self.rng.random() < 0.2:
            subprocess.run(["git", "add", "user/log.md"], cwd=self.repo, capture_output=True)
            args = ["commit", "-q", "-m", f"the user's entry {n} (all staged)"]
        else:
            args = ["commit", "-q", "-m", f"the user's entry {n}", "--", "user/log.md"]
        done = subprocess.run(["git", *args], cwd=self.repo, capture_output=True, text=True)
        if done.returncode == 0:
            self.commits.append(git(self.repo, "rev-parse", "HEAD").strip())
        else:
            self.refused += 1  # the hub's git held the lock, as another git of theirs would

    def touch(self, path: Path) -> None:
        later = time.time()
        os.utime(path, (later, later))
        self.touches += 1

    def hold_lock(self) -> None:
        lock = self.repo / ".git" / "index.lock"
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # a git (the hub's) holds it now
        try:
            self.locks += 1
            self.stop.wait(self.rng.uniform(0.1, 0.8))
        finally:
            lock.unlink(missing_ok=True)
            os.close(fd)


def make_repo(folder: Path, tasks: int) -> Path:
    files = {
        **task_files(tasks),
        "README.md": "# beside\n",
        "user/log.md": "# the user's log\n",
        "hub.yaml": passing_hub_yaml("beside"),
    }
    repo = commit_repo(folder / "repo", files)
    (repo / "README.md").write_text(USER_EDIT, encoding="utf-8")
    (repo / "notes.txt").write_text(USER_UNTRACKED, encoding="utf-8")
    return repo


def statuses(repo: Path) -> dict[str, str]:
    found = {}
    for folder in sorted((repo / "_handoff" / "tasks").glob("*")):
        try:
            contract = json.loads((folder / "TASK_CONTRACT.json").read_text(encoding="utf-8"))
            found[folder.name] = contract["status"]
        except (OSError, ValueError, KeyError) as exc:
            found[folder.name] = f"unreadable ({type(exc).__name__})"
    return found


def left_of_the_hub(repo: Path, tasks: int) -> list[str]:
    """Anything of the hub's in the user's index or work tree: status lines beyond their own README
    edit, notes and log (staged or not: a commit of theirs a lock refused), and task files whose content
    is not HEAD's."""
    left = [
        line
        for line in git(repo, "status", "--porcelain").splitlines()
        if line not in (" M README.md", "?? notes.txt") and not line.endswith("user/log.md")
    ]
    for name in task_files(tasks):
        if (repo / name).read_text(encoding="utf-8") != git(repo, "show", f"HEAD:{name}"):
            left.append(f"{name} differs from HEAD")
    return left


def one_rate(hub_env: dict[str, str], python: str, rate: float, tasks: int, seed: int) -> dict[str, Any]:
    hub_env = {**hub_env, "HUB_LOG_LEVEL": "INFO"}  # the merge's retries are logged at INFO
    with tempfile.TemporaryDirectory(prefix="hub-bench-beside-") as tmp:
        repo = make_repo(Path(tmp), tasks)
        for name in task_files(tasks):
            new = subprocess.run(
                [
                    python,
                    "-m",
                    "hub",
                    "new",
                    "--title",
                    f"Fix {name}",
                    "--requirement",
                    "fix it",
                    "--target",
                    name,
                ],
                cwd=repo,
                env=hub_env,
                capture_output=True,
                text=True,
            )
            if new.returncode != 0:
                raise SystemExit(f"hub new failed: {new.stderr}")
        user = User(repo, rate, random.Random(seed))
        thread = threading.Thread(target=user.run, daemon=True)
        thread.start()
        codes: dict[int, int] = {}
        notes: list[str] = []
        said: list[str] = []  # the hub's log lines, for how often the user was in the merge's way
        started = time.monotonic()
        try:
            while time.monotonic() - started < MAX_SECONDS:
                states = statuses(repo)
                if not states or all(s == "erik_consultation" for s in states.values()):
                    break
                done = subprocess.run(
                    [python, "-m", "hub", "next"],
                    cwd=repo,
                    env=hub_env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                codes[done.returncode] = codes.get(done.returncode, 0) + 1
                said += done.stderr.splitlines()
                if done.returncode not in (0, 75):
                    notes.append(f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}")
        finally:
            user.stop.set()
            thread.join(timeout=30)
        seconds = time.monotonic() - started
        states = statuses(repo)
        merges = [
            m for m in git(repo, "log", "--merges", "--format=%s", "main").splitlines() if "[TASK: " in m
        ]
        on_main = set(git(repo, "rev-list", "main").split())
        halts = [
            p.read_text(encoding="utf-8")[:300] for p in (repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md")
        ]
        return {
            "seconds_between_commits": rate,
            "tasks": tasks,
            "merged": len(merges),
            "halted": sum(s == "erik_consultation" for s in states.values()),
            "waiting": sum(s != "erik_consultation" for s in states.values()),
            "left_in_checkout": left_of_the_hub(repo, tasks),
            "user_commits": len(user.commits),
            "user_commits_kept": sum(c in on_main for c in user.commits),
            "user_commits_refused_by_a_lock": user.refused,
            "touches": user.touches,
            "index_lock_holds": user.locks,
            "merge_retries": sum('"merge.retry"' in line for line in said),
            "merges_taken_back": sum('"merge.taken_back"' in line for line in said),
            "merge_waits": sum("merge waits" in line for line in said),
            "hub_next_runs": sum(codes.values()),
            "exit_codes": dict(sorted(codes.items())),
            "seconds": round(seconds, 1),
            "halts": halts,
            "notes": notes[:5],
        }


def run(hub_env_for: Any, python: str, rates: list[float], tasks: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    with FakeOllama() as fake:
        fake.respond_with(IMPL, answer)
        fake.respond_with(REV, lambda _body: PASS_REVIEW)
        for rate in rates:
            rows.append(one_rate(hub_env_for(fake), python, rate, tasks, seed))
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| seconds between commits | tasks | merged | halted | waiting | left of the hub's | user commits (kept) "
        "| refused by a lock | touches | index.lock holds | merge retries / taken back / waits | hub next runs "
        "| exit codes | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seconds_between_commits']:g} | {r['tasks']} | {r['merged']} | {r['halted']} | {r['waiting']} | "
            f"{len(r['left_in_checkout'])} | {r['user_commits']} ({r['user_commits_kept']}) | "
            f"{r['user_commits_refused_by_a_lock']} | {r['touches']} | {r['index_lock_holds']} | "
            f"{r['merge_retries']} / {r['merges_taken_back']} / {r['merge_waits']} | "
            f"{r['hub_next_runs']} | {r['exit_codes']} | {r['seconds']} |"
        )
    for r in rows:
        for what in (*r["left_in_checkout"], *r["halts"], *r["notes"]):
            print(f"\nevery {r['seconds_between_commits']:g} s: {what}")
