"""Crash points: a test seam for the SIGKILL windows of issue 11, the way git's `GIT_TEST_*` variables
inject faults. With `HUB_TEST_CRASH_AT=<name>` in the environment the process kills itself with SIGKILL
when it reaches that point: a kill at exactly the worst moment, every time, instead of by luck.
Unset (always, outside the tests), a crash point costs one dictionary lookup."""

from __future__ import annotations

import os
import signal

ENV = "HUB_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
