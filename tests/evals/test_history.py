"""Tasks from a repository's own history: which commits qualify and why the others do not, the base
commit a task starts from, the tests that turn, and no worktree left behind. A small package's history
is built in tmp_path; its tests run under this interpreter's pytest (no network)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hub.evals.history import (
    BASE_BRANCH,
    Candidate,
    HistoryTask,
    Kind,
    Reason,
    Skipped,
    classify,
    find_candidates,
    prepare_task,
)
from hub.evals.history_env import default_test_command, install_args

from ..conftest import git

PYTEST = f"PYTHONDONTWRITEBYTECODE=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"

CALC = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return x\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
TESTS = "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TESTS_CLAMP = TESTS + (
    "\n\ndef test_clamp_low():\n    from pkg.calc import clamp\n    assert clamp(-5, 0, 10) == 0\n"
    "\n\ndef test_clamp_inside():\n    from pkg.calc import clamp\n    assert clamp(5, 0, 10) == 5\n"
)


def commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A package whose history holds one commit of each kind, newest last here (newest first in git)."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Dev")
    git(repo, "config", "user.email", "dev@example.com")
    shas = {
        "root": commit(
            repo,
            "Start",
            {
                "pkg/__init__.py": "",
                "pkg/calc.py": CALC,
                "pkg/a.py": "A = 1\n",
                "pkg/b.py": "B = 1\n",
                "pkg/c.py": "C = 1\n",
                "tests/test_calc.py": TESTS,
                "README.md": "calc\n",
            },
        ),
        "fix": commit(
            repo,
            "Clamp keeps values in range\n\nclamp() returned its input unchanged.",
            {"pkg/calc.py": CALC_FIXED, "tests/test_calc.py": TESTS_CLAMP, "CHANGELOG.md": "- clamp\n"},
        ),
        "wide": commit(
            repo,
            "Touch four modules",
            {
                "pkg/a.py": "A = 2\n",
                "pkg/b.py": "B = 2\n",
                "pkg/c.py": "C = 2\n",
                "pkg/__init__.py": "# the package\n",
                "tests/test_wide.py": "def test_wide():\n    from pkg.a import A\n    assert A == 2\n",
            },
        ),
        "untested": commit(repo, "Tidy add", {"pkg/calc.py": CALC_FIXED.replace("a + b", "b + a")}),
        "docs": commit(repo, "Document", {"README.md": "calc, documented\n", "docs/conf.py": "x = 1\n"}),
        "already": commit(
            repo,
            "Test add with zero",
            {
                "pkg/a.py": "A = 3\n",
                "tests/test_zero.py": "from pkg.calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
            },
        ),
        "broken": commit(
            repo,
            "Add sub",
            {
                "pkg/b.py": "B = 3\n\n\ndef sub(a, b):\n    return a + b\n",
                "tests/test_sub.py": "from pkg.b import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n",
            },
        ),
    }
    return repo, shas


def worktrees(repo: Path) -> list[str]:
    return [
        line
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_walk_keeps_commits_with_few_sources_and_a_test_and_says_why_not_for_the_rest(tmp_path: Path) -> None:
    repo, sha = history(tmp_path)
    walk = find_candidates(repo)
    assert walk.walked == 7
    assert [c.sha for c in walk.candidates] == [sha["broken"], sha["already"], sha["fix"]]
    reasons = {s.sha: s.reason for s in walk.skipped}
    assert reasons == {
        sha["wide"]: Reason.TOO_MANY_SOURCES,
        sha["untested"]: Reason.NO_TEST,
        sha["docs"]: Reason.NO_TEST,
        sha["root"]: Reason.ROOT,
    }
    fix = walk.candidates[-1]
    assert (fix.tests, fix.sources, fix.ignored) == (
        ("tests/test_calc.py",),
        ("pkg/calc.py",),
        ("CHANGELOG.md",),
    )


def test_walk_takes_the_limit_the_paths_and_the_source_file_count(tmp_path: Path) -> None:
    repo, sha = history(tmp_path)
    assert [c.sha for c in find_candidates(repo, limit=1).candidates] == [sha["broken"]]
    assert [c.sha for c in find_candidates(repo, paths=["pkg/calc.py"]).candidates] == [sha["fix"]]
    assert find_candidates(repo, paths=["pkg/calc.py"]).walked == 3  # root, fix, untested
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    assert find_candidates(repo, since=tomorrow).walked == 0
    wide = [c.sha for c in find_candidates(repo, max_source_files=4).candidates]
    assert sha["wide"] in wide


def test_files_count_as_tests_sources_or_nothing() -> None:
    assert classify("tests/data/sample.json") is Kind.TEST
    assert classify("pkg/tests/helpers.py") is Kind.TEST
    assert classify("conftest.py") is Kind.TEST
    assert classify("pkg/calc_test.py") is Kind.TEST
    assert classify("pkg/calc.py") is Kind.SOURCE
    assert classify("setup.py") is Kind.IGNORED
    assert classify("docs/conf.py") is Kind.IGNORED
    assert classify("pyproject.toml") is Kind.IGNORED
    assert classify("pkg/_speedups.c") is Kind.COMPILED


@dataclass(frozen=True)
class Prepared:
    repo: Path
    sha: dict[str, str]
    task: HistoryTask
    work: Path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    """The qualifying commit made a task once: its tests run twice, the slow part."""
    tmp = tmp_path_factory.mktemp("prepared")
    repo, sha = history(tmp)
    fix = next(c for c in find_candidates(repo).candidates if c.sha == sha["fix"])
    task = prepare_task(repo, fix, tmp / "work", test_command=PYTEST)
    assert isinstance(task, HistoryTask), task
    return Prepared(repo, sha, task, tmp / "work")


def test_a_qualifying_commit_becomes_a_task_on_a_base_of_its_parent_with_its_tests(
    prepared: Prepared,
) -> None:
    repo, sha, task = prepared.repo, prepared.sha, prepared.task
    assert task.requirement == "Clamp keeps values in range\n\nclamp() returned its input unchanged."
    assert task.id == f"{sha['fix'][:8]}-clamp-keeps-values-in-range"
    assert task.fail_to_pass == ("tests/test_calc.py::test_clamp_low",)
    assert task.pass_to_pass == ("tests/test_calc.py::test_add", "tests/test_calc.py::test_clamp_inside")
    assert task.acceptance_command == f"{PYTEST} tests/test_calc.py"
    assert task.source_files == ("pkg/calc.py",)
    assert task.base_branch == BASE_BRANCH.format(sha=sha["fix"])
    assert git(repo, "rev-parse", task.base_branch) == task.base
    assert git(repo, "rev-parse", f"{task.base}^") == sha["root"]
    assert git(repo, "show", f"{task.base}:tests/test_calc.py") + "\n" == TESTS_CLAMP
    assert git(repo, "show", f"{task.base}:pkg/calc.py") + "\n" == CALC
    assert "CHANGELOG.md" not in git(repo, "ls-tree", "--name-only", task.base)
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not any((prepared.work / "trees").iterdir())


def test_the_acceptance_command_fails_at_the_base_and_passes_at_the_commit(
    prepared: Prepared, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(prepared.repo), str(clone))
    for rev, code in ((prepared.task.base, 1), (prepared.sha["fix"], 0)):
        git(clone, "checkout", "-q", "--detach", rev)
        done = subprocess.run(
            prepared.task.acceptance_command, shell=True, cwd=clone, capture_output=True, timeout=120
        )
        assert done.returncode == code, done.stdout


def test_the_same_commit_gives_the_same_base_in_another_clone(prepared: Prepared, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(prepared.repo), str(clone))
    fix = next(c for c in find_candidates(clone).candidates if c.sha == prepared.sha["fix"])
    again = prepare_task(clone, fix, tmp_path / "work", test_command=PYTEST)
    assert isinstance(again, HistoryTask)
    assert again.base == prepared.task.base


def test_commits_whose_tests_do_not_turn_are_skipped_with_the_reason(tmp_path: Path) -> None:
    repo, sha = history(tmp_path)
    found = {c.sha: c for c in find_candidates(repo).candidates}
    already = prepare_task(repo, found[sha["already"]], tmp_path / "work", test_command=PYTEST)
    broken = prepare_task(repo, found[sha["broken"]], tmp_path / "work", test_command=PYTEST)
    assert isinstance(already, Skipped) and already.reason is Reason.PASSES_ON_PARENT
    assert isinstance(broken, Skipped) and broken.reason is Reason.FAILS_ON_COMMIT
    assert "test_sub" in broken.detail
    assert not git(repo, "branch", "--list", "hub-eval/*")
    assert worktrees(repo) == [f"worktree {repo}"]


def test_a_test_file_the_commit_cannot_collect_is_a_collection_error(tmp_path: Path) -> None:
    repo, _ = history(tmp_path)
    bad = commit(
        repo,
        "Half a change",
        {
            "pkg/c.py": "C = 4\n",
            "tests/test_c.py": "from pkg.c import missing\n\n\ndef test_c():\n    pass\n",
        },
    )
    candidate = find_candidates(repo, limit=1).candidates[0]
    assert candidate.sha == bad
    skipped = prepare_task(repo, candidate, tmp_path / "work", test_command=PYTEST)
    assert isinstance(skipped, Skipped) and skipped.reason is Reason.COLLECTION_ERROR


def test_tests_that_outrun_the_clock_are_killed_and_the_commit_skipped(tmp_path: Path) -> None:
    repo, _ = history(tmp_path)
    commit(repo, "Loop", {"pkg/c.py": "def spin():\n    while True:\n        pass\n"})
    commit(
        repo,
        "Do not loop",
        {
            "pkg/c.py": "def spin():\n    return 1\n",
            "tests/test_spin.py": "from pkg.c import spin\n\n\ndef test_spin():\n    assert spin() == 1\n",
        },
    )
    candidate = find_candidates(repo, limit=1).candidates[0]
    # Bounded by the clock under test: at the parent the test never ends.
    skipped = prepare_task(repo, candidate, tmp_path / "work", test_command=PYTEST, timeout=3)
    assert isinstance(skipped, Skipped) and skipped.reason is Reason.TIMED_OUT
    assert worktrees(repo) == [f"worktree {repo}"]


def test_a_deleted_test_file_is_gone_from_the_base(tmp_path: Path) -> None:
    repo, _ = history(tmp_path)
    moved = commit(
        repo,
        "Clamp the other way round, tests moved",
        {
            "pkg/calc.py": CALC_FIXED.replace("max(lo, min(x, hi))", "min(hi, max(x, lo))") + "\nX = 1\n",
            "tests/test_zero.py": None,
            "tests/test_more.py": "from pkg.calc import X\n\n\ndef test_x():\n    assert X == 1\n",
        },
    )
    candidate = find_candidates(repo, limit=1).candidates[0]
    assert (candidate.sha, candidate.deleted_tests) == (moved, ("tests/test_zero.py",))
    task = prepare_task(repo, candidate, tmp_path / "work", test_command=PYTEST)
    assert isinstance(task, HistoryTask), task
    names = git(repo, "ls-tree", "-r", "--name-only", task.base).splitlines()
    assert "tests/test_zero.py" not in names and "tests/test_more.py" in names
    assert task.fail_to_pass == ("tests/test_more.py::test_x",)


def test_a_task_names_its_files_only_when_asked(tmp_path: Path) -> None:
    task = HistoryTask(
        "abc-x", "abc", "def", "Fix it", "base", "hub-eval/base/abc", "pytest t.py", ("t.py",), ("a.py", "b.py"),
        ("t.py::t",), (), 1.0,
    )  # fmt: skip
    assert task.requirements() == ["Fix it"]
    assert task.requirements(name_files=True) == ["Fix it", "The change belongs in a.py, b.py."]
    assert task.files_found(["a.py", "c.py"]) == (1, 2)


def test_the_environment_installs_the_repository_with_its_test_dependencies(tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\n[project.optional-dependencies]\ntests = ["freezegun"]\ndocs = ["sphinx"]\n'
        '[dependency-groups]\ntest = ["hypothesis"]\n',
        encoding="utf-8",
    )
    (repo / "requirements-dev.txt").write_text("coverage\n", encoding="utf-8")
    (repo / "requirements-docs.txt").write_text("sphinx\n", encoding="utf-8")
    assert install_args(repo) == [
        f"{repo}[tests]",
        "--group",
        f"{repo / 'pyproject.toml'}:test",
        "-r",
        str(repo / "requirements-dev.txt"),
        "pytest",
    ]
    assert default_test_command("/v/bin/python", repo) == (
        "PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=src /v/bin/python -m pytest -q -p no:cacheprovider"
    )


def test_a_candidate_of_a_flat_layout_gets_no_pythonpath(tmp_path: Path) -> None:
    assert "PYTHONPATH" not in default_test_command("python", tmp_path)
    assert Candidate(
        "a", "b", "d", "s", ("tests/conftest.py", "tests/test_a.py"), (), (), ()
    ).test_modules == ("tests/test_a.py",)
