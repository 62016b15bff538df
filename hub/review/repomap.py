"""The repository map: the definitions of a repository that matter most to a task, fitted to a budget.

A model given a task that names no files (or only some) is shown this map and asks for the files it
needs. The map lists files with their ranked definitions as signature lines (`tags.py`), ranked for the
task by `ranking.py`, pinned files first:

    calc.py:
      def add(a, b)
      class Cache:
        def get(self, key)
    README.md

Fitting: the top N entries are rendered, N as large as the budget allows (binary search); the estimate
is the caller's `count_tokens` (the phases pass `hub.workers.budget.estimate_tokens`, on a floor this
one may not import), by default a flat CHARS_PER_TOKEN.

Bounds: only regular files inside `root` reached without a symbolic link are read (`os.lstat`, the
resolved path must be the path itself, then `O_NOFOLLOW` and the same inode); vendored and generated
folders and binary kinds of file are left out; a file over `max_file_bytes` is listed, not read.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hub.core.errors import GitError
from hub.core.log import get_logger
from hub.review import code
from hub.review.ranking import Ranking, Terms, is_test, rank
from hub.review.tags import Definition, TagCache, Tags, file_tags

log = get_logger(__name__)

MAX_FILE_BYTES = 256_000
# Map text (paths and signatures) is 3.46-3.63 characters per Qwen2.5 token on the four repositories
# bench/bench_repomap.py maps: 3.0 over-counts it by 1.15-1.21x, never under (budget.estimate_tokens:
# 1.25-1.40x). Denser text (long dotted type names) would need the caller's count_tokens.
CHARS_PER_TOKEN = 3.0
_SKIPPED = """
.git .hg .svn .venv venv node_modules __pycache__ dist build site-packages .tox .nox .eggs .mypy_cache
.pytest_cache .ruff_cache .hypothesis vendor
"""
SKIPPED_FOLDERS = frozenset(_SKIPPED.split())
_BINARY = """
.png .jpg .jpeg .gif .bmp .ico .webp .pdf .zip .gz .tgz .bz2 .xz .7z .tar .whl .jar .so .dylib .dll .exe
.o .a .pyc .pyo .class .woff .woff2 .ttf .otf .eot .mp3 .mp4 .wav .ogg .sqlite .db .bin .gguf .npy .pkl
"""
BINARY_SUFFIXES = frozenset(_BINARY.split())


@dataclass(frozen=True)
class RepoMap:
    """The map: `text` for the model, the files it shows in rank order (pinned first), its estimated
    tokens, and every file considered in rank order (what to offer when the model asks for more)."""

    text: str
    files: tuple[str, ...]
    tokens: int
    ranked: tuple[str, ...]


def tracked_files(root: Path, *, timeout: float = 30.0) -> list[str]:
    """The files git tracks under `root` (`git ls-files -z`), repository-relative, as git spells them."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"],
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git ls-files in {root} failed: {exc}") from exc
    if done.returncode != 0:
        raise GitError(f"git ls-files in {root} failed: {done.stderr.decode(errors='replace').strip()}")
    return [name for name in done.stdout.decode("utf-8", errors="surrogateescape").split("\0") if name]


def estimate_tokens(text: str) -> int:
    """The flat default estimate: CHARS_PER_TOKEN characters a token, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def build_map(
    root: Path,
    files: Iterable[str],
    *,
    words: str,
    budget_tokens: int,
    pinned: Sequence[str] = (),
    hidden: Collection[str] = (),
    cache_dir: Path | None = None,
    count_tokens: Callable[[str], int] = estimate_tokens,
    max_file_bytes: int = MAX_FILE_BYTES,
    linked_only: bool = False,
) -> RepoMap:
    """The map of `files` (repository-relative, e.g. `tracked_files(root)`) for a task described by
    `words`, at most `budget_tokens` by `count_tokens`. `pinned` files come first; `hidden` ones count
    for the ranking (what they use) but are not shown; `cache_dir` keeps the files' tags between calls;
    `linked_only` shows only the files `linked` to the pinned ones."""
    started = time.perf_counter()
    base = Path(os.path.realpath(root))
    pins = list(dict.fromkeys(p for p in map(clean_path, pinned) if p is not None))
    candidates = sorted({p for p in map(clean_path, files) if p is not None} | set(pins))
    cache = TagCache(cache_dir)
    tags: dict[str, Tags | None] = {}
    for rel in candidates:
        listed, found = _file_tags(base, rel, cache, max_file_bytes)
        if listed:
            tags[rel] = found
    cache.save(keep=set(tags))
    pins = [p for p in pins if p in tags]
    unseen = {p for p in map(clean_path, hidden) if p}
    if linked_only:
        unseen |= set(tags) - linked(tags, pins)
    ranking = without(rank(tags, Terms.of(words), pins), unseen)
    text, shown = fit(ranking, tags, budget_tokens, count_tokens)
    tokens = count_tokens(text)
    log.debug(
        "repomap.built",
        files=len(candidates),
        listed=len(tags),
        parsed=sum(1 for t in tags.values() if t is not None),
        cache_hits=cache.hits,
        shown=len(shown),
        tokens=tokens,
        budget=budget_tokens,
        seconds=round(time.perf_counter() - started, 3),
    )
    return RepoMap(text=text, files=tuple(shown), tokens=tokens, ranked=ranking.files)


def linked(tags: Mapping[str, Tags | None], pinned: Sequence[str]) -> set[str]:
    """The pinned files and the files that define a name one of them uses, or use a name one of them
    defines; test files only when pinned (a test uses what it tests, and tells little about the code
    around it). Dunder and short names link nothing: every class has an `__init__`."""

    def names(found: Tags | None) -> set[str]:
        return {d.name for d in _shown_definitions(found) if len(d.name) > 2 and not d.name.startswith("__")}

    defines: dict[str, set[str]] = {}
    for rel, found in tags.items():
        for name in names(found):
            defines.setdefault(name, set()).add(rel)
    keep = set(pinned)
    theirs = set().union(*(names(tags[p]) for p in pinned)) if pinned else set()
    for pin in pinned:
        found = tags[pin]
        used = found.references if found is not None else {}
        keep.update(rel for name in used for rel in defines.get(name, ()) if not is_test(rel))
    for rel, found in tags.items():
        if found is not None and not is_test(rel) and theirs.intersection(found.references):
            keep.add(rel)
    return keep


def without(ranking: Ranking, hidden: set[str]) -> Ranking:
    """`ranking` less the `hidden` files, the order of the rest kept."""
    if not hidden:
        return ranking
    return Ranking(
        files=tuple(f for f in ranking.files if f not in hidden),
        entries=tuple(e for e in ranking.entries if e[0] not in hidden),
        pinned=tuple(f for f in ranking.pinned if f not in hidden),
    )


def clean_path(path: str) -> str | None:
    """A repository-relative path in one spelling, or None when it leaves the repository, names a
    vendored or generated folder, or a binary kind of file."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or path.startswith("/") or ".." in parts:
        return None
    if any(p in SKIPPED_FOLDERS or p.endswith(".egg-info") for p in parts[:-1]):
        return None
    name = parts[-1].lower()
    if os.path.splitext(name)[1] in BINARY_SUFFIXES or name.endswith((".min.js", ".min.css")):
        return None
    return "/".join(parts)


