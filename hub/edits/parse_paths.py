"""How a model's answer names a file: path lines (`**src/a.py**`, `File: src/a.py`), prose naming one
path, a fence's info string, a commented first line (`# file: src/a.py`). Pure; `hub.edits.parse` reads
these, and `hub.edits.policy` decides whether the path may be written."""

from __future__ import annotations

import re

HEADER = re.compile(
    r"^\s*(?:#|//|--|;|%|/\*|<!--)\s*(?:file\s*(?:name|path)?|path)\s*:\s*(?P<path>\S+?)\s*(?:\*/|-->)?\s*$",
    re.IGNORECASE,
)
# A first line that is only a commented path (`# src/a.py`): used when nothing else names the file.
BARE_HEADER = re.compile(r"^\s*(?:#|//|--|;)\s*(?P<path>[^\s!<>]+)\s*$")
_LABEL = re.compile(
    r"^(?:(?:new|updated|modified|full|complete|changed|edited|the)\s+)*(?:file\s*(?:name|path)?|path)\s*[:=]\s*",
    re.IGNORECASE,
)
_PATH = re.compile(r"^(?:~/|/)?(?:[\w@+\-.]+/)*[\w@+\-.]+$")
_EXTENSIONLESS = frozenset(
    {
        "Makefile",
        "Dockerfile",
        "Gemfile",
        "Rakefile",
        "Procfile",
        "Justfile",
        "LICENSE",
        "README",
        "Vagrantfile",
    }
)


def as_path(token: str) -> str | None:
    """The token as a relative-looking path, or None when it does not look like a file path.

    `..`, absolute and `~` paths are returned on purpose: the policy refuses them by name rather than
    the parser dropping them silently."""
    token = token.strip().replace("\\", "/")
    if token.startswith("./"):
        token = token[2:]
    if not token or not _PATH.match(token) or token.endswith("/"):
        return None
    name = token.rsplit("/", 1)[-1]
    _, dot, extension = name.rpartition(".")
    has_extension = bool(dot) and bool(re.match(r"^[A-Za-z][\w+\-]{0,15}$", extension))
    if name in (".", "..") or not (has_extension or "/" in token.lstrip("/") or name in _EXTENSIONLESS):
        return None
    return token


def clean_path_line(line: str) -> str | None:
    """The path when the whole line is a (decorated) path: `**a.py**`, `### File: a.py`, `- `a.py`:`."""
    text = line.strip()
    if not text or len(text) > 300:
        return None
    text = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", text)
    text = re.sub(r"^#{1,6}\s*", "", text)
    for _ in range(4):
        before = text
        text = text.rstrip(":").strip()
        text = re.sub(
            r"\s+\((?:new|created|updated|modified|full|complete|whole|entire)[^)]*\)$",
            "",
            text,
            flags=re.IGNORECASE,
        )
        for mark in ("**", "__", "*", "`", '"', "'"):
            if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
                text = text[len(mark) : -len(mark)].strip()
        text = _LABEL.sub("", text)
        if text == before:
            break
    return as_path(text)


def path_in_prose(line: str) -> str | None:
    """A prose line attaches a path if it names exactly one in backticks or bold, or ends in `path:`."""
    marked = re.findall(r"`([^`\s]+)`", line) + re.findall(r"\*\*([^*\s]+)\*\*", line)
    paths = {p for p in (as_path(m.rstrip(".,;:")) for m in marked) if p}
    if len(paths) == 1:
        return paths.pop()
    if not paths and line.rstrip().endswith(":"):
        last = line.rstrip().rstrip(":").split()[-1] if line.split() else ""
        return as_path(last.strip("`*'\"()"))
    return None


def path_from_info(info: str) -> str | None:
    for token in info.split():
        token = token.strip("{}")
        if "=" in token:
            key, _, value = token.partition("=")
            if key.lower() in ("title", "file", "filename", "path"):
                return as_path(value.strip("'\""))
            continue
        if ":" in token:
            token = token.split(":", 1)[1]
        if token.startswith("."):
            continue  # Pandoc's {.python} is a class, not a dotfile
        path = as_path(token.strip("'\""))
        if path:
            return path
    return None


def basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
