"""Tool calls written as text: the hub's reader against a naive one, on the corpus of reported shapes.

    python bench/bench_tool_calls.py [--rounds N] [--verbose]

Every case in tests/agent/corpus/ (a reply in which a local model wrote its calls in the content, from
a public issue thread or the real Qwen2.5-Coder-1.5B on this machine, with the calls a careful reader
takes from it) goes through two readers:

- the hub's text fallback, `hub.agent.text_calls.calls_in_text` (each call checked against its tool's schema);
- a naive reader, what a simple agent does: `json.loads` of each fenced block (or of the whole reply when
  it has none), a call wherever the result has a `name` and `arguments`, run as written.

Each case is scored (hub.testing.call_corpus.score) read (the expected calls, with exactly the expected
arguments, or none where the reply holds none), refused (held back with a message the model can act on), wrong (a call would run that should
not, or with other arguments: must be 0) or missed (nothing, where a call was written); `exact` counts
the cases whose every call, problem included, is the expected one. Speed: the median time per reply over
`--rounds` passes of the corpus, and its ratio to the naive reader's.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hub.agent.text_calls import calls_in_text  # noqa: E402
from hub.testing.call_corpus import OUTCOMES, CallCase, Read, load_call_cases, matches, score  # noqa: E402

CORPUS = ROOT / "tests" / "agent" / "corpus"
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)

Reader = Callable[[str, dict[str, dict[str, Any]]], list[Read]]


def hub_reader(reply: str, tools: dict[str, dict[str, Any]]) -> list[Read]:
    return [Read(c.name, c.arguments, c.problem) for c in calls_in_text(reply, tools).calls]


def naive_reader(reply: str, tools: dict[str, dict[str, Any]]) -> list[Read]:
    """json.loads of each fenced block, or of the whole reply: what a simple agent does."""
    blocks = _FENCE.findall(reply) or [reply]
    calls = []
    for block in blocks:
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and "arguments" in item:
                arguments = item["arguments"]
                calls.append(Read(item["name"], arguments if isinstance(arguments, dict) else {}))
    return calls


def run(reader: Reader, cases: list[CallCase], rounds: int) -> tuple[dict[str, str], int, float]:
    """Each case's outcome, how many came out exact, and the median seconds per reply."""
    outcomes: dict[str, str] = {}
    exact: dict[str, bool] = {}
    samples = []
    for _ in range(rounds):
        for case in cases:
            started = time.perf_counter()
            got = reader(case.reply, case.tools)
            samples.append(time.perf_counter() - started)
            outcomes[case.name] = score(case, got)
            exact[case.name] = matches(case, got)
    return outcomes, sum(exact.values()), statistics.median(samples)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--verbose", action="store_true", help="each case's outcome under both readers")
    args = parser.parse_args(list(argv) if argv is not None else None)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # the refusals' debug lines
    cases = load_call_cases(CORPUS)
    rows = []
    results = {}
    for name, reader in (("hub", hub_reader), ("naive", naive_reader)):
        outcomes, exact, median = run(reader, cases, args.rounds)
        results[name] = outcomes
        counts = Counter(outcomes.values())
        rows.append((name, counts, exact, median))
    out(
        f"{len(cases)} reply shapes (public threads, the real 1.5B; tests/agent/corpus/), {args.rounds} rounds"
    )
    out(f"{'reader':8}{''.join(f'{o:>10}' for o in OUTCOMES)}{'exact':>8}{'median µs':>12}")
    for name, counts, exact, median in rows:
        out(f"{name:8}{''.join(f'{counts[o]:>10}' for o in OUTCOMES)}{exact:>8}{median * 1e6:>12.1f}")
    hub_counts, naive_counts = rows[0][1], rows[1][1]
    out(
        f"read right: hub {hub_counts['read']} vs naive {naive_counts['read']}; read wrong: hub "
        f"{hub_counts['wrong']} vs naive {naive_counts['wrong']}; time per reply: hub / naive = "
        f"{rows[0][3] / rows[1][3]:.1f}x"
    )
    if args.verbose:
        for case in cases:
            out(f"  {case.name:42} hub {results['hub'][case.name]:8} naive {results['naive'][case.name]}")


if __name__ == "__main__":
    main()
