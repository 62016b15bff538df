"""How the repository map ranks files and definitions for a task: the task's words (`Terms`), a
personalised PageRank over the graph of which file uses a name another defines (`pagerank`), and the
scores of definitions and files (`rank`). Pure: it is given the tags of every file.

- Every file is a node; file A has an edge to file B for each name A uses that B defines (`tags.py`),
  weighted by the square root of the uses, divided among the files defining the same name; names the
  task writes as code weigh more, private names (`_x`), short lower-case words (`text`) and methods
  of the builtin types (`get`, `items`) less, dunder names not at all.
- How much the task points at a file: its path or stem named, its definitions named (as code, or as
  plain words), and the share of the task's words its text holds (comments too). Each word counts as
  rare as it is among the repository's files: `task` in a task runner points nowhere in particular.
- The random walk restarts at those files by how much, and at the pinned files, with a tenth of the
  restart spread over every file. A file's rank is then lifted by how much more the task's walk visits
  it than a walk without a task (squared: LIFT), so that the files every file uses (an error tree)
  do not lead every map.
- A definition's score is the rank that flows to it through its name, plus a share of its file's rank
  (all of it when the words name the definition), times its file's lift. A file without definitions we
  can read (a README, a file over the size cap or not UTF-8) is one entry, its path, scored from its rank.
- Test files count half unless the words name them: a test uses much and defines little a task asks
  to change. Pinned files come first, then files by lifted rank plus their share of the task's pointing.

The weights were chosen on the one-file commits of this repository, humanize and tenacity
(bench/bench_repomap.py: does the map show the file the commit changed?); itsdangerous was not used
to choose them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath

from hub.review.tags import Definition, Tags

DAMPING = 0.85
UNIFORM_SHARE = 0.1  # of the restart, spread over every file
TEST_SHARE = 0.5
PRIVATE_WEIGHT = 0.1
GENERIC_WEIGHT = 0.2
BUILTIN_WEIGHT = 0.05
MENTIONED_WEIGHT = 10.0
TEXT_WEIGHT = 2.0
LIFT = 2.0  # how much the task's walk over a walk without one counts, as a power
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
# `x.get(...)` is nearly always a dict's, whatever the repository defines as `get`.
_COMMON_METHODS = "read write close flush open run start stop send join wait info debug warning error"
_BUILTIN_METHODS = frozenset(
    name
    for kind in (dict, list, str, bytes, set, int, float, tuple, PurePath)
    for name in dir(kind)
    if not name.startswith("_")
) | frozenset(_COMMON_METHODS.split())
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
    `paths`: its path-like tokens. `rarity`: how rare each word is among the repository's files (1 for
    a word in one file or none, towards 0 for one in all), so that a repository's common words (`task`
    in a task runner) do not point everywhere."""

    names: frozenset[str]
    words: frozenset[str]
    paths: frozenset[str]
    rarity: Mapping[str, float] = field(default_factory=dict, compare=False)

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
        """The share of a name's words the task uses, each as rare as it is (0 when it has none)."""
        own = {w for w in pieces(name) if len(w) >= 3 and w not in STOP_WORDS}
        return sum(self.rarity.get(w, 1.0) for w in own & self.words) / len(own) if own else 0.0

    def names_file(self, rel: str) -> bool:
        """Does the text name this file: its path, its file name with extension, or its stem as code?"""
        name = rel.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0].lower()
        return rel in self.paths or ("." in name and name in self.paths) or stem in self.names

    def file_match(self, rel: str) -> float:
        """1 for a file the text names, a half for one whose stem it uses as a word (`the schema`), a
        part for one whose path's words it uses."""
        if self.names_file(rel):
            return 1.0
        stem = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
        if stem in self.words:
            return 0.5 * self.rarity.get(stem, 1.0)
        return 0.3 * self.word_share(rel)

    def definition_match(self, short_name: str) -> float:
        """For a definition's short name: 1 when the text names it as code, a half when it names it as a
        plain word (`the cache`), a part when it uses some of its words, else 0."""
        lower = short_name.lower()
        if lower in self.names:
            return 1.0
        if lower in self.words:
            return 0.5 * self.rarity.get(lower, 1.0)
        return 0.3 * self.word_share(short_name)


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
    tolerance: float = 1e-7,
) -> dict[str, float]:
    """PageRank by power iteration, restarting by `personal` (uniform when it is all zero). A node
    without out-edges gives its rank back by `personal` too. Ranks sum to 1."""
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    total = sum(max(0.0, personal.get(n, 0.0)) for n in nodes)
    restart = [max(0.0, personal.get(n, 0.0)) / total if total else 1 / len(nodes) for n in nodes]
    links: list[tuple[int, list[tuple[int, float]]]] = []
    for name, targets in edges.items():
        kept = [(index[b], w) for b, w in targets.items() if b in index and w > 0]
        out = sum(w for _, w in kept)
        if name in index and out > 0:
            links.append((index[name], [(b, w / out) for b, w in kept]))
    linked = {source for source, _ in links}
    dangling = [i for i in range(len(nodes)) if i not in linked]
    rank = list(restart)
    for _ in range(iterations):
        kept_back = 1 - damping + damping * sum(rank[i] for i in dangling)
        new = [kept_back * r for r in restart]
        for source, shares in links:
            share = damping * rank[source]
            for target, weight in shares:
                new[target] += share * weight
        delta = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if delta < tolerance:
            break
    return dict(zip(nodes, rank, strict=True))


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
    terms = replace(terms, rarity=_rarity(tags, terms.words))
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
    match_of: dict[str, float] = {}
    for rel in nodes:
        for definition in _definitions(tags[rel]):
            if definition.short_name not in match_of:
                match_of[definition.short_name] = terms.definition_match(definition.short_name)
    pins = set(pinned)
    matched = {rel: _match(rel, tags[rel], terms, match_of, rel in named, rel in pins) for rel in nodes}
    matched_total = sum(matched.values())
    personal = {
        rel: UNIFORM_SHARE / len(nodes)
        + (1 - UNIFORM_SHARE) * (matched[rel] / matched_total if matched_total else 0.0)
        for rel in nodes
    }
    ranks = pagerank(nodes, edges, personal)
    # What the task's walk visits more than a walk without a task: a file every file uses (the error
    # tree) is near the top of both and should not lead every map.
    plain = pagerank(nodes, edges, {}) if matched_total else ranks
    lift = {rel: (ranks[rel] / plain[rel]) ** LIFT if plain[rel] > 0 else 1.0 for rel in nodes}
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
            scored.append((ranks[rel] * PATH_ONLY_SHARE * weight_of[rel] * lift[rel], rel, -1))
            continue
        base = ranks[rel] * BASE_SHARE / len(definitions)
        for index, definition in enumerate(definitions):
            match = match_of[definition.short_name]
            score = through.get((rel, definition.short_name), 0.0) + base + ranks[rel] * match
            if definition.short_name.startswith("_") and match < 1:
                score *= PRIVATE_WEIGHT  # what a file keeps to itself is rarely what a task asks for
            scored.append((score * weight_of[rel] * lift[rel], rel, index))
    file_score = {
        rel: weight_of[rel]
        * (ranks[rel] * lift[rel] + (matched[rel] / matched_total if matched_total else 0.0))
        for rel in nodes
    }
    first = tuple(dict.fromkeys(p for p in pinned if p in tags))
    order = [*first, *sorted((r for r in nodes if r not in pins), key=lambda r: (-file_score[r], r))]
    position = {rel: i for i, rel in enumerate(order)}
    scored.sort(key=lambda e: (-e[0], position[e[1]], e[2]))
    return Ranking(tuple(order), tuple((rel, index) for _, rel, index in scored), first)


