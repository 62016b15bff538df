"""Tasks from a repository's own history (issue 34), SWE-bench style: a commit that fixes something and
tests it becomes a task whose requirement is its message and whose acceptance is its tests.

`find_candidates` walks the first-parent, non-merge history newest first and keeps the commits that
change 1..N source files and add or change a test module. `prepare_task` then checks one candidate in a
throwaway worktree: the parent with the commit's test files applied must fail the touched tests and the
commit must pass them; the tests that go from failing to passing are read from pytest's JUnit XML
report (a documented format; `-rA` lines break on parameter ids with spaces and on plugins that
reword the summary). The parent with the test files becomes the task's base, a commit of its own on
`hub-eval/base/<sha>`, made with a fixed identity and the commit's own date so the same history always
gives the same base.

How a changed file counts:

- test file: `test_*.py`, `*_test.py`, `conftest.py`, or anything under a `tests/` or `test/` folder
  (their data files too: the tests need them at the base);
- source file: any other `.py` file, but for those in IGNORED_PY;
- compiled code (`.pyx`, `.c`, ...): the commit is skipped, the eval builds no extensions;
- anything else (docs, config, changelogs, CI, packaging data), and the `.py` files in IGNORED_PY:
  ignored, neither counted nor disqualifying, since the tests do not import them.

The test runs here execute the repository's own code at the parent and at the commit, never a model's;
the hub later runs the acceptance command in its sandbox.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

from hub.core.errors import GitError
from hub.core.log import get_logger
from hub.evals.history_env import default_test_command
from hub.repo.child import PIPE, Child
from hub.repo.sandbox_views import drop_orphan_views
from hub.safety.git_view import git_folders

log = get_logger(__name__)

GIT_TIMEOUT = 120.0
TEST_TIMEOUT = 300.0
BASE_BRANCH = "hub-eval/base/{sha}"
# Who made a base commit: fixed, so that one history gives one base sha wherever it is prepared.
BASE_IDENTITY = {"GIT_AUTHOR_NAME": "hub eval", "GIT_AUTHOR_EMAIL": "hub-eval@localhost"}
BASE_MESSAGE = "hub eval base for {sha}: its parent with its test files\n"

# Variables that would point git at another repository than the one asked for.
GIT_REDIRECTS = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"})
TEST_DIRS = frozenset({"tests", "test"})
# Python files that are no part of what the tests import: documentation, examples, benchmarks,
# packaging and task-runner scripts. Changing them neither counts as a source file nor disqualifies.
IGNORED_PY_DIRS = frozenset({"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts"})
IGNORED_PY_NAMES = frozenset({"setup.py", "noxfile.py", "fabfile.py", "tasks.py", "conf.py"})
# Code the eval would have to compile: a commit changing it is not a pure-Python task.
COMPILED = frozenset({".pyx", ".pxd", ".pxi", ".c", ".h", ".cc", ".cpp", ".hpp", ".rs", ".f90"})
SLUG_CHARS = 40
# What of a failing run's output a skip keeps for its detail.
DETAIL_CHARS = 600

# pytest's exit codes (https://docs.pytest.org/en/stable/reference/exit-codes.html).
PYTEST_INTERRUPTED, PYTEST_USAGE, PYTEST_NO_TESTS = 2, 4, 5


class Reason(StrEnum):
    """Why a commit is no task."""

    ROOT = "root commit: no parent to start from"
    NO_TEST = "no test module added or changed"
    NO_SOURCE = "no source file changed"
    TOO_MANY_SOURCES = "more source files changed than allowed"
    COMPILED = "changes compiled code"
    PASSES_ON_PARENT = "the touched tests did not fail on the parent"
    FAILS_ON_COMMIT = "the touched tests failed on the commit"
    COLLECTION_ERROR = "the touched tests could not be collected on the commit"
    NO_TESTS_RAN = "no test ran on the commit"
    NOTHING_TURNS = "no test goes from failing to passing"
    TIMED_OUT = "the tests timed out"
    GIT_FAILED = "git could not build the base"
    HUB_NEW_REFUSED = "`hub new` refused the task"  # said by hub eval --history, once the task is made


class Kind(StrEnum):
    TEST = "test"
    SOURCE = "source"
    COMPILED = "compiled"
    IGNORED = "ignored"


@dataclass(frozen=True)
class Candidate:
    """A commit whose changed files make it a possible task (not yet run)."""

    sha: str
    parent: str
    date: str  # committer date, ISO 8601: the base commit's date
    subject: str
    tests: tuple[str, ...]  # test files added or modified (taken from the commit into the base)
    deleted_tests: tuple[str, ...]  # test files the commit deletes (deleted from the base too)
    sources: tuple[str, ...]  # the source files it changes: the files a solution needs
    ignored: tuple[str, ...]  # neither test nor source (docs, config, IGNORED_PY)

    @property
    def test_modules(self) -> tuple[str, ...]:
        """The touched test files pytest is run on (conftest.py and data files are not run)."""
        return tuple(p for p in self.tests if is_test_module(p))


@dataclass(frozen=True)
class Skipped:
    """A commit that is no task, and why."""

    sha: str
    subject: str
    reason: Reason
    detail: str = ""


@dataclass(frozen=True)
class Walk:
    """What `find_candidates` saw: how many commits, which may be tasks, why the others are not."""

    walked: int
    candidates: tuple[Candidate, ...]
    skipped: tuple[Skipped, ...]


@dataclass(frozen=True)
class HistoryTask:
    """A verified task: its requirement, its base commit and the command that accepts a solution."""

    id: str  # short sha and a slug of the subject
    sha: str
    parent: str
    requirement: str  # the commit's whole message, nothing from its diff
    base: str  # the base commit: parent plus the commit's test files
    base_branch: str
    acceptance_command: str  # the test command on the touched test modules, run at the repository root
    tests: tuple[str, ...]  # the touched test files: forbidden to the model
    source_files: tuple[str, ...]  # the files the commit changed: files needed
    fail_to_pass: tuple[str, ...]  # test ids failing at the base, passing at the commit
    pass_to_pass: tuple[str, ...]  # test ids of the same files passing at both
    seconds: float  # spent preparing it

    def requirements(self, name_files: bool = False) -> list[str]:
        """The requirement paragraphs a task gets; with `name_files` (`--name-files`), a last one naming
        the files the change belongs in, otherwise the model finds them."""
        if not name_files:
            return [self.requirement]
        return [self.requirement, "The change belongs in " + ", ".join(self.source_files) + "."]

    def files_found(self, changed: Sequence[str]) -> tuple[int, int]:
        """Of the files the commit changed, how many a solution that changed `changed` also changed:
        (found, needed)."""
        return len(set(self.source_files) & set(changed)), len(self.source_files)


def classify(path: str) -> Kind:
    """What a changed file counts as (the module docstring says why)."""
    p = PurePosixPath(path)
    if is_test_module(path) or p.name == "conftest.py" or any(part in TEST_DIRS for part in p.parts[:-1]):
        return Kind.TEST
    if p.suffix in COMPILED:
        return Kind.COMPILED
    if p.suffix != ".py" or p.name in IGNORED_PY_NAMES or any(d in IGNORED_PY_DIRS for d in p.parts[:-1]):
        return Kind.IGNORED
    return Kind.SOURCE


def is_test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def find_candidates(
    repo: Path,
    *,
    since: str | None = None,
    limit: int | None = None,
    paths: Sequence[str] = (),
    max_source_files: int = 3,
) -> Walk:
    """The commits of `repo`'s first-parent, non-merge history from HEAD, newest first, that may be tasks:
    1..`max_source_files` source files and a test module added or changed. `since` is a date as `git log
    --since` takes it, `paths` limits the walk to commits touching them (git pathspecs), `limit` stops the
    walk at that many candidates. Merges are not walked: a history merged through pull requests gives
    only its direct commits (a merge's change is many commits' worth)."""
    args = ["log", "--first-parent", "--no-merges", "--format=%H%x00%P%x00%cI%x00%s"]
    if since:
        args.append(f"--since={since}")
    args += ["HEAD", "--", *paths]
    walked = 0
    candidates: list[Candidate] = []
    skipped: list[Skipped] = []
    for line in git(repo, *args).split("\n"):
        if not line:
            continue
        if limit is not None and len(candidates) >= limit:
            break
        sha, parents, date, subject = line.split("\x00", 3)
        walked += 1
        if not parents:
            skipped.append(Skipped(sha, subject, Reason.ROOT))
            continue
        parent = parents.split()[0]
        found = judge(sha, parent, date, subject, changed_files(repo, parent, sha), max_source_files)
        if isinstance(found, Candidate):
            candidates.append(found)
        else:
            skipped.append(found)
    log.debug("history.walked", repo=str(repo), walked=walked, candidates=len(candidates))
    return Walk(walked, tuple(candidates), tuple(skipped))


def changed_files(repo: Path, parent: str, sha: str) -> list[tuple[str, str]]:
    """(status letter, path) of every file `sha` changes against `parent`; a rename is a deletion and an
    addition, so the old test file goes from the base and the new one comes in."""
    out = git(repo, "diff-tree", "--no-commit-id", "-r", "--name-status", "--no-renames", "-z", parent, sha)
    fields = out.split("\x00")
    return [(fields[i][:1], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


def judge(
    sha: str, parent: str, date: str, subject: str, changes: Sequence[tuple[str, str]], max_sources: int
) -> Candidate | Skipped:
    """A commit's changed files -> a candidate, or the reason it is none."""
    tests: list[str] = []
    deleted: list[str] = []
    sources: list[str] = []
    ignored: list[str] = []
    compiled: list[str] = []
    for status, path in changes:
        kind = classify(path)
        if kind is Kind.TEST:
            (deleted if status == "D" else tests).append(path)
        elif kind is Kind.SOURCE:
            sources.append(path)
        elif kind is Kind.COMPILED:
            compiled.append(path)
        else:
            ignored.append(path)
    if compiled:
        return Skipped(sha, subject, Reason.COMPILED, ", ".join(compiled))
    if not any(is_test_module(p) for p in tests):
        return Skipped(sha, subject, Reason.NO_TEST)
    if not sources:
        return Skipped(sha, subject, Reason.NO_SOURCE)
    if len(sources) > max_sources:
        return Skipped(sha, subject, Reason.TOO_MANY_SOURCES, f"{len(sources)} > {max_sources}")
    return Candidate(sha, parent, date, subject, tuple(tests), tuple(deleted), tuple(sources), tuple(ignored))


