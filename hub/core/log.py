"""structlog set-up: human-readable on a terminal, JSON lines otherwise; always to stderr.

structlog costs ~70 ms to import, so every module takes its logger from `get_logger(__name__)`: a
`LazyLogger` that imports structlog on first use. Events are named `area.what` (`worker.done`,
`next.waiting`), but for the canonical line each phase ends with, `phase`.
"""

from __future__ import annotations

import sys
from typing import Any

_TERMINAL = False


def on_terminal() -> bool:
    """A person watches: stderr is a terminal and the logs are console text (not a pipe, cron, JSON)."""
    return _TERMINAL


class _Stderr:
    """Whatever sys.stderr is when a line is written: a live view (hub.phases.live) swaps it for one
    that prints above its line, and the log must follow."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(fmt: str = "auto", level: str = "INFO") -> None:
    """Route structlog and stdlib logging to stderr, as console text or JSON lines."""
    # Here, not at the top: `hub status` never configures logging and does not load it.
    import logging

    global _TERMINAL
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    structlog = _import_structlog(rich_tracebacks=fmt == "console")
    _TERMINAL = fmt == "console" and sys.stderr.isatty()
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
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(stream=sys.stderr, level=max(numeric, logging.WARNING), force=True)


def _import_structlog(rich_tracebacks: bool) -> Any:
    """structlog; for JSON lines, without the rich tracebacks only its console renderer draws.

    structlog imports rich (and rich.pretty) whenever rich is installed, ~35 ms of every phase that
    logs, though only `ConsoleRenderer` uses it. A None in sys.modules makes `import rich` fail (the
    import system's documented way), so structlog takes its own path for a machine without rich;
    the entry is removed at once, and the live line (hub.phases.live) imports rich as usual."""
    blocked = not rich_tracebacks and "structlog" not in sys.modules and "rich" not in sys.modules
    if blocked:
        sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog
    finally:
        if blocked and sys.modules.get("rich", False) is None:
            del sys.modules["rich"]
    return structlog


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
    """The one way a module gets its logger: `log = get_logger(__name__)`."""
    return LazyLogger(name)
