"""What a source file defines, as signature lines, and which names it uses: the repository map's input.

Definitions are `code.py`'s outline (functions, methods, classes), each with the header a reader would
see (`def get(self, key)`, `class Cache(Base):`, `func (c *Cache) Get(key string) string`) and its depth
among classes. Functions nested in functions are left out: they are not something another file can ask
for. References are the names a file uses where a name points at another file's definition (calls,
attributes, imported names, base classes, types), counted, without the names its own definitions
declare. Words are the words of the whole text, comments and docstrings too.

`TagCache` keeps them in one JSON file in a folder the caller chooses, keyed by a file's path and the
SHA-256 of its bytes, so a map built again parses only the files whose content changed. Not by size and
mtime: the map is built over a task's worktree, which the model's code writes (it can set any mtime), and
the cache is shared by every task of the repository; tags looked up by content are the ones parsing that
content gives, whoever wrote the file.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.atomic import write_atomic
from hub.core.log import get_logger
from hub.review import code

if TYPE_CHECKING:
    from tree_sitter import Node

log = get_logger(__name__)

# Bump when what `file_tags` returns changes shape or meaning: older cache files are then ignored.
TAGS_VERSION = 3
CACHE_NAME = "repomap-tags.json"
SIGNATURE_CHARS = 160
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
# Where a grammar's identifiers name something defined elsewhere: calls, attributes and fields, imported
# names, base classes, types, decorators. Not every identifier: local variables and parameters share
# names with methods (`text`, `key`) and would tie every file to every other.
_JS_REFERENCES = """
(call_expression function: (identifier) @ref)
(member_expression property: (property_identifier) @ref)
(new_expression constructor: (identifier) @ref)
(import_specifier name: (identifier) @ref)
"""
_REFERENCES = {
    "python": """
    (call function: (identifier) @ref)
    (attribute attribute: (identifier) @ref)
    (import_from_statement name: (dotted_name (identifier) @ref .))
    (import_from_statement name: (aliased_import name: (dotted_name (identifier) @ref .)))
    (class_definition superclasses: (argument_list (identifier) @ref))
    (type (identifier) @ref)
    (generic_type (identifier) @ref)
    (decorator (identifier) @ref)
    (except_clause (identifier) @ref)
    """,
    "javascript": _JS_REFERENCES + "(class_heritage (identifier) @ref)\n",
    "typescript": _JS_REFERENCES + "(extends_clause value: (identifier) @ref)\n(type_identifier) @ref\n",
    "go": """
    (call_expression function: (identifier) @ref)
    (selector_expression field: (field_identifier) @ref)
    (type_identifier) @ref
    """,
    "java": "(method_invocation name: (identifier) @ref)\n(type_identifier) @ref\n",
    "rust": """
    (call_expression function: (identifier) @ref)
    (field_expression field: (field_identifier) @ref)
    (scoped_identifier name: (identifier) @ref)
    (type_identifier) @ref
    (macro_invocation macro: (identifier) @ref)
    """,
    "ruby": "(call method: (identifier) @ref)\n(constant) @ref\n",
    "c": """
    (call_expression function: (identifier) @ref)
    (field_expression field: (field_identifier) @ref)
    (type_identifier) @ref
    """,
    "cpp": """
    (call_expression function: (identifier) @ref)
    (field_expression field: (field_identifier) @ref)
    (qualified_identifier name: (identifier) @ref)
    (type_identifier) @ref
    """,
}
_REFERENCES["tsx"] = _REFERENCES["typescript"]


@dataclass(frozen=True)
class Definition:
    """A function, method or class: its outline name (`Cache.get`), where it starts (1-based), how many
    classes enclose it, and its header on one line."""

    name: str
    kind: str
    line: int
    depth: int
    signature: str

    @functools.cached_property
    def short_name(self) -> str:
        """The name other files use for it: `get` for `Cache.get`, `bar` for `Foo::bar`."""
        return self.name.rsplit(".", 1)[-1].rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Tags:
    """What one file defines, in source order, how often it uses each identifier, and the words of its
    text (comments and docstrings too; split at capitals, lower case, 3 letters or more)."""

    language: str
    definitions: tuple[Definition, ...]
    references: Mapping[str, int]
    words: frozenset[str] = frozenset()


def file_tags(path: str, source: str) -> Tags | None:
    """The definitions and references of a source file; None for a language `code.py` does not know."""
    parsed = code.parse(path, source)
    if parsed is None:
        return None
    language, root = parsed
    found = code.symbols(language, root)
    kinds = {node.id: symbol.kind for symbol, node in found}
    declared: set[int] = set()
    definitions: list[Definition] = []
    for symbol, node in found:
        name_node = node.child_by_field_name("name")
        if name_node is not None:
            declared.add(name_node.start_byte)
        depth = _class_depth(node, kinds)
        if depth is None:
            continue
        signature = _signature(language, symbol.kind, node)
        definitions.append(Definition(symbol.name, symbol.kind, symbol.start_line, depth, signature))
    words = frozenset(w.lower() for w in _WORD.findall(source) if len(w) >= 3)
    return Tags(language, tuple(definitions), _references(language, root, declared), words)


def _class_depth(node: Node, kinds: Mapping[int, str]) -> int | None:
    """How many classes enclose the definition; None when a function encloses it first."""
    depth = 0
    parent = node.parent
    while parent is not None:
        kind = kinds.get(parent.id)
        if kind == "class":
            depth += 1
        elif kind is not None:
            return None
        parent = parent.parent
    return depth


def _signature(language: str, kind: str, node: Node) -> str:
    text = node.text or b""
    body = node.child_by_field_name("body")
    if node.type == "variable_declarator":  # `const add = (a, b) => ...`: the arrow's body
        value = node.child_by_field_name("value")
        body = value.child_by_field_name("body") if value is not None else None
    end = body.start_byte if body is not None and body.start_byte > node.start_byte else None
    if end is None:
        first = text.find(b"\n")
        end = node.end_byte if first < 0 else node.start_byte + first
    header = bytearray(text[: end - node.start_byte])
    # Comments inside a header (`a,  # why`) would run into the next parameter once on one line.
    for comment in reversed(_comments(node, end)):
        header[comment.start_byte - node.start_byte : comment.end_byte - node.start_byte] = b""
    line = code.one_line(header.decode("utf-8", errors="replace")).rstrip("{ \t")
    if language == "python":
        line = line.rstrip(":").rstrip() + (":" if kind == "class" else "")
    elif language == "go" and node.type == "type_spec":
        line = "type " + line
    if len(line) > SIGNATURE_CHARS:
        line = line[: SIGNATURE_CHARS - 4].rstrip() + " ..."
    return line


def _comments(node: Node, end: int) -> list[Node]:
    """The comment nodes between the start of `node` and `end` (its body), in source order."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        for child in current.children:
            if child.start_byte >= end or child.end_byte <= node.start_byte:
                continue
            if "comment" in child.type:
                if child.end_byte <= end:
                    found.append(child)
            else:
                stack.append(child)
    return sorted(found, key=lambda n: n.start_byte)


