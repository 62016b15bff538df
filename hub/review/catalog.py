"""The community rule catalog: ast-grep rules to search, read, and import into a repository.

The catalog ships inside the package (`hub/review/community/index.json` and its rule files), so it works offline:

    {"version": 1, "rules": [{"id", "tool": "ast-grep", "path", "language", "severity",
                              "message", "description", "tags"}]}

`path` is relative to the index. A catalog URL (`rules.catalog_url` in hub.yaml) may serve another index
of the same form; `load_catalog` fetches it and its rule files with a timeout, caches them, and falls
back to the cache and then to the packaged catalog (with a warning) when the fetch fails.
Importing goes through `hub.review.rules.add_or_update_rule`, so a catalog rule is validated like any other.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urljoin

import yaml

from hub.core.errors import RuleError
from hub.core.log import get_logger
from hub.review.rules import add_or_update_rule, check_rule_id, normalize_language, packaged_rules

log = get_logger(__name__)

CATALOG_DIR = Path(__file__).parent / "community"
INDEX_FILE = "index.json"
INDEX_VERSION = 1
FETCH_TIMEOUT_SECONDS = 10.0
CACHE_MAX_AGE_SECONDS = 24 * 3600.0
MAX_RULE_BYTES = 256 * 1024
_REQUIRED = ("id", "path", "language", "severity", "message")


@dataclass(frozen=True)
class Catalog:
    """A loaded index: its entries, the folder their paths resolve in, and where it came from."""

    entries: tuple[Mapping[str, Any], ...]
    root: Path
    source: str  # "packaged", or the URL it was fetched from

    def entry(self, rule_id: str) -> Mapping[str, Any]:
        for entry in self.entries:
            if entry["id"] == rule_id:
                return entry
        raise RuleError(f"no community rule '{rule_id}'; find one with search_community_rules")

    def rule_yaml(self, rule_id: str) -> str:
        path = (self.root / self.entry(rule_id)["path"]).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise RuleError(f"catalog entry '{rule_id}' points outside the catalog")
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RuleError(f"catalog rule '{rule_id}' cannot be read: {exc}") from None


def packaged_catalog() -> Catalog:
    """The catalog shipped with agent-hub."""
    return _read_catalog(CATALOG_DIR, "packaged")


def load_catalog(
    url: str | None = None,
    cache_dir: Path | None = None,
    *,
    timeout: float = FETCH_TIMEOUT_SECONDS,
    max_age: float = CACHE_MAX_AGE_SECONDS,
) -> Catalog:
    """The catalog at `url` (cached under cache_dir for max_age seconds), else the packaged one.

    A failed fetch never fails the caller: it falls back to a stale cache, then to the packaged catalog,
    and logs a warning saying why.
    """
    if not url:
        return packaged_catalog()
    cache = _cache_folder(url, cache_dir)
    index = cache / INDEX_FILE
    if index.is_file() and time.time() - index.stat().st_mtime < max_age:
        try:
            return _read_catalog(cache, url)
        except RuleError as exc:
            log.debug("rules_catalog.cache_unreadable", url=url, error=str(exc))
    try:
        return _fetch(url, cache, timeout)
    except Exception as exc:  # any failure of the remote catalog means "use what we have"
        reason = f"{type(exc).__name__}: {exc}"
    if index.is_file():
        try:
            catalog = _read_catalog(cache, url)
            log.warning("rules_catalog.fetch_failed_using_cache", url=url, reason=reason)
            return catalog
        except RuleError:
            pass
    log.warning("rules_catalog.fetch_failed_using_packaged", url=url, reason=reason)
    return packaged_catalog()


def search_community_rules(
    query: str = "",
    language: str | None = None,
    tags: Sequence[str] | None = None,
    *,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """Catalog entries matching every word of `query` (id, tags, message, description), best first.

    `language` accepts aliases (py, ts, golang); every tag in `tags` must be on the rule.
    """
    catalog = catalog or packaged_catalog()
    wanted_language = normalize_language(language) if language else None
    wanted_tags = {t.lower() for t in ([tags] if isinstance(tags, str) else tags or ())}
    words = (query or "").lower().split()
    scored = []
    for entry in catalog.entries:
        if wanted_language and entry["language"] != wanted_language:
            continue
        entry_tags = {t.lower() for t in entry["tags"]}
        if not wanted_tags <= entry_tags:
            continue
        score = _score(entry, entry_tags, words)
        if score is not None:
            scored.append((score, entry))
    scored.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
    return [dict(entry, tags=list(entry["tags"])) for _, entry in scored]


def search_packaged_rules(
    query: str = "", language: str | None = None, tags: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The rules shipped with agent-hub that match, the same way as `search_community_rules`. They run
    in every scan already: an agent searching for "eval" learns it is covered, with nothing to import."""
    entries = [
        {
            "id": info.id,
            "language": info.language,
            "severity": info.severity,
            "message": info.message,
            "description": " ".join(info.note.split()),
            "tags": list(info.tags),
            "active": True,
        }
        for info in packaged_rules()
    ]
    return search_community_rules(
        query, language, tags, catalog=Catalog(tuple(entries), Path("."), "packaged")
    )


def words_of(text: str) -> set[str]:
    """The words of a text or an id (`py-eval-exec` -> py, eval, exec), each also without a plural s."""
    found = set(re.findall(r"[a-z0-9]+", text.lower()))
    return found | {w[:-1] for w in found if len(w) > 3 and w.endswith("s")}


