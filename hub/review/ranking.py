"""How the repository map ranks files and definitions for a task: the task's words (`Terms`), a
personalised PageRank over the graph of which file uses a name another defines (`pagerank`), and the
scores of definitions and files (`rank`). Pure: it is given the tags of every file.

- Every file is a node; file A has an edge to file B for each name A uses that B defines (`tags.py`),
  weighted by the square root of the uses, divided among the files defining the same name; names the
  task writes as code weigh more, private names (`_x`) and short lower-case words (`get`) less, dunder
  names not at all.
- The random walk restarts at the files the words name or whose definitions they name, and at the
  pinned files, with a little of the restart spread over every file so that a repository's central
  files still show.
- A definition's score is the rank that flows to it through its name, plus a share of its file's rank
  (all of it when the words name the definition). A file without definitions we can read (a README, a
  file over the size cap or not UTF-8) is one entry, its path, scored from its rank.
- Test files count half unless the words name them: a test uses much and defines little a task asks
  to change. Pinned files come first, then files by rank plus their share of the task's matches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hub.review.tags import Definition, Tags

DAMPING = 0.85
UNIFORM_SHARE = 0.2  # of the restart, spread over every file
TEST_SHARE = 0.5
PRIVATE_WEIGHT = 0.1
GENERIC_WEIGHT = 0.2
MENTIONED_WEIGHT = 10.0
BASE_SHARE = 0.1  # of a file's rank, shared among its definitions
PATH_ONLY_SHARE = 0.1
_STOP = """
the and for with that this from into onto over under when then than else what which where while should
would could must can will shall not are was were been being have has had does did done its our your
their there here also only just more most some any all each every other such add adds make makes use
uses using used new fix fixes change changes file files function functions method methods class classes
code test tests testing self none true false return returns value values set get call calls name names
way one two lets let
"""
STOP_WORDS = frozenset(_STOP.split())
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_PATH_TOKEN = re.compile(r"[\w./-]+")
_QUOTED = re.compile(r"`[^`\n]+`")
_CODE_LIKE = re.compile(r"_|\d|[a-z][A-Z]")
_TEST_NAME = re.compile(r"(^test_.*|.*_test|.*_spec|^conftest|.*\.test|.*\.spec)$")
_TEST_FOLDERS = frozenset({"test", "tests", "testing", "spec", "specs", "__tests__"})


def pieces(name: str) -> list[str]:
    """The lower-case words of an identifier or path: `parseHTTPHeader_v2` -> parse, http, header, v, 2."""
    return [p.lower() for p in _PIECE.findall(name)]


@dataclass(frozen=True)
class Terms:
    """What a task's text asks for. `names`: identifiers written as code (in backticks, called, with an
    underscore, a digit or a capital inside: `parse_args`, `TagCache`, `add()`), lower case; `words`: the
    plain words and the words those names are made of, without stop words and words under 3 letters;
    `paths`: its path-like tokens."""

    names: frozenset[str]
    words: frozenset[str]
    paths: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Terms:
        quoted = {n for span in _QUOTED.findall(text) for n in _IDENTIFIER.findall(span)}
        names: set[str] = set()
        words: set[str] = set()
        for match in _IDENTIFIER.finditer(text):
            name = match.group()
            if name in quoted or _CODE_LIKE.search(name) or text.startswith("(", match.end()):
                names.add(name.lower())
                words.update(w for w in pieces(name) if len(w) >= 3 and w not in STOP_WORDS)
            elif len(name) >= 3 and name.lower() not in STOP_WORDS:
                words.add(name.lower())
        paths = {t.strip("./") for t in _PATH_TOKEN.findall(text)} - {""}
        return cls(frozenset(names), frozenset(words), frozenset(paths))

    def word_share(self, name: str) -> float:
        """The share of a name's words the task uses (0 when it has none worth matching)."""
        own = {w for w in pieces(name) if len(w) >= 3 and w not in STOP_WORDS}
        return len(own & self.words) / len(own) if own else 0.0

    def names_file(self, rel: str) -> bool:
        """Does the text name this file: its path, its file name with extension, or its stem as code?"""
        name = rel.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0].lower()
        return rel in self.paths or ("." in name and name in self.paths) or stem in self.names

    def definition_match(self, definition: Definition) -> float:
        """1 for a definition the text names as code, a half for one it names as a plain word (`the
        cache`), a part for one whose words it uses, else 0."""
        short = definition.short_name.lower()
        if short in self.names:
            return 1.0
        if short in self.words:
            return 0.5
        return 0.3 * self.word_share(definition.short_name)


def is_test(rel: str) -> bool:
    """A test file by its folder or name (test_x.py, x_test.go, x.test.ts, x.spec.js, conftest.py)."""
    parts = rel.lower().split("/")
    return any(p in _TEST_FOLDERS for p in parts[:-1]) or bool(_TEST_NAME.match(parts[-1].rsplit(".", 1)[0]))