@dataclass(frozen=True)
class RunResult:
    """One run of the test command: its exit code, each test id's outcome, the end of its output."""

    returncode: int
    outcomes: dict[str, str]  # test id -> passed | failed | skipped; empty without a JUnit report
    output: str
    collection_error: bool

    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == "passed"}


def prepare_task(
    repo: Path,
    candidate: Candidate,
    workdir: Path,
    *,
    python: str = sys.executable,
    test_command: str | None = None,
    timeout: float = TEST_TIMEOUT,
) -> HistoryTask | Skipped:
    """Verify `candidate` in a throwaway worktree under `workdir` and make its base commit (on
    `hub-eval/base/<sha>` in `repo`), or say why it is no task. `test_command` runs at the repository
    root with the test modules appended (default: pytest under `python`, see history_env); the worktree
    is removed afterwards, whatever happens."""
    started = time.monotonic()
    command = test_command or default_test_command(python, repo)
    short = candidate.sha[:10]
    tree = workdir / "trees" / short
    reports = workdir / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    try:
        git(repo, "worktree", "add", "--detach", "-f", str(tree), candidate.parent)
        base = make_base(tree, candidate)
        before = run_tests(tree, command, candidate.test_modules, reports / f"{short}-parent.xml", timeout)
        git(tree, "checkout", "-q", "-f", "--detach", candidate.sha)
        git(tree, "clean", "-q", "-fdx")
        after = run_tests(tree, command, candidate.test_modules, reports / f"{short}-commit.xml", timeout)
    except subprocess.TimeoutExpired as exc:
        return skip(candidate, Reason.TIMED_OUT, f"after {exc.timeout:.0f} s")
    except GitError as exc:
        return skip(candidate, Reason.GIT_FAILED, str(exc)[-DETAIL_CHARS:])
    finally:
        remove_worktree(repo, tree)
    why = verdict(before, after)
    if why is not None:
        output = after.output if why in {Reason.FAILS_ON_COMMIT, Reason.COLLECTION_ERROR} else before.output
        return skip(candidate, why, output[-DETAIL_CHARS:])
    branch = BASE_BRANCH.format(sha=candidate.sha)
    git(repo, "update-ref", f"refs/heads/{branch}", base)
    turned = sorted(after.passed() - before.passed())
    kept = sorted(after.passed() & before.passed())
    message = git(repo, "log", "-1", "--format=%B", candidate.sha).strip()
    task = HistoryTask(
        id=f"{short[:8]}-{slug(candidate.subject)}",
        sha=candidate.sha,
        parent=candidate.parent,
        requirement=message,
        base=base,
        base_branch=branch,
        acceptance_command=f"{command} {shlex.join(candidate.test_modules)}",
        tests=candidate.tests,
        source_files=candidate.sources,
        fail_to_pass=tuple(turned),
        pass_to_pass=tuple(kept),
        seconds=round(time.monotonic() - started, 1),
    )
    log.debug("history.task", task=task.id, fail_to_pass=len(turned), seconds=task.seconds)
    return task


