"""The hub's own commits never fail for want of a git identity (issue 36): the user's name and email
where git has them, the hub's own for what it lacks. The trap is made as a fresh home folder makes it:
no system config, a global config that holds no identity and forbids git to guess one (as
`user.useConfigOnly` does, so the test does not depend on the machine's host name)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hub.repo import gitops, identity

Git = Callable[..., str]


@pytest.fixture
def no_identity(git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_git: Git) -> Path:
    """The repository with no identity anywhere git looks; its path."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "gitconfig").write_text("[user]\n\tuseConfigOnly = true\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    for name in ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    run_git(git_repo, "config", "--unset", "user.name")
    run_git(git_repo, "config", "--unset", "user.email")
    return git_repo


def test_without_an_identity_git_itself_refuses_to_commit(no_identity: Path) -> None:
    import subprocess

    (no_identity / "src" / "app.py").write_text("changed\n", encoding="utf-8")
    done = subprocess.run(
        ["git", "commit", "-qam", "x"], cwd=no_identity, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "tell me who you are" in done.stderr.lower()


def test_a_checkpoint_without_an_identity_commits_as_the_hub(no_identity: Path, run_git: Git) -> None:
    (no_identity / "src" / "app.py").write_text("changed\n", encoding="utf-8")

    sha = gitops.checkpoint(gitops.open_repo(no_identity), "checkpoint")

    assert sha is not None
    assert run_git(no_identity, "log", "-1", "--format=%an <%ae> / %cn <%ce>") == (
        "agent-hub <agent-hub@localhost> / agent-hub <agent-hub@localhost>"
    )


def test_the_users_name_is_kept_and_only_the_missing_email_is_the_hubs(
    no_identity: Path, run_git: Git
) -> None:
    run_git(no_identity, "config", "user.name", "Ada Lovelace")

    found = identity.resolved(no_identity)
    (no_identity / "src" / "app.py").write_text("changed\n", encoding="utf-8")
    gitops.checkpoint(gitops.open_repo(no_identity), "checkpoint")

    assert (found.name, found.email, found.name_set, found.email_set) == (
        "Ada Lovelace",
        "agent-hub@localhost",
        True,
        False,
    )
    assert run_git(no_identity, "log", "-1", "--format=%an <%ae>") == "Ada Lovelace <agent-hub@localhost>"


def test_a_configured_identity_is_the_users_own(git_repo: Path, run_git: Git) -> None:
    (git_repo / "src" / "app.py").write_text("changed\n", encoding="utf-8")

    gitops.checkpoint(gitops.open_repo(git_repo), "checkpoint")

    assert identity.resolved(git_repo).complete
    assert run_git(git_repo, "log", "-1", "--format=%an <%ae>") == "Hub Test <hub-test@example.invalid>"


def test_a_stash_and_a_merge_commit_without_an_identity_are_made(no_identity: Path, run_git: Git) -> None:
    repo = gitops.open_repo(no_identity)
    run_git(no_identity, "branch", "side")
    run_git(no_identity, "worktree", "add", "-q", str(no_identity.parent / "side"), "side")
    (no_identity.parent / "side" / "src" / "app.py").write_text("side\n", encoding="utf-8")
    side = gitops.open_repo(no_identity.parent / "side")
    gitops.checkpoint(side, "on the side")
    (no_identity.parent / "side" / "new.txt").write_text("left over\n", encoding="utf-8")

    stashed = gitops.stash(side, "task/attempt-1-stalled")
    merge = gitops.merge_without_checkout(repo, "side", "main", "merge main into side")

    assert stashed is not None and run_git(no_identity, "log", "-1", "--format=%an", stashed) == "agent-hub"
    assert run_git(no_identity, "log", "-1", "--format=%an <%ae>", merge) == "agent-hub <agent-hub@localhost>"