def _rarity(tags: Mapping[str, Tags | None], words: frozenset[str]) -> dict[str, float]:
    """For each of the task's words, log(N / files whose path or text holds it) / log N."""
    if len(tags) < 2 or not words:
        return {}
    seen: dict[str, int] = dict.fromkeys(words, 0)
    for rel, found in tags.items():
        own = set(pieces(rel)) | (found.words if found is not None else frozenset())
        for word in own & words:
            seen[word] += 1
    n = len(tags)
    return {w: math.log(n / max(1, count)) / math.log(n) for w, count in seen.items()}


def _text_share(found: Tags | None, terms: Terms) -> float:
    """The share of the task's words (each as rare as it is) that the file's text holds."""
    if found is None or not terms.words:
        return 0.0
    total = sum(terms.rarity.get(w, 1.0) for w in terms.words)
    held = sum(terms.rarity.get(w, 1.0) for w in terms.words & found.words)
    return held / total if total else 0.0


def _specificity(name: str) -> float:
    """A short lower-case word (`text`, `check`) names something in many places, a method of the
    builtin types (`get`, `items`, `append`) mostly those; a class name or a name of several words
    (`parse_args`, `TagCache`) names one thing."""
    weight = BUILTIN_WEIGHT if name in _BUILTIN_METHODS else 1.0
    if name[0].isupper() or len(name) >= 8 or len(pieces(name)) >= 2:
        return weight
    return weight * GENERIC_WEIGHT


def _definitions(found: Tags | None) -> tuple[Definition, ...]:
    return found.definitions if found is not None else ()


def _match(
    rel: str, found: Tags | None, terms: Terms, match_of: Mapping[str, float], named: bool, pinned: bool
) -> float:
    """How much the task's words point at a file: pinned or named 1 each, its path's words a part,
    its best-matching definition up to 1 and a tenth of the others."""
    score = (1.0 if pinned else 0.0) + (1.0 if named else terms.file_match(rel))
    matches = sorted((match_of[d.short_name] for d in _definitions(found)), reverse=True)
    if matches:
        score += matches[0] + 0.1 * sum(matches[1:])
    return score + TEXT_WEIGHT * _text_share(found, terms) ** 2
