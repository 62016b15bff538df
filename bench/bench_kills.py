"""The kill campaign of issue 23, in small: random SIGKILLs in every phase, then `hub next` alone.

    .venv/bin/python bench/bench_kills.py [--kills N] [--slowed-share F] [--seed S] [--json]
    .venv/bin/python bench/bench_kills.py --user-beside [--rates 60,2] [--tasks 4] [--seed S] [--json]

`--user-beside` runs no kills: the person keeps working in their checkout (commits, touched files,
their git's index.lock) while tasks merge; see bench/_user_beside.py.

Each trial is a fresh git repository with two tasks in flight (two files, so both can merge), the
user's own uncommitted edit and untracked file in the checkout, FakeOllama answering at once (backend
ollama: no worker process to start) and a judge command that passes. `hub next --until-idle` is started
again and again and SIGKILLed after a random delay (the PID alone, leaving its git and judge children
finishing, or its whole process group), 1-3 times per trial, so kills also land in the recovery of an
earlier kill. Then `hub next` alone, as cron runs it, until both tasks are merged (exit 75, "try later",
is retried at once, as the next cron minute would).

Half the trials (by default) run with git slowed: a `reference-transaction` hook that sleeps while git
holds its ref locks, the way git's own tests widen race windows.

Per trial it checks: both tasks merged by `hub next` alone (else "needed a person": a halt, or no
progress in 40 runs), nothing corrupted (`git fsck`, each change merged exactly once, the user's edit
and untracked file byte for byte, no MERGE_HEAD, no worktree or task branch or temp file left), and no
`hub next` exiting 1. Reports the table, the phases the kills landed in, and the recovery time (last
kill to merged): median and max.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import IMPL, PASS_REVIEW, REV, commit_repo, git, passing_hub_yaml  # noqa: E402  (bench/, beside this script)

from hub.testing import FakeOllama  # noqa: E402  (the checkout, not an installed copy)

FILES = {"src/app.py": 'def greet(name):\n    return "hello " + name\n', "src/other.py": "X = 1\n"}
FIXED = {"src/app.py": 'def greet(name):\n    return "hello, " + name\n', "src/other.py": "X = 2\n"}
# Sleeps while git holds the locks of a ref update (the "prepared" state): every branch, checkpoint,
# merge and branch deletion the hub does is slowed, widening the windows a kill can land in.
SLOW_HOOK = '#!/bin/sh\n[ "$1" = prepared ] && sleep 0.3\nexit 0\n'
USER_EDIT = "# kills\n\nthe user's own unsaved edit\n"
USER_UNTRACKED = "the user's untracked notes\n"
MAX_RECOVERY_RUNS = 40
# Kills per trial: 1 to 3, so a later kill lands in the recovery of an earlier one. More in a row in the
# same phase trip the interruptions breaker (a phase that died 3 times in a row halts), by design.
MAX_KILLS_PER_TRIAL = 3
# Where a failed trial's repository is kept for a person to read (HUB_BENCH_KEEP=folder); unset: nowhere.
KEEP = Path(os.environ["HUB_BENCH_KEEP"]) if os.environ.get("HUB_BENCH_KEEP") else None
# The longest delay before a kill, per git speed, at the start: adapted as trials go (halved after a run
# that ended before its kill, grown after one that landed), so kills land all through the runs.
FIRST_DELAY = {False: 2.0, True: 5.0}


@dataclass
class Trial:
    slowed: bool
    kills: int = 0
    killed_in: Counter[str] = field(default_factory=Counter)
    exit_codes: Counter[int] = field(default_factory=Counter)
    outcome: str = ""  # recovered | needed a person | corrupted
    detail: str = ""
    recovery_seconds: float | None = None
    notes: list[str] = field(default_factory=list)  # what `hub next` said when it exited neither 0 nor 75


def answer(body: dict[str, Any]) -> str:
    """The implementer's answer for whichever task asks: its own file, fixed."""
    text = json.dumps(body.get("messages", ""))
    name = "src/other.py" if "src/other.py" in text else "src/app.py"
    return f"{name}\n```python\n{FIXED[name]}```\n"


