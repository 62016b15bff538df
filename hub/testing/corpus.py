"""The edit corpus: model replies, the files they were meant for, and what a careful tool makes of them.

One case per file in `tests/edits/corpus/`, in sections that each start with a line `%%%% NAME`:

    %%%% case
    source: where the shape was reported (an issue thread, a described failure)
    allowed: calc.py            (optional; default: every file named in the case)
    done_reason: length         (optional; how the server ended the reply; default: stop)
    %%%% original calc.py       (one per existing file; the text runs exactly to the next section line)
    %%%% reply                  (the model's answer)
    %%%% expected calc.py       (one per file the answer should change or create)
    %%%% expected refuse        (instead: nothing may be written)

`score` sorts what a tool wrote into accepted (exactly the expected files), refused (nothing written),
destroyed (lines the intended file keeps are gone) or wrong (anything else written). Only the standard
library is used: the benchmark also reads the corpus with an older hub's edit code.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SECTION = "%%%% "
OUTCOMES = ("accepted", "refused", "wrong", "destroyed")


@dataclass(frozen=True)
class Case:
    """One corpus case; `expected` None means the reply must be refused."""

    name: str
    source: str
    reply: str
    originals: dict[str, str]
    expected: dict[str, str] | None
    allowed: tuple[str, ...]
    done_reason: str = "stop"
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def default_path(self) -> str | None:
        """The implementer's fallback path for a block without one: the only allowed plain file."""
        only = self.allowed[0] if len(self.allowed) == 1 else None
        # hub.core.relpaths.is_glob's test, written out: hub.testing imports nothing of hub above it, and
        # bench/bench_edits.py copies this file into hub trees older than that helper.
        return only if only and not any(c in only for c in "*?[") else None


def load_cases(folder: Path) -> list[Case]:
    """Every `*.case` file in the folder, sorted by name; a malformed one raises ValueError naming it."""
    return [read_case(path) for path in sorted(folder.glob("*.case"))]


def read_case(path: Path) -> Case:
    text = path.read_text(encoding="utf-8")
    sections: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith(SECTION):
            sections.append((line[len(SECTION) :].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{path.name}: text before the first {SECTION!r} line")
    meta: dict[str, str] = {}
    originals: dict[str, str] = {}
    expected: dict[str, str] = {}
    refuse = False
    reply: str | None = None
    for n, (title, lines) in enumerate(sections):
        # A section's text runs to the next section line; the file's own final newline ends the last.
        body = "\n".join(lines) + ("\n" if n < len(sections) - 1 else "")
        kind, _, name = title.partition(" ")
        if kind == "case":
            for entry in lines:
                key, sep, value = entry.partition(":")
                if sep:
                    meta[key.strip()] = value.strip()
        elif kind == "original":
            originals[name] = body
        elif kind == "reply":
            reply = body
        elif kind == "expected" and name == "refuse":
            refuse = True
        elif kind == "expected":
            expected[name] = body
        else:
            raise ValueError(f"{path.name}: unknown section {title!r}")
    if reply is None or "source" not in meta or refuse == bool(expected):
        raise ValueError(f"{path.name}: needs a source, a reply, and expected files or 'expected refuse'")
    allowed = tuple(meta["allowed"].split()) if meta.get("allowed") else tuple({**originals, **expected})
    return Case(
        name=path.stem,
        source=meta["source"],
        reply=reply,
        originals=originals,
        expected=None if refuse else expected,
        allowed=allowed,
        done_reason=meta.get("done_reason", "stop"),
        meta=meta,
    )


def score(case: Case, after: dict[str, str | None]) -> str:
    """What became of the case: accepted, refused, wrong or destroyed. `after` maps each path named in
    the case to the file's text afterwards (None: absent)."""
    paths = set(case.originals) | set(case.expected or {})
    intended = {p: (case.expected or {}).get(p, case.originals.get(p)) for p in paths}
    if case.expected is not None and all(after.get(p) == intended[p] for p in paths):
        return "accepted"
    if all(after.get(p) == case.originals.get(p) for p in paths):
        return "refused"
    for path, old in case.originals.items():
        keep = _lines(old) & _lines(intended[path])
        if keep - _lines(after.get(path)):
            return "destroyed"
    return "wrong"


def _lines(text: str | None) -> Counter[str]:
    return Counter(line.strip() for line in (text or "").split("\n") if line.strip())
