"""The hub against aider with the same real model and server, on the same exercises, in one run.

    make real-model                      # once: the 1.5B model and llama-server (scripts/real_model.sh)
    python bench/bench_real_model.py --suite PATH/exercises/practice --only acronym --only leap ...
    python bench/bench_real_model.py --history PATH/repo --since 2020-01-01 --limit 8 ...   # bench/real_history.py

Not part of `make bench`: each model call takes 5-70 s on a CPU, a dozen exercises 20-60 minutes.
Needs aider (`pip install aider-chat==0.86.2` in a venv of its own; --aider names its binary).

For each exercise aider gets the stub, the same words the hub's implementer gets (the hub's requirement
and the exercise's instructions) and the exercise's test command (`--auto-test`: it reflects on failing
tests up to 3 times); `hub eval` runs the same exercises through every phase with `--config`. Solved
means: the exercise's tests pass on what each left behind (for the hub, on the merged base). Reports
per exercise and in total, with the model's and the whole wall time, as JSON and a markdown table.
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
import time
from pathlib import Path

from hub.evals.runner import REQUIREMENT
from hub.evals.suite import Exercise, load_suite

sys.path.insert(0, str(Path(__file__).parent))
from real_history import WAYS, main_history

AIDER_TIMEOUT = 1800


def aider_one(ex: Exercise, args: argparse.Namespace, meta: Path) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix=f"aider-{ex.name}-"))
    try:
        for rel in (*ex.solution, *ex.tests):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ex.folder / rel, work / rel)
        test_cmd = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider --tb=short " + " ".join(
            shlex.quote(t) for t in ex.tests
        )
        message = REQUIREMENT.format(files=", ".join(ex.solution)) + "\n\n" + ex.instructions
        command = [
            args.aider,
            "--model", f"openai/{args.model}",
            "--openai-api-base", args.base_url,
            "--model-metadata-file", str(meta),
            "--edit-format", "whole",
            "--yes-always", "--auto-test", "--test-cmd", test_cmd,
            "--no-git", "--no-check-update", "--no-analytics", "--no-show-model-warnings",
            "--no-pretty", "--map-tokens", "0",
            "--message", message,
            *ex.solution,
        ]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "local", "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, cwd=work, env=env, capture_output=True, text=True, timeout=AIDER_TIMEOUT
            )
            exit_code: int | None = done.returncode
            log = done.stdout[-4000:]
        except subprocess.TimeoutExpired:
            exit_code, log = None, "timed out"
        seconds = time.monotonic() - started
        tests = subprocess.run(test_cmd, shell=True, cwd=work, capture_output=True, timeout=300, env=env)
        return {
            "name": ex.name,
            "solved": tests.returncode == 0,
            "exit_code": exit_code,
            "seconds": round(seconds, 1),
            "log_tail": log[-1500:],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_hub(names: list[str], args: argparse.Namespace, out: Path) -> dict[str, object]:
    command = [sys.executable, "-m", "hub", "eval", str(args.suite), "--config", str(args.hub_config)]
    command += ["--workdir", str(out / "hub"), "--json"]
    for name in names:
        command += ["--only", name]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"hub eval exited {done.returncode}: {done.stderr[-3000:]}")
    doc = json.loads(done.stdout)
    doc["wall_seconds"] = round(time.monotonic() - started, 1)
    return dict(doc)


def markdown(hub: dict[str, object], aider: list[dict[str, object]], model: str) -> str:
    tasks = {t["name"]: t for t in hub["tasks"]}  # type: ignore[attr-defined]
    totals = hub["totals"]
    assert isinstance(totals, dict)
    lines = [
        f"# hub vs aider, {model}, same server",
        "",
        f"hub: {totals['solved']} of {totals['tasks']} solved, {totals['halted']} halted "
        f"({totals['halts_of_passing_work']} with passing tests), {totals['merged_with_failing_tests']} merged with "
        f"failing tests; wall {hub['wall_seconds']} s (model {totals['model_seconds']} s, hub {totals['hub_seconds']} s)",
        f"aider: {sum(bool(a['solved']) for a in aider)} of {len(aider)} solved; wall "
        f"{round(sum(float(str(a['seconds'])) for a in aider), 1)} s",
        "",
        "| exercise | hub | aider | hub model s | aider s |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for a in aider:
        t = tasks[a["name"]]
        result = "solved" if t["solved"] else (f"halted: {t['halt_trigger']}" if t["halted"] else t["status"])
        if t["halted"] and t["tests_pass"]:
            result += " (tests pass)"
        lines.append(
            f"| {a['name']} | {result} | {'solved' if a['solved'] else 'failed'} | {t['model_seconds']} | {a['seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, help="a folder of exercises (exercism layout)")
    parser.add_argument("--history", type=Path, action="append", default=[], help="a repository (repeat)")
    parser.add_argument("--since", help="--history: commits since this date")
    parser.add_argument("--limit", type=int, help="--history: at most this many candidate commits")
    parser.add_argument("--paths", action="append", default=[], help="--history: commits touching a path")
    parser.add_argument("--python", help="--history: an interpreter with the repository's dependencies")
    parser.add_argument(
        "--ways", action="append", choices=[*WAYS, "aider"], help="--history: which runs (default: all four)"
    )
    parser.add_argument("--aider-edit-format", help="--history: aider's --edit-format (default: aider's)")
    parser.add_argument("--only", action="append", default=[], help="an exercise (repeat); default: all")
    parser.add_argument("--hub-config", type=Path, required=True, help="the hub.yaml for hub eval")
    parser.add_argument("--base-url", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--num-ctx", type=int, default=8192)
    parser.add_argument("--aider", default=shutil.which("aider") or "aider")
    parser.add_argument("--skip", choices=["hub", "aider"], action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="bench-real-")))
    args = parser.parse_args(argv)
    if (args.suite is None) == (not args.history):
        parser.error("give --suite or --history, one of the two")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = args.out / "model-metadata.json"
    meta.write_text(
        json.dumps(
            {
                f"openai/{args.model}": {
                    "max_input_tokens": args.num_ctx,
                    "max_output_tokens": 2048,
                    "input_cost_per_token": 0,
                    "output_cost_per_token": 0,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            }
        ),
        encoding="utf-8",
    )
    if args.history:
        args.ways = args.ways or [*WAYS, "aider"]
        main_history(args, meta)
        return
    exercises = load_suite(args.suite, args.only)
    names = [e.name for e in exercises]
    hub_file, aider_file = args.out / "hub.json", args.out / "aider.json"
    if "hub" not in args.skip:
        hub_file.write_text(json.dumps(run_hub(names, args, args.out), indent=2), encoding="utf-8")
    if "aider" not in args.skip:
        aider = []
        for ex in exercises:
            aider.append(aider_one(ex, args, meta))
            print(
                f"aider {ex.name}: {'solved' if aider[-1]['solved'] else 'failed'} in {aider[-1]['seconds']} s",
                flush=True,
            )
        aider_file.write_text(json.dumps(aider, indent=2), encoding="utf-8")
    if not (hub_file.exists() and aider_file.exists()):
        return  # one side skipped: its file from an earlier run with the same --out completes the table
    hub = json.loads(hub_file.read_text(encoding="utf-8"))
    aider = json.loads(aider_file.read_text(encoding="utf-8"))
    report = markdown(hub, aider, args.model)
    (args.out / "report.md").write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
