"""What the sandbox adds to one acceptance command.

    .venv/bin/python bench/bench_sandbox.py [--runs N] [--json]
    .venv/bin/python bench/bench_sandbox.py --toolchain-entries 20003 [--before REV ...] [--runs N] [--json]

The first form: the same commands run N times each (default 20) through `run_command`, unsandboxed
(`sandbox: off`) and in bwrap (`sandbox: auto`), in a repository with the control files the hub protects:
`true` (the fixed cost alone) and a one-line Python program (a typical command's interpreter start).
Medians, the difference, and the ratio. The goal: under 50 ms added per command.

The second form (issue 38, item 12): the hub's own cost per sandboxed acceptance command with a
pyenv-like toolchain of that many entries on PATH (`<home>/.pyenv/shims` and
`<home>/.pyenv/versions/3.11.9/bin`, so the sandbox mounts the whole `~/.pyenv`, as it does a real one),
for the code now and for each `--before` revision (default: 51cc5ef^, the bounded walk of every mounted
folder before each command, and 4ecd13d^, the walk cached per process; `hub/` of each is taken with
`git archive` and run in a child interpreter). Per version, medians of N runs: `prepare` (the jail: mounts,
git view, socket hiding, limits), the whole `prepare` + `run_command("true")`, the same bwrap command line
run bare (no hub around it), and the hub's part: whole minus bare. Goal: under 20 ms at low load.
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
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hub.phases.acceptance import run_command
from hub.safety.sandbox import SandboxMode, SandboxSettings, availability, prepare

GOAL_MS = 50.0
TOOLCHAIN_GOAL_MS = 20.0
COMMANDS = {"true": "true", "python": f"{shlex.quote(sys.executable)} -c 'print(1)'"}
BEFORE = ("51cc5ef^", "4ecd13d^")
REPO = Path(__file__).resolve().parents[1]


def median_ms(command: str, repo: Path, settings: SandboxSettings, runs: int) -> float:
    protected = [repo / ".git", repo / "_handoff", repo / "hub.yaml"]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        jail = prepare(settings, repo, protected)
        result = run_command(command, repo, 60, jail)
        times.append((time.perf_counter() - started) * 1000)
        if not result.ok:
            raise SystemExit(f"{command} failed: {result.stderr}")
    return statistics.median(times)


def pyenv_like(home: Path, entries: int) -> dict[str, str]:
    """A `~/.pyenv` of `entries` files and folders (the interpreter's library, as a real one holds) and
    the environment whose PATH names it; the interpreter itself is a link to this one."""
    version = home / ".pyenv" / "versions" / "3.11.9"
    (home / ".pyenv" / "shims").mkdir(parents=True, exist_ok=True)
    (version / "bin").mkdir(parents=True, exist_ok=True)
    made = 4  # .pyenv, shims, versions, 3.11.9 (bin is counted below)
    python = version / "bin" / "python3.11"
    if not python.exists():
        python.symlink_to(sys.executable)
    made += 2
    package = 0
    while made < entries:
        folder = version / "lib" / "python3.11" / f"pkg{package:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        made += 1
        for n in range(min(24, entries - made)):
            (folder / f"m{n:02d}.py").touch()
            made += 1
        package += 1
    path = f"{home / '.pyenv' / 'shims'}:{version / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}


def git_repo(folder: Path) -> Path:
    repo = folder / "repo"
    (repo / "_handoff").mkdir(parents=True)
    (repo / "hub.yaml").write_text("project: bench\n", encoding="utf-8")
    (repo / "app.py").write_text("print(1)\n", encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "app.py", "hub.yaml"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit", "-q", "-m", "i"],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    return repo


def measure(repo: Path, env: dict[str, str], runs: int) -> dict[str, Any]:
    """In this interpreter (whichever `hub` it imports): the medians of the docstring's second form."""
    import hub

    settings = SandboxSettings(SandboxMode.AUTO)
    protected = [repo / ".git", repo / "_handoff", repo / "hub.yaml"]
    os.environ.update(env)  # the toolchain's PATH, as a user's shell would give it
    first_started = time.perf_counter()
    jail = prepare(settings, repo, protected, env=env)
    first = (time.perf_counter() - first_started) * 1000
    prepared, whole, bare = [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        jail = prepare(settings, repo, protected, env=env)
        middle = time.perf_counter()
        result = run_command("true", repo, 60, jail)
        ended = time.perf_counter()
        if not result.ok:
            raise SystemExit(f"true failed in the sandbox: {result.stderr}")
        prepared.append((middle - started) * 1000)
        whole.append((ended - started) * 1000)
        argv = jail.argv("true", repo)
        started = time.perf_counter()
        subprocess.run(
            argv, env=dict(jail.env), cwd=repo, check=True, preexec_fn=jail.preexec, capture_output=True
        )
        bare.append((time.perf_counter() - started) * 1000)
    mounted = [str(p) for p in jail.seen.read] if jail.seen else []
    return {
        "hub": hub.__file__,
        "sandboxed": jail.sandboxed,
        "pyenv_mounted": any(p.endswith("/.pyenv") for p in mounted),
        "first_prepare_ms": first,
        "prepare_ms": statistics.median(prepared),
        "whole_ms": statistics.median(whole),
        "bare_bwrap_ms": statistics.median(bare),
        "hub_ms": statistics.median(w - b for w, b in zip(whole, bare, strict=True)),
    }


def compare(entries: int, before: Sequence[str], runs: int) -> dict[str, Any]:
    """The second form: each version measured in a child interpreter on one shared toolchain and repo."""
    base = Path.home() / ".cache" / "hub-bench-sandbox"
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=base)).resolve()
    try:
        env = pyenv_like(folder / "home", entries)
        repo = git_repo(folder)
        versions: dict[str, Path] = {}
        for rev in before:
            tree = folder / f"hub-{len(versions)}"
            tree.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", rev, "hub"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            versions[rev] = tree
        versions["now"] = REPO
        found = {}
        for label, tree in versions.items():
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--measure",
                    str(repo),
                    "--runs",
                    str(runs),
                    "--env",
                    json.dumps(env),
                ],
                env={**os.environ, "PYTHONPATH": str(tree), "HUB_LOG_LEVEL": "ERROR"},
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"{label}: {done.stderr[-2000:]}")
            found[label] = json.loads(done.stdout.splitlines()[-1])
        load = os.getloadavg()[0]
        return {"entries": entries, "runs": runs, "load_1min": load, "versions": found}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def print_comparison(report: dict[str, Any]) -> None:
    print(
        f"toolchain of {report['entries']} entries (pyenv-like, mounted whole); median of {report['runs']}; "
        f"load {report['load_1min']:.2f}"
    )
    print(f"{'version':<10} {'prepare':>9} {'whole':>9} {'bare bwrap':>11} {'hub part':>9}  first prepare")
    for label, row in report["versions"].items():
        print(
            f"{label:<10} {row['prepare_ms']:>7.1f}ms {row['whole_ms']:>7.1f}ms {row['bare_bwrap_ms']:>9.1f}ms "
            f"{row['hub_ms']:>7.1f}ms  {row['first_prepare_ms']:.1f}ms"
            + ("" if row["pyenv_mounted"] else "  (toolchain NOT mounted)")
        )
    now = report["versions"]["now"]["hub_ms"]
    for label, row in report["versions"].items():
        if label != "now" and now > 0:
            print(f"{label} / now (hub part): {row['hub_ms'] / now:.1f}x")
    verdict = "met" if now < TOOLCHAIN_GOAL_MS else "MISSED"
    print(f"hub's part per command now: {now:.1f} ms (goal < {TOOLCHAIN_GOAL_MS:.0f} ms): {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--toolchain-entries", type=int, help="compare versions on a pyenv-like toolchain")
    parser.add_argument(
        "--before", action="append", help=f"a revision to compare (default: {' '.join(BEFORE)})"
    )
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--env", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    bwrap, why = availability()
    if bwrap is None:
        print(f"no sandbox on this machine ({why}): nothing to measure")
        return 0
    if args.measure:
        print(json.dumps(measure(args.measure, json.loads(args.env), args.runs)))
        return 0
    if args.toolchain_entries:
        report = compare(args.toolchain_entries, args.before or BEFORE, args.runs)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print_comparison(report)
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        for name in (".git", "_handoff"):
            (repo / name).mkdir(parents=True)
        (repo / "hub.yaml").write_text("project: bench\n", encoding="utf-8")
        for label, command in COMMANDS.items():
            off = median_ms(command, repo, SandboxSettings(SandboxMode.OFF), args.runs)
            on = median_ms(command, repo, SandboxSettings(SandboxMode.AUTO), args.runs)
            rows.append({"command": label, "off_ms": off, "sandboxed_ms": on, "added_ms": on - off})
    if args.json:
        print(json.dumps({"goal_ms": GOAL_MS, "runs": args.runs, "rows": rows}, indent=2))
        return 0
    print(
        f"{'command':<8} {'unsandboxed':>12} {'sandboxed':>10} {'added':>8} {'ratio':>6}   (median of {args.runs})"
    )
    for row in rows:
        ratio = row["sandboxed_ms"] / row["off_ms"] if row["off_ms"] else float("nan")
        print(
            f"{row['command']:<8} {row['off_ms']:>10.1f}ms {row['sandboxed_ms']:>8.1f}ms "
            f"{row['added_ms']:>6.1f}ms {ratio:>6.2f}"
        )
    worst = max(row["added_ms"] for row in rows)
    print(
        f"added per command: {worst:.1f} ms (goal < {GOAL_MS:.0f} ms): {'met' if worst < GOAL_MS else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
