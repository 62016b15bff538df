"""How often the local review halts known-good work: the exercises' own example solutions, reviewed by a
real model.

    python bench/bench_false_halts.py --suite PATH/exercises/practice --only acronym ... [--out DIR]

The implementer is FakeOllama answering each task with the exercise's `.meta/example.py` (which passes
its tests), so every halt is a false halt; the local reviewer is the real model behind an
OpenAI-compatible server (`scripts/real_model.sh serve`). Runs `hub eval` and prints its totals, the
halts among them. Not part of `make bench`: it needs the real model and takes minutes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hub.evals.suite import Exercise, load_suite
from hub.testing import FakeOllama

IMPLEMENTER = "example-solution"


def answers(exercises: list[Exercise]) -> Any:
    def respond(body: dict[str, Any]) -> str:
        prompt = str(body["messages"][-1]["content"])
        for ex in exercises:
            if f"Exercise {ex.name}" in prompt and ex.example:
                code = (ex.folder / ex.example[0]).read_text(encoding="utf-8")
                return f"exercises/{ex.name}/{ex.solution[0]}\n```python\n{code}```\n"
        return "no example solution for this task"

    return respond


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, required=True)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--base-url", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--num-ctx", type=int, default=8192)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="bench-false-halts-")))
    args = parser.parse_args(argv)
    exercises = [e for e in load_suite(args.suite, args.only) if e.example]
    args.out.mkdir(parents=True, exist_ok=True)
    with FakeOllama({IMPLEMENTER: answers(exercises)}) as fake:
        config = args.out / "hub.yaml"
        config.write_text(
            f"""\
project: false-halts
ollama: {{host: "{fake.url}"}}
openai: {{base_url: "{args.base_url}"}}
roles:
  implementer: {{model: {IMPLEMENTER}, backend: ollama}}
  local_reviewer:
    model: {args.model}
    backend: openai
    timeouts: {{first_token: 300, stall: 120, total: 600}}
models:
  {IMPLEMENTER}: {{num_ctx: 8192}}
  {args.model}: {{num_ctx: {args.num_ctx}}}
limits: {{parallel_tasks: 1}}
""",
            encoding="utf-8",
        )
        command = [sys.executable, "-m", "hub", "eval", str(args.suite), "--config", str(config)]
        command += ["--workdir", str(args.out / "eval"), "--json"]
        for ex in exercises:
            command += ["--only", ex.name]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"hub eval exited {done.returncode}: {done.stderr[-3000:]}")
    doc = json.loads(done.stdout)
    (args.out / "false-halts.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    totals = doc["totals"]
    print(
        f"known-good solutions: {totals['tasks']}; halted {totals['halted']} "
        f"(with passing tests: {totals['halts_of_passing_work']}); merged {totals['solved']}; "
        f"reviewer seconds {totals['model_seconds']}"
    )
    for task in doc["tasks"]:
        if task["halted"]:
            print(f"  {task['name']}: {task['halt_trigger']}: {task['halt_reason']}")


if __name__ == "__main__":
    main()