def _file_tags(base: Path, rel: str, cache: TagCache, cap: int) -> tuple[bool, Tags | None]:
    """(listed, tags): listed False for what is not a regular file reached without a link inside `base`;
    tags None for a file listed by its path only (no grammar, over the cap, not UTF-8 text)."""
    full = os.path.join(base, rel)
    try:
        info = os.lstat(full)
    except OSError:
        return False, None
    # A link as the file or any folder on its way: the resolved path is not the path itself.
    if not stat.S_ISREG(info.st_mode) or os.path.realpath(full) != full:
        return False, None
    if code.language_for(rel) is None or info.st_size > cap:
        return True, None
    data = _read(full, info, cap)
    if data is None:
        return False, None
    # By content, never by size and mtime: the worktree is the model's code's to write.
    digest = hashlib.sha256(data).hexdigest()
    found, cached = cache.get(rel, digest)
    if found:
        return True, cached
    result: Tags | None = None
    if len(data) <= cap and b"\0" not in data[:8192]:
        try:
            result = file_tags(rel, data.decode("utf-8-sig"))
        except UnicodeDecodeError:
            log.debug("repomap.not_utf8", path=rel)
    cache.put(rel, digest, result)
    return True, result


def _read(full: str, info: os.stat_result, cap: int) -> bytes | None:
    """At most cap + 1 bytes of the file `lstat` saw, opened without following a link; None if it is
    gone or is another file by now."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        now = os.fstat(handle.fileno())
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            return None
        return handle.read(cap + 1)


def fit(
    ranking: Ranking, tags: Mapping[str, Tags | None], budget_tokens: int, count_tokens: Callable[[str], int]
) -> tuple[str, list[str]]:
    """The text of the top entries that fits the budget, and the files it shows. Pinned files' paths go
    in first; when even they do not fit, as many of them as do."""
    entries = ranking.entries

    def render(n: int, pins: int) -> tuple[str, list[str]]:
        return _render(ranking.files, ranking.pinned[:pins], entries[:n], tags)

    pins = len(ranking.pinned)
    while pins > 0 and count_tokens(render(0, pins)[0]) > budget_tokens:
        pins -= 1
    if pins < len(ranking.pinned) or count_tokens(render(0, pins)[0]) > budget_tokens:
        return render(0, pins) if pins else ("", [])
    low, high = 0, len(entries)  # render(low) fits; find the largest that does
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(render(middle, pins)[0]) <= budget_tokens:
            low = middle
        else:
            high = middle - 1
    return render(low, pins)


def _render(
    order: Sequence[str],
    pinned: Sequence[str],
    entries: Sequence[tuple[str, int]],
    tags: Mapping[str, Tags | None],
) -> tuple[str, list[str]]:
    chosen: dict[str, set[int]] = {rel: set() for rel in pinned}
    for rel, index in entries:
        picked = chosen.setdefault(rel, set())
        if index >= 0:
            picked.update(_with_classes(_shown_definitions(tags[rel]), index))
    lines: list[str] = []
    shown: list[str] = []
    for rel in order:
        if rel not in chosen:
            continue
        shown.append(rel)
        definitions = _shown_definitions(tags[rel])
        if not chosen[rel]:
            lines.append(rel)
            continue
        lines.append(f"{rel}:")
        lines.extend(
            "  " * (definitions[i].depth + 1) + definitions[i].signature for i in sorted(chosen[rel])
        )
    return ("\n".join(lines) + "\n" if lines else ""), shown


def _shown_definitions(found: Tags | None) -> tuple[Definition, ...]:
    return found.definitions if found is not None else ()


def _with_classes(definitions: Sequence[Definition], index: int) -> list[int]:
    """The definition and the classes around it, so a method is shown under its class."""
    found = [index]
    depth = definitions[index].depth
    for i in range(index - 1, -1, -1):
        if depth == 0:
            break
        if definitions[i].depth < depth:
            found.append(i)
            depth = definitions[i].depth
    return found
