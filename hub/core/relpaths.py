"""Repository-relative path text, spelled one way: the parts of a path, a path in its clean form, whether
an entry of `allowed_paths` is a glob, and the one matcher that decides whether a task may write a path
(`refusal`). Pure: nothing here touches the disk."""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence


def path_parts(path: str) -> list[str]:
    """The parts between `/`s, without the empty and `.` ones: `./src//a.py` -> `["src", "a.py"]`."""
    return [part for part in path.split("/") if part not in ("", ".")]


def clean_path(path: str) -> str:
    """`\\` read as `/`, then the empty and `.` parts dropped: `.\\src/./a.py` -> `src/a.py`; `.` -> ``."""
    return "/".join(path_parts(path.replace("\\", "/")))


def is_glob(pattern: str) -> bool:
    """Whether the entry holds a glob character (`*`, `?`, `[`), so it names files by pattern."""
    return any(c in pattern for c in "*?[")


# --- the one path matcher ---------------------------------------------------------------------------------
# Every question about allowed and forbidden paths is answered here: the edit layer (hub.edits.policy),
# the clean-up after an acceptance command and the checkpoint (hub.repo.gitops), and the diff breaker
# that reads what a task branch changed (hub.state.breakers). Two readings of the same glob once let an
# edit be written that no checkpoint committed (issue 28).

# Files that configure tools rather than hold the project's code: a task may change one only when its
# `allowed_paths` names it exactly (not through `.`, a folder above it or a glob). Decided by shape, not by a
# list of the tools known today (issue 38: 23 of 24 tool files tried were committed under `.`): every
# dot-file and every file in a dot-folder, at any depth (`.vscode/tasks.json`, `.devcontainer/*`, `.envrc`,
# `.lfsconfig`, `.gitlab-ci.yml`, `.cursor/...`), and the few tool files named without a dot below. The
# Makefile is not one: it is the project's own build, changed by ordinary tasks; when an acceptance command
# runs make it is an acceptance file (`acceptance_file`), which needs naming all the same.
TOOL_FILES = (
    "AGENTS.md",
    "AGENTS.override.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "GEMINI.md",
    "CONVENTIONS.md",
    "Jenkinsfile",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "appveyor.yml",
    "codecov.yml",
    "renovate.json",
    "lefthook.yml",
    "lefthook.yaml",
    "lefthook-local.yml",
)
_TOOL_NAMES = frozenset(name.lower() for name in TOOL_FILES)


def behaviour_file(path: str) -> str | None:
    """What makes `path` a tool's file: the folder holding it, when a dot-folder is on its way
    (`.github/workflows/` for `.github/workflows/ci.yml`), its own dot-name or one of `TOOL_FILES`
    (compared without case, as a case-insensitive file system would), else None."""
    parts = path_parts(clean_path(path).lower())
    if any(part.startswith(".") for part in parts[:-1]):
        return "/".join(parts[:-1]) + "/"
    if parts and (parts[-1].startswith(".") or parts[-1] in _TOOL_NAMES):
        return "/".join(parts)
    return None


# --- the acceptance tests -----------------------------------------------------------------------------------
# The files an acceptance command runs are the task's specification: a change to one is refused unless
# `allowed_paths` names it (issue 38: a SEARCH/REPLACE on tests/test_calc.py made failing assertions pass).
# Which they are, by shape, with no look at the disk: what a command names (`pytest tests/test_calc.py`,
# `python check.py`, everything under `tests/`), test files and fixtures wherever they are (a bare `pytest`
# or `make test` runs them all), and the files that tell the named runner what to run.
TEST_FILE = re.compile(r"^(test_.*|.*_test|conftest)\.py$|^.*[._](test|spec)\.[cm]?[jt]sx?$|^.*_test\.go$")
TEST_FOLDERS = frozenset({"test", "tests", "testing", "__tests__", "spec", "fixtures"})
RUNNER_FILES = {
    "make": ("makefile", "gnumakefile"),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
    "pytest": ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"),
    "py.test": ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"),
    "npm": ("package.json",),
}


def command_paths(commands: Sequence[str]) -> list[str]:
    """The repo-relative paths the commands name (`tests/test_calc.py::test_add` -> `tests/test_calc.py`);
    options, absolute paths and `..` left out."""
    found: list[str] = []
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        for word in words:
            name = clean_path(word.split("::", 1)[0])
            if not name or word.startswith(("-", "/", "~", "$")) or "=" in word or ".." in name.split("/"):
                continue
            found.append(name)
    return found


