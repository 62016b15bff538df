"""Outages wait: a model server that is down, restarting, resetting connections or answering 5xx is
tried again with back-off until `limits.server_wait_minutes` runs out, and only then is the outage the
caller's to report (a halt).

    call ──▶ WorkerUnavailable ──▶ on_wait(Wait) ──▶ sleep(pause) ──▶ call ...   until the limit
      └──▶ result: on_wait(None) (the wait is over)

Back-off doubles from FIRST_PAUSE to MAX_PAUSE, so an outage of N seconds delays the work by at most
min(N, MAX_PAUSE) beyond N (bench/bench_budget.py measures it). Pure apart from the `sleep` and `clock`
it is given: tests pass a sleep that restarts the server, and the benchmark a simulated clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from hub.core.errors import WorkerUnavailable

T = TypeVar("T")

FIRST_PAUSE = 1.0
MAX_PAUSE = 30.0


@dataclass(frozen=True)
class Wait:
    """An outage being waited out: for `hub status` and the log."""

    since: float  # clock() when the outage was first seen
    waited: float  # seconds so far
    limit: float  # seconds it may last before the caller gives up
    attempts: int  # calls that failed so far
    next_pause: float  # seconds until the next try
    error: str


def pauses(first: float = FIRST_PAUSE, cap: float = MAX_PAUSE) -> Callable[[int], float]:
    """The pause after the n-th failed call (1-based)."""
    return lambda n: min(cap, first * 2 ** (n - 1))


def wait_out(
    call: Callable[[], T],
    *,
    limit_seconds: float,
    on_wait: Callable[[Wait | None], None] = lambda _: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[int], float] | None = None,
) -> T:
    """`call()`, retried through outages for up to `limit_seconds`; then the last WorkerUnavailable,
    its message saying how long it was waited out."""
    pause_for = pause or pauses()
    since: float | None = None
    attempts = 0
    while True:
        try:
            result = call()
        except WorkerUnavailable as exc:
            now = clock()
            since = now if since is None else since
            attempts += 1
            waited = now - since
            step = pause_for(attempts)
            if waited + step > limit_seconds:
                if attempts > 1:
                    minutes = waited / 60
                    raise WorkerUnavailable(
                        f"{exc} (still unavailable after waiting {minutes:.1f} min, {attempts} tries; "
                        "limits.server_wait_minutes)",
                        partial_text=exc.partial_text,
                    ) from exc
                raise
            on_wait(Wait(since, waited, limit_seconds, attempts, step, str(exc)))
            sleep(step)
            continue
        if since is not None:
            on_wait(None)
        return result