def _score(entry: Mapping[str, Any], tags: set[str], words: Sequence[str]) -> int | None:
    """Whole words, not substrings ("eval" is not in "evaluated"): higher for hits in the id and tags than
    in the message and description; None when some query word is nowhere."""
    id_words = words_of(entry["id"])
    tag_words = set().union(*(words_of(t) for t in tags)) if tags else set()
    prose = words_of(f"{entry['message']} {entry['description']} {entry['language']}")
    total = 0
    for word in words:
        forms = {word, word[:-1]} if len(word) > 3 and word.endswith("s") else {word}
        points = 3 * bool(forms & id_words) + 2 * bool(forms & tag_words) + bool(forms & prose)
        if not points:
            return None
        total += points
    return total


def get_community_rule_details(rule_id: str, *, catalog: Catalog | None = None) -> dict[str, Any]:
    """A catalog entry and its rule YAML (`rule_yaml`)."""
    catalog = catalog or packaged_catalog()
    entry = catalog.entry(rule_id)
    return dict(entry, tags=list(entry["tags"]), rule_yaml=catalog.rule_yaml(rule_id), source=catalog.source)


def import_community_rule(repo_root: Path, rule_id: str, *, catalog: Catalog | None = None) -> Path:
    """Copy a catalog rule into the repository's rules (validated like any added rule); return its file."""
    catalog = catalog or packaged_catalog()
    return add_or_update_rule(repo_root, rule_id, catalog.rule_yaml(rule_id))


# --- the index -----------------------------------------------------------------------------------------


def build_index(catalog_dir: Path = CATALOG_DIR) -> dict[str, Any]:
    """The index.json a folder of rule files (catalog_dir/rules/*.yml) should have."""
    entries = []
    for path in sorted((catalog_dir / "rules").glob("*.yml")):
        rule = yaml.safe_load(path.read_text(encoding="utf-8"))
        metadata = rule.get("metadata") or {}
        entries.append(
            {
                "id": rule["id"],
                "tool": "ast-grep",
                "path": path.relative_to(catalog_dir).as_posix(),
                "language": normalize_language(rule["language"]),
                "severity": rule.get("severity", "hint"),
                "message": rule.get("message", ""),
                "description": " ".join(str(rule.get("note", "")).split()),
                "tags": list(metadata.get("tags") or []),
            }
        )
    return {"version": INDEX_VERSION, "rules": entries}


def write_index(catalog_dir: Path = CATALOG_DIR) -> Path:
    """Regenerate catalog_dir/index.json from its rule files."""
    path = catalog_dir / INDEX_FILE
    path.write_text(
        json.dumps(build_index(catalog_dir), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return path


def _read_catalog(root: Path, source: str) -> Catalog:
    try:
        data = json.loads((root / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RuleError(f"catalog index {root / INDEX_FILE} cannot be read: {exc}") from None
    return Catalog(entries=tuple(_parse_index(data, source)), root=root, source=source)


def _parse_index(data: Any, source: str) -> list[dict[str, Any]]:
    if (
        not isinstance(data, dict)
        or data.get("version") != INDEX_VERSION
        or not isinstance(data.get("rules"), list)
    ):
        raise RuleError(f"catalog {source}: expected {{'version': {INDEX_VERSION}, 'rules': [...]}}")
    entries = []
    for i, raw in enumerate(data["rules"]):
        if not isinstance(raw, dict) or raw.get("tool", "ast-grep") != "ast-grep":
            continue  # other tools' rules may share an index; they are not ours to run
        missing = [f for f in _REQUIRED if f not in raw]
        if missing:
            raise RuleError(f"catalog {source}: rules[{i}] lacks {', '.join(missing)}")
        check_rule_id(raw["id"])
        path = PurePosixPath(str(raw["path"]))
        if path.is_absolute() or ".." in path.parts:
            raise RuleError(f"catalog {source}: rules[{i}].path must stay inside the catalog")
        tags = raw.get("tags") or []
        entries.append(
            {
                "id": raw["id"],
                "tool": "ast-grep",
                "path": str(path),
                "language": _language(raw["language"]),
                "severity": str(raw["severity"]),
                "message": str(raw["message"]),
                "description": str(raw.get("description", "")),
                "tags": tuple(str(t) for t in (tags if isinstance(tags, list) else [tags])),
            }
        )
    return entries


def _language(name: Any) -> str:
    try:
        return normalize_language(str(name))
    except RuleError:
        return str(name)  # a custom language: searchable by its own name


def _cache_folder(url: str, cache_dir: Path | None) -> Path:
    base = cache_dir if cache_dir is not None else Path(tempfile.gettempdir()) / "agent-hub-cache"
    return base / "rules-catalog" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _fetch(url: str, cache: Path, timeout: float) -> Catalog:
    """Download the index and every rule file, then swap them into the cache in one rename."""
    import httpx

    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=cache.name + ".", dir=cache.parent))
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True) as client:
            response = client.get(url)
            response.raise_for_status()
            data = response.json()
            entries = _parse_index(data, url)
            for entry in entries:
                rule = client.get(urljoin(url, entry["path"]))
                rule.raise_for_status()
                if len(rule.content) > MAX_RULE_BYTES:
                    raise RuleError(f"catalog rule {entry['path']} is larger than {MAX_RULE_BYTES} bytes")
                target = staging / entry["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(rule.content)
        (staging / INDEX_FILE).write_text(json.dumps(data), encoding="utf-8")
        old = cache.with_name(cache.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if cache.exists():
            cache.rename(old)
        staging.rename(cache)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.debug("rules_catalog.fetched", url=url, rules=len(entries))
    return Catalog(entries=tuple(entries), root=cache, source=url)
