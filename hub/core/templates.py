"""Prompt templates: `prompts/<name>.md`, a repository's own folder first, then the packaged one.

Every text the hub sends a model is a template, the whole prompts and the pieces of feedback alike, so a
user can reword what the models are told (issue 26). Templates use `string.Template` placeholders
(`${requirements}`), so braces in code stay literal. The root passed in is the trust root (the user's
checkout), never a task's worktree: a task must not write what its own model is told. Below the phases,
so the edits package words its feedback from here too.
"""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

import hub
from hub.core.errors import ConfigError


def packaged_dir(kind: str) -> Path:
    """`hub/_data/<kind>` in a wheel, `<checkout>/<kind>` in an editable install."""
    installed = Path(hub.__file__).parent / "_data" / kind
    return installed if installed.is_dir() else Path(hub.__file__).parent.parent / kind


def template(repo_root: Path | None, name: str) -> str:
    """The text of `name`.md: `<repo_root>/prompts/` first, then the packaged one (None: only that)."""
    folders = ([repo_root / "prompts"] if repo_root is not None else []) + [packaged_dir("prompts")]
    for folder in folders:
        path = folder / f"{name}.md"
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    where = f"{repo_root / 'prompts'} or the package" if repo_root is not None else "the package"
    raise FileNotFoundError(f"no prompt template {name}.md in {where}")


def render(repo_root: Path | None, name: str, **values: Any) -> str:
    """A whole prompt: the template with `values` in its placeholders (unknown ones stay as written)."""
    return Template(template(repo_root, name)).safe_substitute({k: str(v) for k, v in values.items()})


def fragment(repo_root: Path | None, name: str, **values: Any) -> str:
    """A text rendered like a prompt but without the line end its file closes with: a piece of a message
    (the message it is joined into decides its own line ends), or a prompt that ends where its words do."""
    text = template(repo_root, name).removesuffix("\n")
    return Template(text).safe_substitute({k: str(v) for k, v in values.items()})