def make_repo(folder: Path, slowed: bool) -> Path:
    files = {**FILES, "README.md": "# kills\n", "hub.yaml": passing_hub_yaml("kills")}
    repo = commit_repo(folder / "repo", files)
    if slowed:
        hook = repo / ".git" / "hooks" / "reference-transaction"
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text(SLOW_HOOK, encoding="utf-8")
        hook.chmod(0o755)
    (repo / "README.md").write_text(USER_EDIT, encoding="utf-8")
    (repo / "notes.txt").write_text(USER_UNTRACKED, encoding="utf-8")
    return repo


def hub_env(fake: FakeOllama) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "GIT_")) and k != "OLLAMA_HOST"}
    env.update(OLLAMA_HOST=fake.url, HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")
    return env


def hub(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )


def statuses(repo: Path) -> dict[str, str]:
    """Task id -> state, for the tasks still in flight (archived ones are gone from tasks/)."""
    found = {}
    for folder in sorted((repo / "_handoff" / "tasks").glob("*")):
        try:
            found[folder.name] = json.loads((folder / "TASK_CONTRACT.json").read_text(encoding="utf-8"))[
                "status"
            ]
        except (OSError, ValueError, KeyError) as exc:
            found[folder.name] = f"unreadable ({type(exc).__name__})"
    return found


def phase_at_kill(repo: Path) -> str:
    """Which phase the kill landed in: the owner file a killed phase leaves, else the tasks' states."""
    phases = []
    for owner in (repo / "_handoff" / "tasks").glob("*/.hub.lock.owner"):
        try:
            phases.append(json.loads(owner.read_text(encoding="utf-8"))["phase"])
        except (OSError, ValueError, KeyError):
            continue
    return "+".join(sorted(phases)) or "between phases"


def kill_once(
    repo: Path, env: dict[str, str], rng: random.Random, trial: Trial, delays: dict[bool, float]
) -> bool:
    """Start `hub next --until-idle`, SIGKILL it after a random delay; True if the kill landed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub", "next", "--until-idle"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        code = proc.wait(timeout=rng.uniform(0.05, delays[trial.slowed]))
        trial.exit_codes[code] += 1
        delays[trial.slowed] = max(0.3, delays[trial.slowed] * 0.7)
        return False
    except subprocess.TimeoutExpired:
        delays[trial.slowed] = min(15.0, delays[trial.slowed] * 1.1)
    if rng.random() < 0.5:
        proc.kill()  # the PID alone: its git and judge children finish on their own
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    trial.kills += 1
    trial.killed_in[phase_at_kill(repo)] += 1
    return True


def recover(repo: Path, env: dict[str, str], trial: Trial, last_kill: float) -> None:
    """`hub next` alone until both tasks are merged; the trial's outcome."""
    for _ in range(MAX_RECOVERY_RUNS):
        states = statuses(repo)
        if not states:
            trial.recovery_seconds = time.monotonic() - last_kill
            trial.outcome = "recovered"
            return
        if "erik_consultation" in states.values():
            trial.outcome = "needed a person"
            halts = list((repo / "_handoff" / "tasks").glob("*/ERIK_HALT.md"))
            trial.detail = halts[0].read_text(encoding="utf-8")[:600] if halts else str(states)
            return
        done = hub(repo, env, "next")
        trial.exit_codes[done.returncode] += 1
        if done.returncode not in (0, 75):
            said = (done.stdout + done.stderr).strip().splitlines()
            trial.notes.append(f"exit {done.returncode}: {' | '.join(said[-3:])[:400]}")
        if done.returncode == 1:
            trial.detail = (done.stderr or done.stdout)[-600:]
    trial.outcome = "needed a person"
    notes = [
        p.read_text(encoding="utf-8") for p in (repo / "_handoff" / "tasks").glob("*/CLEANUP_FAILED.txt")
    ]
    trial.detail = trial.detail or f"no progress in {MAX_RECOVERY_RUNS} runs: {statuses(repo)} {notes}"


def corruption(repo: Path) -> str:
    """What is wrong with the repository after recovery ('' when nothing)."""
    problems = []
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    if fsck.returncode != 0:
        problems.append("fsck: " + fsck.stderr.strip()[:200])
    for name, text in FIXED.items():
        if git(repo, "show", f"main:{name}") != text:
            problems.append(f"main:{name} is not the task's change")
    merges = git(repo, "log", "--merges", "--format=%s", "main").splitlines()
    if (
        sorted(m.split("]")[0] for m in merges) != sorted({m.split("]")[0] for m in merges})
        or len(merges) != 2
    ):
        problems.append(f"merges on main: {merges}")
    if (repo / "README.md").read_text(encoding="utf-8") != USER_EDIT:
        problems.append("the user's edit to README.md changed")
    if (repo / "notes.txt").read_text(encoding="utf-8") != USER_UNTRACKED:
        problems.append("the user's untracked notes.txt changed")
    if (repo / ".git" / "MERGE_HEAD").exists():
        problems.append("the checkout is mid-merge")
    dirty = sorted(git(repo, "status", "--porcelain").splitlines())
    if dirty != [" M README.md", "?? notes.txt"]:
        problems.append(f"the checkout's status: {dirty}")
    if len(git(repo, "worktree", "list").splitlines()) != 1:
        problems.append("a task worktree is left: " + git(repo, "worktree", "list"))
    if git(repo, "branch", "--list", "task/*").strip():
        problems.append("a task branch is left: " + git(repo, "branch", "--list", "task/*").strip())
    temps = [str(p) for p in (repo / "_handoff").rglob("*.tmp")]
    if temps:
        problems.append(f"temp files left: {temps}")
    return "; ".join(problems)


def one_trial(
    fake: FakeOllama, slowed: bool, kills: int, rng: random.Random, delays: dict[bool, float]
) -> Trial:
    trial = Trial(slowed)
    env = hub_env(fake)
    with tempfile.TemporaryDirectory(prefix="hub-bench-kills-") as tmp:
        repo = make_repo(Path(tmp), slowed)
        for name in FILES:
            new = hub(repo, env, "new", "--title", f"Fix {name}", "--requirement", "fix it", "--target", name)
            if new.returncode != 0:
                raise SystemExit(f"hub new failed: {new.stderr}")
        last_kill = time.monotonic()
        attempts = 0
        while trial.kills < kills and statuses(repo) and attempts < kills * 4:
            attempts += 1
            if kill_once(repo, env, rng, trial, delays):
                last_kill = time.monotonic()
        recover(repo, env, trial, last_kill)
        if trial.outcome == "recovered":
            wrong = corruption(repo)
            if wrong:
                trial.outcome, trial.detail = "corrupted", wrong
        if trial.outcome != "recovered" and KEEP:
            shutil.copytree(repo, KEEP / f"trial-{os.getpid()}-{time.time_ns()}", symlinks=True)
    return trial


def table(trials: list[Trial]) -> list[dict[str, Any]]:
    rows = []
    for label, chosen in (
        ("normal git", [t for t in trials if not t.slowed]),
        ("git slowed", [t for t in trials if t.slowed]),
    ):
        if not chosen:
            continue
        # Recovery is timed from the last kill: trials where no kill landed have none.
        times = [t.recovery_seconds for t in chosen if t.recovery_seconds is not None and t.kills]
        codes: Counter[int] = Counter()
        for t in chosen:
            codes.update(t.exit_codes)
        rows.append(
            {
                "git": label,
                "trials": len(chosen),
                "kills": sum(t.kills for t in chosen),
                "recovered": sum(t.outcome == "recovered" for t in chosen),
                "needed_a_person": sum(t.outcome == "needed a person" for t in chosen),
                "of_which_interruptions_breaker": sum(
                    t.outcome == "needed a person" and "`interruptions`" in t.detail for t in chosen
                ),
                "corrupted": sum(t.outcome == "corrupted" for t in chosen),
                "hub_next_exit_1": codes.get(1, 0),
                "exit_codes": dict(sorted(codes.items())),
                "recovery_median_s": round(statistics.median(times), 2) if times else None,
                "recovery_max_s": round(max(times), 2) if times else None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kills to land in all (default 200)")
    parser.add_argument("--slowed-share", type=float, default=0.5, help="share of trials with git slowed")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--minutes", type=float, default=0, help="stop starting trials after this long")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--user-beside", action="store_true", help="the user commits beside the hub, no kills"
    )
    parser.add_argument("--rates", default="60,2", help="--user-beside: seconds between the user's commits")
    parser.add_argument("--tasks", type=int, default=4, help="--user-beside: tasks per rate (at most 9)")
    args = parser.parse_args()
    if args.user_beside:
        import _user_beside

        rates = [float(r) for r in args.rates.split(",")]
        beside = _user_beside.run(hub_env, sys.executable, rates, min(args.tasks, 9), args.seed)
        if args.json:
            print(json.dumps(beside, indent=2))
        else:
            _user_beside.print_table(beside)
        return
    rng = random.Random(args.seed)
    trials: list[Trial] = []
    delays = dict(FIRST_DELAY)
    started = time.monotonic()
    with FakeOllama() as fake:
        fake.respond_with(IMPL, answer)
        fake.respond_with(REV, lambda _body: PASS_REVIEW)
        while sum(t.kills for t in trials) < args.kills:
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                break
            slowed = rng.random() < args.slowed_share
            trial = one_trial(fake, slowed, rng.randint(1, MAX_KILLS_PER_TRIAL), rng, delays)
            trials.append(trial)
            print(
                f"trial {len(trials)}: {'slowed' if slowed else 'normal'} kills={trial.kills} "
                f"{trial.outcome} {trial.recovery_seconds and round(trial.recovery_seconds, 1)} s "
                f"codes={dict(trial.exit_codes)} {trial.detail[:300]} {trial.notes}",
                file=sys.stderr,
                flush=True,
            )
    rows = table(trials)
    phases: Counter[str] = Counter()
    for t in trials:
        phases.update(t.killed_in)
    failures = [
        {"slowed": t.slowed, "outcome": t.outcome, "detail": t.detail}
        for t in trials
        if t.outcome != "recovered"
    ]
    if args.json:
        print(json.dumps({"rows": rows, "killed_in": dict(phases), "failures": failures}, indent=2))
        return
    print(
        "| git | trials | kills | recovered by hub next alone | needed a person (interruptions breaker) | "
        "corrupted | hub next exit 1 | exit codes | recovery median / max (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['git']} | {r['trials']} | {r['kills']} | {r['recovered']} | {r['needed_a_person']} "
            f"({r['of_which_interruptions_breaker']}) | {r['corrupted']} | {r['hub_next_exit_1']} | "
            f"{r['exit_codes']} | {r['recovery_median_s']} / {r['recovery_max_s']} |"
        )
    print("\nkills landed in:", dict(phases.most_common()))
    for f in failures:
        print(f"\n{'slowed' if f['slowed'] else 'normal'}: {f['outcome']}: {f['detail']}")
    notes = Counter(note for t in trials for note in t.notes)
    if notes:
        print("\n`hub next` exits other than 0 and 75 during recovery:")
        for note, count in notes.most_common():
            print(f"- {count} x {note}")


if __name__ == "__main__":
    main()