def skip(candidate: Candidate, reason: Reason, detail: str = "") -> Skipped:
    log.debug("history.skipped", sha=candidate.sha[:10], reason=reason.name)
    return Skipped(candidate.sha, candidate.subject, reason, detail)


def verdict(before: RunResult, after: RunResult) -> Reason | None:
    """Why the runs at the base (`before`) and at the commit (`after`) make no task, or None. A
    collection error at the base counts as failing: a test of a new function cannot import it there."""
    if after.returncode == PYTEST_NO_TESTS:
        return Reason.NO_TESTS_RAN
    if after.returncode != 0:
        return Reason.COLLECTION_ERROR if after.collection_error else Reason.FAILS_ON_COMMIT
    if before.returncode == 0:
        return Reason.PASSES_ON_PARENT
    # A command without a JUnit report (not pytest) is judged on its exit codes alone.
    if after.outcomes and not after.passed() - before.passed():
        return Reason.NOTHING_TURNS
    return None


def make_base(tree: Path, candidate: Candidate) -> str:
    """In `tree` (at the parent): the commit's test files in, its deleted ones out, committed so that
    the same candidate always gives the same sha. The commit's sha."""
    if candidate.tests:
        git(tree, "checkout", candidate.sha, "--", *candidate.tests)
    if candidate.deleted_tests:
        git(tree, "rm", "-q", "--ignore-unmatch", "--", *candidate.deleted_tests)
    env = {**BASE_IDENTITY, "GIT_COMMITTER_NAME": "hub eval", "GIT_COMMITTER_EMAIL": "hub-eval@localhost"}
    env |= {"GIT_AUTHOR_DATE": candidate.date, "GIT_COMMITTER_DATE": candidate.date}
    message = BASE_MESSAGE.format(sha=candidate.sha)
    # No hooks, no signing: the repository's hooks and the user's signing key have no say in a base.
    git(tree, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", message, env=env)
    return git(tree, "rev-parse", "HEAD").strip()


def run_tests(tree: Path, command: str, modules: Sequence[str], report: Path, timeout: float) -> RunResult:
    """`command` on `modules` in `tree`, in a process group of its own killed at `timeout`
    (TimeoutExpired). pytest is asked for a JUnit report through PYTEST_ADDOPTS, which leaves the
    command as the user wrote it and which other test runners ignore."""
    report.unlink(missing_ok=True)
    # xunit1 names each test's file, which the test id needs.
    addopts = (
        f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={shlex.quote(str(report))} -o junit_family=xunit1"
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": addopts.strip()}
    # The repository's tests may start servers or workers: the whole group goes at the clock, and
    # whatever they leave behind goes when the run ends.
    with (
        Child(
            f"{command} {shlex.join(modules)}",
            shell=True,
            cwd=tree,
            env=env,
            stdout=PIPE,
            stderr=subprocess.STDOUT,
        ) as child,
        child.clock(timeout),
    ):
        out, _ = child.proc.communicate()
    if child.timed_out:
        raise subprocess.TimeoutExpired(command, timeout)
    outcomes, collection_error = read_junit(report)
    return RunResult(child.proc.returncode, outcomes, out.decode("utf-8", "replace"), collection_error)


def read_junit(report: Path) -> tuple[dict[str, str], bool]:
    """Each test's outcome in a pytest JUnit report (the worst when a test has two entries, as a test
    whose teardown errs does), and whether a file could not be collected; nothing without a report."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return {}, False
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    outcomes: dict[str, str] = {}
    collection_error = False
    for case in root.iter("testcase"):
        error = case.find("error")
        if error is not None and "collection failure" in (error.get("message") or ""):
            collection_error = True
            continue
        if case.find("failure") is not None or error is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        test = node_id(case)
        if rank[outcome] >= rank[outcomes.get(test, "passed")]:
            outcomes[test] = outcome
    return outcomes, collection_error


def node_id(case: ET.Element) -> str:
    """pytest's node id (`tests/test_x.py::TestC::test_a[1]`) of a JUnit testcase, from its file and
    dotted class name; `classname::name` where the two do not line up."""
    file, classname, name = case.get("file") or "", case.get("classname") or "", case.get("name") or ""
    module = file.removesuffix(".py").replace("/", ".")
    if file and (classname == module or classname.startswith(module + ".")):
        inner = classname[len(module) :].lstrip(".")
        return "::".join(p for p in (file, *inner.split("."), name) if p)
    return f"{classname}::{name}"


def remove_worktree(repo: Path, tree: Path) -> None:
    """The throwaway worktree gone, its folder and git's record of it; a failure is logged, not raised:
    it must not hide the error that brought us here. Its sandbox's view of git goes with it."""
    folders = git_folders(tree)
    try:
        git(repo, "worktree", "remove", "--force", "--force", str(tree))
    except (GitError, subprocess.TimeoutExpired) as exc:
        log.warning("history.worktree_left", tree=str(tree), error=str(exc)[:300])
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True, timeout=GIT_TIMEOUT)
    if folders is not None:
        drop_orphan_views(folders[1])


def slug(subject: str) -> str:
    words = re.findall(r"[a-z0-9]+", subject.lower())
    return "-".join(words)[:SLUG_CHARS].rstrip("-") or "commit"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """git in `repo`, bounded by GIT_TIMEOUT; GitError with its stderr when it fails."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=GIT_TIMEOUT,
        env={**{k: v for k, v in os.environ.items() if k not in GIT_REDIRECTS}, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    if done.returncode:
        raise GitError(f"git {' '.join(args[:3])} in {repo}: {done.stderr.strip()[-DETAIL_CHARS:]}")
    return done.stdout
