"""`sandbox:` in hub.yaml: how acceptance commands run (hub/safety/sandbox.py reads these settings).

sandbox:
  mode: auto            # auto | required | off
  network: false
  writable_paths: []    # folders the command may write besides the worktree
  read_paths: []        # folders the command may read besides the system and its toolchain
  limits: {processes: 256, memory_mb: 2048, disk_mb: 256}
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from hub.core.errors import ConfigError


class SandboxMode(StrEnum):
    AUTO = "auto"
    REQUIRED = "required"
    OFF = "off"


class SandboxLimits(NamedTuple):
    """What one sandboxed command may use (issue 28): processes alive at once, memory resident in all
    of them together, bytes written to the worktree and its private /tmp."""

    processes: int = 256
    memory_mb: int = 2048
    disk_mb: int = 256


class SandboxSettings(NamedTuple):
    """`sandbox:` in hub.yaml: a mode, or a mapping `{mode, network, writable_paths, read_paths, limits}`."""

    mode: SandboxMode = SandboxMode.AUTO
    network: bool = False
    writable_paths: tuple[Path, ...] = ()
    read_paths: tuple[Path, ...] = ()
    limits: SandboxLimits = SandboxLimits()


# The `sandbox:` keys, in the shape issue 14's schema can take over as they are.
SANDBOX_KEYS = {
    "mode": "auto | required | off",
    "network": "true | false",
    "writable_paths": "a list of folders",
    "read_paths": "a list of folders",
    "limits": "{processes: N, memory_mb: N, disk_mb: N}",
}
LIMIT_KEYS = ("processes", "memory_mb", "disk_mb")


def sandbox_settings(raw: Any, env_mode: str | None, repo_root: Path, source: str) -> SandboxSettings:
    """`sandbox: auto|required|off`, or a mapping with the keys of SANDBOX_KEYS."""
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        raw = {"mode": raw}
    if isinstance(raw, bool):  # YAML reads a bare `off` as false
        raw = {"mode": "auto" if raw else "off"}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: sandbox: expected auto, required, off or a mapping")
    unknown = sorted(set(map(str, raw)) - set(SANDBOX_KEYS))
    if unknown:
        raise ConfigError(f"{source}: sandbox.{unknown[0]}: unknown key (known: {', '.join(SANDBOX_KEYS)})")
    mode = env_mode or raw.get("mode", "auto")
    if mode is False:
        mode = "off"
    if mode not in {m.value for m in SandboxMode}:
        raise ConfigError(f"{source}: sandbox.mode: '{mode}' is not one of auto, required, off")
    network = raw.get("network", False)
    if not isinstance(network, bool):
        raise ConfigError(f"{source}: sandbox.network: expected true or false")
    return SandboxSettings(
        SandboxMode(mode),
        network,
        _folders(raw, "writable_paths", repo_root, source),
        _folders(raw, "read_paths", repo_root, source),
        _limits(raw.get("limits"), source),
    )


def _folders(raw: dict[str, Any], key: str, repo_root: Path, source: str) -> tuple[Path, ...]:
    paths = raw.get(key) or []
    if isinstance(paths, str) or not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ConfigError(f"{source}: sandbox.{key}: expected a list of folders")
    resolved = []
    for item in paths:
        path = Path(item).expanduser()
        resolved.append(path if path.is_absolute() else repo_root / path)
    return tuple(resolved)


def _limits(raw: Any, source: str) -> SandboxLimits:
    if raw is None:
        return SandboxLimits()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: sandbox.limits: expected {SANDBOX_KEYS['limits']}")
    values = {}
    for key, value in raw.items():
        if key not in LIMIT_KEYS:
            raise ConfigError(f"{source}: sandbox.limits.{key}: unknown key (known: {', '.join(LIMIT_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{source}: sandbox.limits.{key}: expected a whole number above 0")
        values[key] = value
    return SandboxLimits(**values)