def pagerank(
    nodes: Sequence[str],
    edges: Mapping[str, Mapping[str, float]],
    personal: Mapping[str, float],
    *,
    damping: float = DAMPING,
    iterations: int = 100,
    tolerance: float = 1e-9,
) -> dict[str, float]:
    """PageRank by power iteration, restarting by `personal` (uniform when it is all zero). A node
    without out-edges gives its rank back by `personal` too. Ranks sum to 1."""
    if not nodes:
        return {}
    total = sum(max(0.0, personal.get(n, 0.0)) for n in nodes)
    restart = {n: (max(0.0, personal.get(n, 0.0)) / total if total else 1 / len(nodes)) for n in nodes}
    out = {a: sum(targets.values()) for a, targets in edges.items() if a in restart}
    rank = dict(restart)
    for _ in range(iterations):
        dangling = sum(rank[n] for n in nodes if not out.get(n))
        new = {n: (1 - damping + damping * dangling) * restart[n] for n in nodes}
        for a, total_out in out.items():
            if total_out <= 0:
                continue
            share = damping * rank[a] / total_out
            for b, weight in edges[a].items():
                if b in new:
                    new[b] += share * weight
        delta = sum(abs(new[n] - rank[n]) for n in nodes)
        rank = new
        if delta < tolerance:
            break
    return rank


@dataclass(frozen=True)
class Ranking:
    """Files in order (pinned first) and every entry to show, best first: (file, index of the
    definition in the file's tags, or -1 for the path alone)."""

    files: tuple[str, ...]
    entries: tuple[tuple[str, int], ...]
    pinned: tuple[str, ...]


def rank(tags: Mapping[str, Tags | None], terms: Terms, pinned: Sequence[str] = ()) -> Ranking:
    """Rank files and their definitions for a task (see the module docstring)."""
    nodes = sorted(tags)
    definers: dict[str, list[str]] = {}
    for rel in nodes:
        for definition in _definitions(tags[rel]):
            name = definition.short_name
            if len(name) >= 2 and not (name.startswith("__") and name.endswith("__")):
                owners = definers.setdefault(name, [])
                if not owners or owners[-1] != rel:
                    owners.append(rel)
    edges: dict[str, dict[str, float]] = {}
    flows: list[tuple[str, str, str, float]] = []
    for rel in nodes:
        found = tags[rel]
        if found is None:
            continue
        for name, uses in found.references.items():
            owners = [o for o in definers.get(name, ()) if o != rel]
            if not owners:
                continue
            weight = math.sqrt(uses) / len(owners) * _specificity(name)
            if name.lower() in terms.names:
                weight *= MENTIONED_WEIGHT
            elif name.startswith("_"):
                weight *= PRIVATE_WEIGHT
            for owner in owners:
                targets = edges.setdefault(rel, {})
                targets[owner] = targets.get(owner, 0.0) + weight
                flows.append((rel, owner, name, weight))
    named = {rel for rel in nodes if terms.names_file(rel)}
    matched = {rel: _match(rel, tags[rel], terms, rel in named, rel in pinned) for rel in nodes}
    matched_total = sum(matched.values())
    personal = {
        rel: UNIFORM_SHARE / len(nodes)
        + (1 - UNIFORM_SHARE) * (matched[rel] / matched_total if matched_total else 0.0)
        for rel in nodes
    }
    ranks = pagerank(nodes, edges, personal)
    weight_of = {rel: TEST_SHARE if is_test(rel) and rel not in named else 1.0 for rel in nodes}
    through: dict[tuple[str, str], float] = {}
    out = {a: sum(t.values()) for a, t in edges.items()}
    for source, owner, name, weight in flows:
        key = (owner, name)
        through[key] = through.get(key, 0.0) + ranks[source] * weight / out[source]
    scored: list[tuple[float, str, int]] = []
    for rel in nodes:
        found = tags[rel]
        definitions = _definitions(found)
        if not definitions:
            scored.append((ranks[rel] * PATH_ONLY_SHARE * weight_of[rel], rel, -1))
            continue
        base = ranks[rel] * BASE_SHARE / len(definitions)
        for index, definition in enumerate(definitions):
            match = terms.definition_match(definition)
            score = through.get((rel, definition.short_name), 0.0) + base + ranks[rel] * match
            if definition.short_name.startswith("_") and match < 1:
                score *= PRIVATE_WEIGHT  # what a file keeps to itself is rarely what a task asks for
            scored.append((score * weight_of[rel], rel, index))
    file_score = {
        rel: ranks[rel] * weight_of[rel] + (matched[rel] / matched_total if matched_total else 0.0)
        for rel in nodes
    }
    pins = tuple(p for p in pinned if p in tags)
    order = [*pins, *sorted((r for r in nodes if r not in pins), key=lambda r: (-file_score[r], r))]
    position = {rel: i for i, rel in enumerate(order)}
    scored.sort(key=lambda e: (-e[0], position[e[1]], e[2]))
    return Ranking(tuple(order), tuple((rel, index) for _, rel, index in scored), pins)


def _specificity(name: str) -> float:
    """A short lower-case word (`get`, `text`, `check`) names something in many places; a class name or
    a name of several words (`parse_args`, `TagCache`) names one thing."""
    if name[0].isupper() or len(name) >= 8 or len(pieces(name)) >= 2:
        return 1.0
    return GENERIC_WEIGHT


def _definitions(found: Tags | None) -> tuple[Definition, ...]:
    return found.definitions if found is not None else ()


def _match(rel: str, found: Tags | None, terms: Terms, named: bool, pinned: bool) -> float:
    """How much the task's words point at a file: pinned or named 1 each, its path's words a part,
    its best-matching definition up to 1 and a tenth of the others."""
    score = (1.0 if pinned else 0.0) + (1.0 if named else 0.3 * terms.word_share(rel))
    matches = sorted((terms.definition_match(d) for d in _definitions(found)), reverse=True)
    if matches:
        score += matches[0] + 0.1 * sum(matches[1:])
    return score