def _references(language: str, root: Node, declared: set[int]) -> dict[str, int]:
    from tree_sitter import QueryCursor

    counts: Counter[str] = Counter()
    for nodes in QueryCursor(_reference_query(language)).captures(root).values():
        for node in nodes:
            if node.start_byte in declared or node.end_byte - node.start_byte < 2:
                continue
            counts[(node.text or b"").decode("utf-8", errors="replace")] += 1
    return dict(sorted(counts.items()))


_QUERIES: dict[str, Any] = {}


def _reference_query(language: str) -> Any:
    if language not in _QUERIES:
        from tree_sitter import Query
        from tree_sitter_language_pack import get_language

        _QUERIES[language] = Query(get_language(language), _REFERENCES[language])  # type: ignore[arg-type]
    return _QUERIES[language]


class TagCache:
    """Tags of files by (path, SHA-256 of the content), loaded from and saved to one JSON file. A cache
    that is missing, unreadable or of another TAGS_VERSION starts empty: it only ever saves work."""

    def __init__(self, folder: Path | None) -> None:
        self.path = folder / CACHE_NAME if folder is not None else None
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        self.hits = 0
        if self.path is None:
            return
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if not isinstance(exc, FileNotFoundError):
                log.debug("repomap.cache_unreadable", path=str(self.path), error=str(exc))
            return
        if isinstance(document, dict) and document.get("version") == TAGS_VERSION:
            entries = document.get("files")
            self._entries = entries if isinstance(entries, dict) else {}

    def get(self, rel: str, digest: str) -> tuple[bool, Tags | None]:
        """(found, tags) of `rel` holding the content whose SHA-256 is `digest`: tags None when it was
        found to hold no readable text."""
        entry = self._entries.get(rel)
        if not isinstance(entry, dict) or entry.get("sha256") != digest:
            return False, None
        try:
            tags = _tags_from_json(entry["tags"])
        except (KeyError, TypeError, ValueError):
            return False, None
        self.hits += 1
        return True, tags

    def put(self, rel: str, digest: str, tags: Tags | None) -> None:
        self._entries[rel] = {"sha256": digest, "tags": _tags_to_json(tags)}
        self._dirty = True

    def save(self, keep: set[str]) -> None:
        """Write the cache (entries of files in `keep` only) when anything changed."""
        if self.path is None:
            return
        stale = set(self._entries) - keep
        if not self._dirty and not stale:
            return
        entries = {rel: self._entries[rel] for rel in sorted(self._entries) if rel in keep}
        document = {"version": TAGS_VERSION, "files": entries}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(document, separators=(",", ":")))
        except OSError as exc:
            log.debug("repomap.cache_unwritable", path=str(self.path), error=str(exc))


def _tags_to_json(tags: Tags | None) -> dict[str, Any] | None:
    if tags is None:
        return None
    return {
        "language": tags.language,
        "definitions": [[d.name, d.kind, d.line, d.depth, d.signature] for d in tags.definitions],
        "references": dict(tags.references),
        "words": sorted(tags.words),
    }


def _tags_from_json(data: Any) -> Tags | None:
    if data is None:
        return None
    definitions = tuple(
        Definition(str(name), str(kind), int(line), int(depth), str(signature))
        for name, kind, line, depth, signature in data["definitions"]
    )
    references = {str(k): int(v) for k, v in data["references"].items()}
    words = frozenset(str(w) for w in data["words"])
    return Tags(str(data["language"]), definitions, references, words)
