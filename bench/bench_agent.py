"""What agent mode costs the hub itself, per turn, against edit mode in the same run.

    .venv/bin/python bench/bench_agent.py [--runs N] [--turns N] [--json]

FakeOllama answers at once, so everything measured is the hub's own time for one `run-implementer`
phase in-process (backend `ollama`, no sandboxed acceptance command): edit mode (one call, one whole-file
answer), and agent mode with the calls written as fenced JSON (the text fallback) and as the server's
own tool calls, each doing `--turns` - 2 reads of the file, one edit_file and done. Medians over the runs;
the per-turn figure is agent minus edit over the turns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from _repo import commit_repo  # noqa: E402  (bench/, beside this script)

from hub.core.log import configure  # noqa: E402
from hub.testing import FakeOllama, Reply  # noqa: E402  (the checkout, not an installed copy)

IMPL = "impl-model"
APP_PY = 'def greet(name):\n    return "hello " + name\n' + "".join(
    f"\n\ndef f{n}(x):\n    return x + {n}\n" for n in range(40)
)
HUB_YAML = f"""\
project: bench
roles:
  implementer: {{model: {IMPL}, backend: ollama, mode: MODE}}
models:
  {IMPL}: {{num_ctx: 32768}}
agent: {{max_turns: 200, max_tokens: 100000000}}
"""


def replies(mode: str, turns: int) -> list[Reply]:
    search, replace = '    return "hello " + name\n', '    return "hello, " + name\n'
    if mode == "edit":
        return [Reply(text="src/app.py\n```python\n" + APP_PY.replace(search, replace) + "```\n")]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "src/app.py", "start_line": n + 1}) for n in range(turns - 2)
    ]
    calls += [
        ("edit_file", {"path": "src/app.py", "search": search, "replace": replace}),
        ("done", {"summary": "s"}),
    ]
    if mode == "agent-native":
        return [Reply(tool_calls=({"name": n, "arguments": a},)) for n, a in calls]
    return [Reply(text="```json\n" + json.dumps({"name": n, "arguments": a}) + "\n```\n") for n, a in calls]


def one(mode: str, turns: int) -> float:
    from hub.core.config import load_config
    from hub.phases.context import Context
    from hub.phases.implement import run_implementer
    from hub.phases.setup import create, setup_task

    with tempfile.TemporaryDirectory(prefix="hub-bench-agent-") as tmp, FakeOllama() as fake:
        fake.add_model(IMPL)
        config_mode = "edit" if mode == "edit" else "agent"
        repo = commit_repo(
            Path(tmp) / "repo", {"src/app.py": APP_PY, "hub.yaml": HUB_YAML.replace("MODE", config_mode)}
        )
        ctx = Context(load_config(repo, env={"OLLAMA_HOST": fake.url}))
        create(ctx, {"title": "t", "requirements": ["greet says hello, NAME"], "target_file": "src/app.py"})
        setup_task(ctx)
        fake.script(IMPL, *replies(mode, turns))
        started = time.perf_counter()
        outcome = run_implementer(Context(load_config(repo, env={"OLLAMA_HOST": fake.url})))
        seconds = time.perf_counter() - started
        assert outcome.to_state == "pending_local_review", (mode, outcome)
        return seconds


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure("json", "WARNING")  # structlog unconfigured prints every level to stdout
    medians = {
        mode: statistics.median(one(mode, args.turns) for _ in range(args.runs))
        for mode in ("edit", "agent-text", "agent-native")
    }
    result = {
        "runs": args.runs,
        "turns": args.turns,
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "ratio_to_edit": {k: round(v / medians["edit"], 2) for k, v in medians.items()},
        "per_turn_ms": {
            k: round(1000 * (v - medians["edit"]) / args.turns, 1) for k, v in medians.items() if k != "edit"
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for mode, seconds in result["median_seconds"].items():
            per = result["per_turn_ms"].get(mode)
            extra = f", {per} ms a turn over edit mode" if per is not None else ""
            print(f"{mode:13} {seconds:6.3f} s  x{result['ratio_to_edit'][mode]}{extra}")
    return result


if __name__ == "__main__":
    main()