def acceptance_file(path: str, commands: Sequence[str]) -> str | None:
    """Why `path` is part of what the acceptance `commands` run (the path or shape it falls under), else
    None; never anything without a command."""
    if not commands:
        return None
    rel = clean_path(path)
    lowered = rel.lower()
    parts = lowered.split("/")
    for name in command_paths(commands):
        if rel == name or rel.startswith(name + "/"):
            return name
    if TEST_FILE.match(parts[-1]):
        return "a test file"
    if any(part in TEST_FOLDERS for part in parts[:-1]):
        return "a file of the tests' folder"
    words = {w.rsplit("/", 1)[-1] for c in commands for w in c.split()}
    for runner, files in RUNNER_FILES.items():
        if runner in words and lowered in files:
            return f"what tells {runner} what to run"
    return None


def named_exactly(path: str, entries: Sequence[str], commands: Sequence[str] = ()) -> bool:
    """Whether a non-glob entry names `path` itself, the tool's folder holding it, or the tests' folder it
    lies in (`.claude` names `.claude/settings.json`, `.github/workflows` names `.github/workflows/ci.yml`,
    `tests` names `tests/test_calc.py`; `.`, `src` and `.github` for `.github/workflows/ci.yml` do not)."""
    rel = clean_path(path)
    kind = behaviour_file(rel)
    for entry in entries:
        name = clean_path(entry.strip())
        if not name or is_glob(name) or not (rel == name or rel.startswith(name + "/")):
            continue
        if rel == name:
            return True
        if kind is not None:
            if kind.endswith("/") and name.lower() + "/" == kind:
                return True
            continue
        if _tests_folder(name, commands):
            return True
    return False


def _tests_folder(name: str, commands: Sequence[str]) -> bool:
    """Whether the folder `name` is itself the tests' (named by a command, or a tests' folder by name)."""
    return name.lower().rsplit("/", 1)[-1] in TEST_FOLDERS or name in command_paths(commands)


def first_match(path: str, entries: Sequence[str]) -> str | None:
    """The first entry (file, folder or glob) a clean repo-relative path falls under, else None.

    A folder entry covers everything under it; `.` covers everything. In a glob `*` and `?` stay within
    one name, `[...]`/`[!...]` is a set, `**` crosses folders (`src/**/*.py` covers `src/y.py` too), a
    glob without a slash is matched against each name on the path (`*.md` at any depth, `build?` covers
    `build7/out/f.o`), and a glob that matches a folder covers everything under it."""
    for entry in entries:
        pattern = clean_path(entry.strip())
        if not pattern:
            if entry.strip() in (".", "./", "/"):
                return entry
            continue
        if is_glob(pattern):
            target = path if "/" in pattern else path.rsplit("/", 1)[-1]
            if _glob_regex(pattern).match(target) or ("/" not in pattern and _under_glob(path, pattern)):
                return entry
        elif path == pattern or path.startswith(pattern + "/"):
            return entry
    return None


def refusal(
    path: str,
    allowed: Sequence[str],
    forbidden: Sequence[str] = (),
    control: Sequence[str] = (),
    commands: Sequence[str] = (),
) -> str | None:
    """Why a task may not write `path` (a clean repo-relative path), else None: one of the hub's control
    files, inside `forbidden` (which wins), outside `allowed`, or a tool's file or one of the acceptance
    `commands`' files that `allowed` does not name exactly. Control names are compared without case."""
    lowered = path.lower()
    for entry in control:
        name = entry.strip("/").lower()
        if name and (lowered == name or lowered.startswith(name + "/")):
            return f"path is the hub's control file {entry!r}"
    hit = first_match(path, forbidden)
    if hit is not None:
        return f"path is inside forbidden_paths ({hit!r})"
    if first_match(path, allowed) is None:
        shown = ", ".join(allowed) if allowed else "none"
        return f"path is not inside allowed_paths ({shown})"
    kind = behaviour_file(path)
    if kind is not None and not named_exactly(path, allowed):
        return (
            f"path is {kind!r}, which changes how git, CI or coding agents behave: a task may change it only "
            "when allowed_paths names it exactly (not through '.', a folder above it or a glob)"
        )
    tests = acceptance_file(path, commands)
    if tests is not None and not named_exactly(path, allowed, commands):
        return (
            f"path is one of the acceptance tests ({tests}): they decide whether the task is done, so a task "
            "may change them only when allowed_paths names them (the file or its tests' folder)"
        )
    return None


def _under_glob(path: str, pattern: str) -> bool:
    """A slash-free glob also matches a folder anywhere on the path (`build*` covers `build1/x`)."""
    regex = _glob_regex(pattern)
    return any(regex.match(part) for part in path.split("/")[:-1])


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            close = pattern.index("]", i + 2)
            body = pattern[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # A glob naming a folder allows everything under it, like a plain directory entry.
    return re.compile("".join(out) + "(?:/.*)?$")
