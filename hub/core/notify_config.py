"""hub.yaml `notify:` (issue 37): where a word goes when a task needs its person, read from a hub.yaml that
`config_schema` already checked. The events themselves are `hub.phases.events`; sending them is
`hub.phases.notify`."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple


class NotifyKind(StrEnum):
    """What a notification says happened (the `kind` of the JSON a command target reads)."""

    MERGED = "merged"  # a task merged into its base
    HALTED = "halted"  # a task halted for a person (ERIK_HALT.md)
    VERDICT_WANTED = "verdict_wanted"  # a review request waits for a person's verdict
    DRAINED = "drained"  # the last task in flight was archived and nothing is queued
    TEST = "test"  # `hub doctor --notify`


# The notifier's log in the handoff folder (`hub watch` ignores it: writing it makes no phase due).
LOG_FILE = "notify.log"
# Where a folder keeps the events it has sent, one empty file each.
CLAIMS = ".notified"

KINDS = tuple(kind.value for kind in NotifyKind if kind is not NotifyKind.TEST)


class NotifySettings(NamedTuple):
    """`notify:` in hub.yaml: apprise URLs and/or a command given each event as JSON on stdin."""

    urls: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    events: tuple[str, ...] = KINDS
    timeout: float = 10.0  # seconds one delivery attempt may take

    @property
    def configured(self) -> bool:
        return bool(self.urls or self.command)


def notify_settings(raw: Mapping[str, Any], timeout: float) -> NotifySettings:
    command = raw.get("command") or []
    command = command.split() if isinstance(command, str) else command
    return NotifySettings(
        urls=tuple(str(url) for url in raw.get("urls") or ()),
        command=tuple(str(part) for part in command),
        events=tuple(str(kind) for kind in raw.get("events") or KINDS),
        timeout=timeout,
    )
