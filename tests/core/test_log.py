"""Logs: JSON lines load no rich yet still carry an exception's traceback; console text keeps
structlog's rich tracebacks; the live line can still import rich after JSON logging is set up."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from hub.core.log import configure, get_logger
configure({fmt!r}, "INFO")
try:
    1 / 0
except ZeroDivisionError:
    get_logger("t").exception("t.failed", task="x")
import structlog.dev
loaded = sorted(name for name in sys.modules if name == "rich" or name.startswith("rich."))
import rich.console  # what hub.phases.live does on a terminal
print(json.dumps({{"structlog_rich": structlog.dev.rich is not None, "loaded": loaded}}))
"""


def run(fmt: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(fmt=fmt)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done


def test_json_logs_load_no_rich_and_keep_the_traceback() -> None:
    done = run("json")

    seen = json.loads(done.stdout)
    assert seen == {"structlog_rich": False, "loaded": []}
    (line,) = [json.loads(text) for text in done.stderr.splitlines() if text.startswith("{")]
    assert line["event"] == "t.failed" and line["task"] == "x"
    assert "ZeroDivisionError: division by zero" in line["exception"]


def test_console_logs_keep_structlogs_rich_tracebacks() -> None:
    done = run("console")

    seen = json.loads(done.stdout)
    assert seen["structlog_rich"] is True and "rich" in seen["loaded"]
    assert "ZeroDivisionError" in done.stderr
