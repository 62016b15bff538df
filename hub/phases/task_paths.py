"""Whether a task's files can make a task: `check_task_paths` (`hub new` refuses a mistyped or outside
path) and `why_blocked` (promotion blocks such a backlog proposal, and `hub status` says so)."""

from __future__ import annotations

from pathlib import Path

from hub.core.errors import ConfigError
from hub.core.relpaths import clean_path
from hub.safety.trust import CONTROL_FILES
from hub.state import schema
from hub.state.contract import TaskFields


def why_blocked(repo_root: Path, fields: TaskFields) -> str | None:
    """Why promotion would block a proposal with these fields rather than make it a task (None: it
    would not). The one decision `hub next` and `hub status` share, so status never names a proposal
    that next then blocks. A proposal is written before its files exist, so its Target may be new;
    a missing Source would be a file the model is told to create. One naming no file is a task whose
    files the implementer finds (the repository map)."""
    try:
        check_task_paths(repo_root, fields, create_target=True)
    except ConfigError as exc:
        return f"{exc}; fix the proposal's 'Target: path' or 'Source: a.py, b.py' line, then set it proposed again"
    return None


def check_task_paths(repo_root: Path, fields: TaskFields, create_target: bool = False) -> None:
    """Refuse a task whose target or a source lies outside the repository (even as a new file: the model
    could never write it, and a source would be read into the prompt), or is mistyped (a file that does
    not exist and is not meant to be created: the closest files the repository has are named). A
    missing source would otherwise reach the prompt as "does not exist yet: create it", and the model
    would write a file nobody asked for. A task that names no file passes: the implementer finds its
    files with the repository map (hub.phases.attempt_files)."""
    target = fields.get("target_file")
    # A control file as the target or an allowed path: the edit layer refuses every edit there.
    named = [("--target", target), *(("--allowed-path", p) for p in fields.get("allowed_paths") or [])]
    for flag, path in named:
        control = _control_file(str(path)) if path else None
        if control:
            raise ConfigError(
                f"{flag} {path}: that is the hub's control file {control!r} (its configuration, prompts, "
                "rules, hand-off folder or git's), which no task may edit: every edit there would be refused"
            )
    # The contract's own path check, here too so that promotion blocks such a proposal (a ConfigError)
    # instead of failing on it at every `hub next`.
    for flag, path in [("--target", target), *(("--source", p) for p in fields.get("source_files") or [])]:
        problem = schema.path_problem(str(path)) if path else None
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}")
    if target and not create_target and not _exists(repo_root, str(target)):
        hint = _close_files(repo_root, str(target))
        raise ConfigError(
            f"--target {target}: no such file in {repo_root}{hint}",
            hint="pass --new-file (over MCP create_target) if the task creates it",
        )
    for source in fields.get("source_files") or []:
        if not (create_target and source == target) and not _exists(repo_root, str(source)):
            hint = _close_files(repo_root, str(source))
            raise ConfigError(
                f"--source {source}: no such file in {repo_root}{hint} (a source is read, so it must exist)"
            )


def _control_file(path: str) -> str | None:
    rel = clean_path(path).lower()
    for name in CONTROL_FILES:
        if rel == name.lower() or rel.startswith(name.lower() + "/"):
            return name
    return ".git" if ".git" in rel.split("/") else None


def _exists(repo_root: Path, path: str) -> bool:
    root = repo_root.resolve()
    full = (root / path).resolve()
    return full.is_relative_to(root) and full.exists()


def _close_files(repo_root: Path, path: str) -> str:
    # Here, not at the top: only a refused path needs them, and `hub status` imports this module.
    import difflib
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=repo_root, capture_output=True, text=True, timeout=30, check=False
        ).stdout.split("\0")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    files = [f for f in listed if f]
    by_name = [f for f in files if Path(f).name == Path(path).name]
    close = by_name[:3] or difflib.get_close_matches(path, files, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""
