"""Choosing the files again after a wrong choice (issue 34): a task whose files the hub found (edit mode,
attempt_files.py) whose attempt then failed in a way that points at the choice (the acceptance tests
still failed, or the answer changed or asked for files it was not given: a `wrong_files` stall) has its
retry ask for the files once more, in one cheap call like the first. The model is told what it chose and
that it failed, with the failing tests' names and the files the test output names at a line
(`tenacity/wait.py:123`, `File "…/wait.py", line 123`): strong evidence, so they are pinned first on the
map, and the tests' names join the words the map is ranked for. A task whose files a person named is
never asked again: the person's choice stands."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hub.core.relpaths import first_match
from hub.edits.policy import control_file_refusal
from hub.phases import prompt_parts
from hub.review.ranking import is_test

if TYPE_CHECKING:
    from hub.edits.apply import ApplyResult
    from hub.phases.workbench import Workbench
    from hub.state.contract import StallRecord

# The stalls of an attempt on found files that say the files may be the wrong ones.
REFIND_AFTER = frozenset({"tests_failed", "wrong_files"})
MAX_PINNED = 4
MAX_TESTS = 10

# `path/to/file.py:123` (pytest's short tracebacks, most tools) and `File "path", line 123` (Python's).
_AT_LINE = re.compile(
    r"""(?:File "(?P<quoted>[^"\n]+)", line \d+)|(?P<path>[\w./\\-]+\.[A-Za-z0-9]{1,10}):\d+"""
)
# pytest's `FAILED tests/test_x.py::test_name - ...`, `tests/test_x.py::test_name FAILED`, unittest's
# `FAIL: test_name (module.Class.test_name)`.
_FAILED = re.compile(
    r"^(?:FAILED|ERROR)\s+\S*?::(?P<a>[\w\[\]:.-]+)|\S*?::(?P<b>[\w\[\]:.-]+)\s+(?:FAILED|ERROR)\b"
    r"|^(?:FAIL|ERROR):\s+(?P<c>\w+)",
    re.MULTILINE,
)
_PATHISH = re.compile(r"[\w./-]+\.[A-Za-z0-9]{1,10}")


@dataclass(frozen=True)
class Refind:
    """What the second find-files call is told and ranks by."""

    chosen: tuple[str, ...]  # the files the last attempt was given
    reason: str  # the last attempt's stall
    tests: tuple[str, ...]  # the failing tests' names
    mentioned: tuple[str, ...]  # repository files the output names at a line, most named first


def refind_due(bench: Workbench) -> StallRecord | None:
    """The last attempt's stall when this attempt should choose its files again: the hub chose them (the
    task named none), for an earlier attempt, and that attempt ended in a stall of REFIND_AFTER."""
    contract = bench.contract
    spec, data = contract["specification"], contract["handoff_data"]
    found = data.get("found_files")
    if not spec.get("find_files") or not spec.get("source_files") or not found:
        return None
    attempt = contract["attempt"]
    if found.get("attempt", attempt) >= attempt:
        return None
    stalls = [s for s in data.get("stalls", []) if s.get("role") == "implementer"]
    last = stalls[-1] if stalls else None
    if last is None or last.get("attempt") != attempt - 1 or last.get("reason") not in REFIND_AFTER:
        return None
    return last


def refind_from(
    stall: StallRecord, chosen: Sequence[str], repository: Collection[str], worktree: Path
) -> Refind:
    """The hints a failed attempt's stall gives: its failing tests and the files its output names."""
    detail = stall.get("detail", "")
    tests = list(dict.fromkeys(next(g for g in m.groups() if g) for m in _FAILED.finditer(detail)))
    return Refind(
        chosen=tuple(chosen),
        reason=stall.get("reason", ""),
        tests=tuple(tests[:MAX_TESTS]),
        mentioned=tuple(mentioned_files(detail, repository, worktree)),
    )


def mentioned_files(output: str, repository: Collection[str], worktree: Path) -> list[str]:
    """The repository's files `output` names at a line, most named first: a path as git spells it, or
    absolute inside the worktree, or one only one repository file ends with (a traceback from an
    installed copy of the package); anything else (the standard library, site-packages) is left out."""
    roots = {f"{worktree}/", f"{worktree.resolve()}/"}
    counted: Counter[str] = Counter()
    for match in _AT_LINE.finditer(output):
        raw = (match.group("quoted") or match.group("path") or "").replace("\\", "/")
        for root in roots:
            raw = raw.removeprefix(root)
        raw = raw.removeprefix("./")
        found = _in_repository(raw, repository)
        if found is not None:
            counted[found] += 1
    return [path for path, _ in counted.most_common()]


def _in_repository(path: str, repository: Collection[str]) -> str | None:
    if path in repository:
        return path
    if path.startswith("/"):
        # An installed copy of the package (`.../site-packages/tenacity/wait.py`): the one repository
        # file inside a folder it ends with (a top-level `os.py` would match the standard library's).
        ends = [f for f in repository if "/" in f and path.endswith("/" + f)]
    else:
        ends = [f for f in repository if f.endswith("/" + path)]
    return ends[0] if len(ends) == 1 else None


def pins(refind: Refind) -> list[str]:
    """The files the map shows first: the source files the failing output names (its test files add
    their names to the ranking's words instead: they are what failed, not where the fix goes)."""
    return [f for f in refind.mentioned if not is_test(f)][:MAX_PINNED]


def words(refind: Refind) -> str:
    return "\n".join(name.replace("::", " ") for name in refind.tests)


def told(root: Path, refind: Refind) -> str:
    """The section of the find-files prompt that says what happened to the last choice."""
    outcome = prompt_parts.fragment(
        root, "find_files_tests_failed" if refind.reason == "tests_failed" else "find_files_wrong_files"
    )
    tests = prompt_parts.bullets(list(refind.tests)) if refind.tests else "(no test names in the output)"
    mentioned = ", ".join(refind.mentioned) or "(none of the repository's files)"
    return (
        "\n"
        + prompt_parts.fragment(
            root,
            "find_files_again",
            chosen=", ".join(refind.chosen),
            outcome=outcome,
            tests=tests,
            mentioned=mentioned,
        )
        + "\n"
    )


def other_files(bench: Workbench, text: str, result: ApplyResult | None) -> list[str]:
    """For a task whose files the hub found, the files an answer that wrote nothing went for instead of
    them: those its refused edits were for, outside the files it was given (not forbidden ones, not the
    hub's), else the repository files its text names that it was not given. Empty otherwise, and for a
    task whose files a person named."""
    contract = bench.contract
    spec, constraints = contract["specification"], contract["constraints"]
    if not spec.get("find_files"):
        return []
    allowed, forbidden = constraints["allowed_paths"], constraints["forbidden_paths"]
    control = bench.policy().control_paths

    def other(path: str) -> bool:
        return (
            first_match(path, allowed) is None
            and first_match(path, forbidden) is None
            and control_file_refusal(path, control) is None
        )

    if result is not None and result.refused:
        paths = [r.path for r in result.refused]
        return list(dict.fromkeys(paths)) if all(other(p) for p in paths) else []
    from hub.review.repomap import tracked_files  # only for an answer that wrote nothing

    repository = set(tracked_files(bench.run.worktree))
    named = [p.removeprefix("./") for p in _PATHISH.findall(text)]
    return list(dict.fromkeys(p for p in named if p in repository and other(p)))
