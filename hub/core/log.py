"""structlog set-up: human-readable on a terminal, JSON lines otherwise; always to stderr.

structlog costs ~70 ms to import, so modules on the `hub status` path take a `LazyLogger` that
imports it on first use.
"""

from __future__ import annotations

import sys
from typing import Any


def configure(fmt: str = "auto", level: str = "INFO") -> None:
    """Route structlog and stdlib logging to stderr, as console text or JSON lines."""
    import logging

    import structlog

    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(stream=sys.stderr, level=max(numeric, logging.WARNING), force=True)


class LazyLogger:
    """A structlog logger that imports structlog the first time it logs."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)


def get_logger(name: str) -> LazyLogger:
    return LazyLogger(name)
