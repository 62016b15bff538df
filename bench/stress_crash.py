"""The crash, recovery and concurrency tests, again and again, under load: a test that passes by luck
fails here (issue 27: the dirty-checkout kill test passed 4 of 8 runs for a new user).

    python bench/stress_crash.py [--repeat 20] [--load 2] [--minutes M] [TEST ...]

Each repetition is one pytest process over the tests (default: `STRESSED`), in the environment a user's
shell has (no PYTHON* variables, no HUB_*/OLLAMA_*), while `--load` busy processes compete for the
cores. `--minutes` stops starting repetitions after that long: the report says how many ran. Prints
one line per repetition and a summary (runs, failures, the failing tests, seconds per run, median);
exit 1 when any repetition failed. Not part of `make bench` (minutes, not seconds).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRESSED = (
    "tests/phases/test_recovery.py",
    "tests/phases/test_crash_windows.py",
    "tests/test_concurrency.py",
    "tests/faces/test_interrupt.py",
    "tests/phases/test_trust.py",
)
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def user_env() -> dict[str, str]:
    """The environment without what this machine's or the developer's shell adds."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HUB_", "OLLAMA_"))}


def one_run(tests: list[str], timeout: float) -> tuple[bool, float, list[str], str]:
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
            cwd=ROOT,
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return False, time.perf_counter() - started, [f"timeout after {timeout:.0f} s"], out[-3000:]
    seconds = time.perf_counter() - started
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    if done.returncode != 0:
        # What the failing assertions said, so a rare failure is not lost to a rerun.
        said = [line for line in done.stdout.splitlines() if line.startswith("E ")][:12]
        summary += "".join(f"\n      {line[:300]}" for line in said)
    return done.returncode == 0, seconds, failed, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--load", type=int, default=2, help="busy processes running meanwhile")
    parser.add_argument("--minutes", type=float, default=None, help="start no repetition after this")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one repetition may take")
    parser.add_argument("tests", nargs="*", default=list(STRESSED))
    args = parser.parse_args(argv)

    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=args.timeout * args.repeat)])
        for _ in range(args.load)
    ]
    results: list[tuple[bool, float, list[str]]] = []
    try:
        print(f"load: {args.load} busy processes on {os.cpu_count()} cores; tests: {' '.join(args.tests)}")
        for n in range(1, args.repeat + 1):
            if deadline is not None and time.monotonic() > deadline:
                print(f"stopped after {n - 1} repetitions: --minutes {args.minutes:g} ran out")
                break
            ok, seconds, failed, summary = one_run(args.tests, args.timeout)
            results.append((ok, seconds, failed))
            print(f"{n:3d} {'ok  ' if ok else 'FAIL'} {seconds:6.1f} s  {summary}", flush=True)
            for test in failed:
                print(f"      {test}", flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    failures = [r for r in results if not r[0]]
    times = [r[1] for r in results]
    failing = sorted({t for r in failures for t in r[2]})
    print(
        f"\n{len(results)} repetitions, {len(failures)} failed"
        + (f" (median {statistics.median(times):.1f} s, total {sum(times) / 60:.1f} min)" if times else "")
    )
    for test in failing:
        print(f"  failed at least once: {test}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
