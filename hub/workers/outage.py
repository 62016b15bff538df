"""Outages wait: a model server that is down, restarting, resetting connections or answering 5xx is
tried again with back-off until `limits.server_wait_minutes` runs out, and only then is the outage the
caller's to report (a halt).

    call ──▶ WorkerUnavailable ──▶ on_wait(Wait) ──▶ sleep(pause) ──▶ call ...   until the limit
      └──▶ result: on_wait(None) (the wait is over)

Back-off doubles from FIRST_PAUSE to MAX_PAUSE, so an outage of N seconds delays the work by at most
min(N, MAX_PAUSE) beyond N (bench/bench_budget.py measures it). The last pause is cut to end at the
limit, and the call is tried once more there: a server that comes back just before the limit is used.

A server that answers, but answers broken (`ServerFailed`: an error mid-generation, a stream without
its final message, a 500 loading the model), is no outage: waiting 30 minutes would repeat the same
failure dozens of times. After BROKEN_TRIES such answers in a row (FIRST_PAUSE, then twice that,
between them) it is `ServerBroken`, with the server's last message: a stall strike for the caller.

Pure apart from the `sleep` and `clock` it is given: tests pass a sleep that restarts the server, and
the benchmark a simulated clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from hub.core.errors import ServerBroken, ServerFailed, WorkerUnavailable

T = TypeVar("T")

FIRST_PAUSE = 1.0
MAX_PAUSE = 30.0
BROKEN_TRIES = 3
# A server that never answered the task (a first run with nothing started, OLLAMA_HOST pointing nowhere)
# is most likely not coming: it is given up on after this long, not the whole limits.server_wait_minutes
# a server that went away mid-task gets (issue 27: a new user waited 30 minutes for a server never started).
FIRST_CONTACT_SECONDS = 120.0


@dataclass(frozen=True)
class Wait:
    """An outage being waited out: for `hub status` and the log."""

    since: float  # clock() when the outage was first seen
    waited: float  # seconds so far
    limit: float  # seconds it may last before the caller gives up
    attempts: int  # calls that failed so far
    next_pause: float  # seconds until the next try
    error: str
    first_contact: bool = False  # the server never answered the task: the wait is FIRST_CONTACT_SECONDS


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
    first_contact: bool = False,
) -> T:
    """`call()`, retried through outages for up to `limit_seconds` (FIRST_CONTACT_SECONDS at most when
    `first_contact`: the server never answered the task); then the last WorkerUnavailable, its message
    saying how long it was waited out."""
    if first_contact:
        limit_seconds = min(limit_seconds, FIRST_CONTACT_SECONDS)
    pause_for = pause or pauses()
    since: float | None = None
    attempts = broken = 0
    while True:
        try:
            result = call()
        except WorkerUnavailable as exc:
            now = clock()
            since = now if since is None else since
            attempts += 1
            waited = now - since
            broken = broken + 1 if isinstance(exc, ServerFailed) else 0
            if broken >= BROKEN_TRIES:
                raise ServerBroken(
                    f"{exc} (the server answered broken {broken} times in a row within {waited:.0f} s: "
                    "not an outage, so not waited out)",
                    partial_text=exc.partial_text,
                ) from exc
            left = limit_seconds - waited
            if left <= 0:
                if attempts > 1:
                    minutes = waited / 60
                    why = (
                        "never reached for this task: is it started, and do OLLAMA_HOST / hub.yaml point at it?"
                        if first_contact
                        else "limits.server_wait_minutes"
                    )
                    raise WorkerUnavailable(
                        f"{exc} (still unavailable after waiting {minutes:.1f} min, {attempts} tries; {why})",
                        partial_text=exc.partial_text,
                    ) from exc
                raise
            # The last pause ends at the limit, where the call is tried once more.
            step = min(pause_for(attempts), left)
            on_wait(Wait(since, waited, limit_seconds, attempts, step, str(exc), first_contact))
            sleep(step)
            continue
        if since is not None:
            on_wait(None)
        return result
