"""The sandbox's own git object store (hub.safety.git_objects): built once from HEAD's tree, extended by
what each checkpoint adds, built anew when HEAD is no longer a descendant of what it holds, and removed
with its worktree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hub.repo import gitops
from hub.repo.sandbox_views import SANDBOX_VIEWS
from hub.safety.git_objects import task_objects
from hub.safety.git_view import git_folders


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "T")
    _git(repo, "config", "user.email", "t@example.invalid")
    (repo / "a.py").write_text("a = 1\n", encoding="utf-8")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "a.py").write_text("a = 2\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "two")
    return repo


def _store(worktree: Path) -> Path:
    folders = git_folders(worktree)
    assert folders is not None
    gitdir, common = folders
    objects, _ = task_objects(worktree, common, gitdir, common / SANDBOX_VIEWS / gitdir.name)
    return objects


def _holds(repo: Path, objects: Path, oid: str) -> bool:
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(objects), "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""}
    return (
        subprocess.run(["git", "cat-file", "-e", oid], cwd=repo, env=env, capture_output=True).returncode == 0
    )


def _commit(tree: Path, name: str, text: str) -> str:
    (tree / name).write_text(text, encoding="utf-8")
    _git(tree, "add", name)
    _git(tree, "commit", "-q", "-m", f"write {name}")
    return _git(tree, "rev-parse", "HEAD")


def test_the_store_holds_heads_tree_and_then_each_checkpoint_adds_one_pack_of_what_it_added(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    first = _git(repo, "rev-parse", "HEAD~1")
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))

    objects = _store(worktree)

    assert len(list((objects / "pack").glob("*.pack"))) == 1
    assert _holds(repo, objects, "HEAD") and _holds(repo, objects, "HEAD:a.py")
    assert not _holds(repo, objects, first)  # history before the base stays out: the store is shallow
    assert (objects.parent / "shallow").read_text(encoding="utf-8").split() == [
        _git(repo, "rev-parse", "HEAD")
    ]
    commit = _commit(worktree, "b.py", "b = 1\n")

    assert _store(worktree) == objects
    packs = list((objects / "pack").glob("*.pack"))
    assert len(packs) == 2
    assert _holds(repo, objects, commit) and _holds(repo, objects, f"{commit}:b.py")
    newest = max(packs, key=lambda p: p.stat().st_mtime_ns)
    listed = _git(repo, "verify-pack", "-v", str(newest.with_suffix(".idx")))
    assert "non delta: 3 objects" in listed  # the commit, its root tree, the new blob: nothing else
    # Unchanged: nothing more is packed.
    _store(worktree)
    assert len(list((objects / "pack").glob("*.pack"))) == 2


def test_a_worktree_that_takes_a_removed_ones_name_never_sees_its_objects(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    _store(worktree)
    secret = _commit(worktree, "secret.txt", "the first task's work\n")
    blob = _git(worktree, "rev-parse", "HEAD:secret.txt")
    assert _holds(repo, _store(worktree), blob)
    # Removed by hand (the store left behind), and a new task's worktree under the same name.
    _git(repo, "worktree", "remove", "--force", str(worktree))
    _git(repo, "worktree", "add", "-q", "-b", "hub/t2", str(worktree), "main")

    objects = _store(worktree)

    assert not _holds(repo, objects, secret) and not _holds(repo, objects, blob)
    assert _holds(repo, objects, "main")


def test_a_head_reset_to_before_the_store_builds_it_anew_from_head(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    _store(worktree)
    _git(worktree, "reset", "-q", "--hard", "HEAD~1")

    objects = _store(worktree)

    assert _holds(worktree, objects, "HEAD") and not _holds(worktree, objects, "main")
    assert len(list((objects / "pack").glob("*.pack"))) == 1


def test_removing_a_worktree_removes_its_store_and_leaves_the_others(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    trees = [repo / ".git" / "hub-worktrees" / name for name in ("t1", "t2")]
    for number, tree in enumerate(trees):
        _git(repo, "worktree", "add", "-q", "-b", f"hub/t{number}", str(tree))
        _store(tree)
    views = repo / ".git" / SANDBOX_VIEWS
    assert sorted(p.name for p in views.iterdir()) == ["t1", "t2"]

    gitops.remove_worktree(gitops.open_repo(repo), trees[0])

    assert sorted(p.name for p in views.iterdir()) == ["t2"]


def test_a_store_that_cannot_be_built_anew_holds_nothing_of_the_worktree_that_had_its_name(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    _store(worktree)
    blob = _git(worktree, "rev-parse", f"{_commit(worktree, 'secret.txt', 'the first task')}:secret.txt")
    assert _holds(repo, _store(worktree), blob)
    _git(repo, "worktree", "remove", "--force", str(worktree))
    _git(repo, "worktree", "add", "-q", "-b", "hub/t2", str(worktree), "main")
    # The user's repository lost an object HEAD's tree needs: the store cannot be built.
    lost = _git(repo, "rev-parse", "main:a.py")
    (repo / ".git" / "objects" / lost[:2] / lost[2:]).unlink()

    objects = _store(worktree)

    assert not _holds(repo, objects, blob)
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(objects), "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""}
    listed = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reachable = {
        line.split()[0]
        for line in _git(repo, "rev-list", "--objects", "--missing=allow-any", "main").splitlines()
    }
    assert set(listed) <= reachable


def test_a_staged_file_named_like_a_status_line_puts_no_other_refs_objects_in_the_store(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    _git(repo, "checkout", "-q", "-b", "private")
    secret = _commit(repo, "secret.txt", "on a branch of the user's own\n")
    _git(repo, "checkout", "-q", "main")
    # `--all` as the fourth word of a name that starts like diff-index's status line.
    name = ":a b c --all"
    extended, built = (repo / ".git" / "hub-worktrees" / task for task in ("t1", "t2"))
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(extended))
    _store(extended)
    for tree in (extended, built):  # the store extended by the staged file, then built with it
        if not tree.exists():
            _git(repo, "worktree", "add", "-q", "-b", "hub/t2", str(tree))
        (tree / name).write_text("staged, not committed\n", encoding="utf-8")
        _git(tree, "--literal-pathspecs", "add", "--", name)

        objects = _store(tree)

        assert _holds(
            repo, objects, _git(tree, "--literal-pathspecs", "ls-files", "-s", "--", name).split()[1]
        )
        assert not _holds(repo, objects, secret) and not _holds(repo, objects, f"{secret}:secret.txt")


def test_a_store_that_cannot_be_written_is_left_as_it_is_without_an_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    own = repo / ".git" / SANDBOX_VIEWS / "t1"
    own.mkdir(parents=True)
    (own / "objects").write_text("a file where the store's folder goes\n", encoding="utf-8")

    objects = _store(worktree)

    assert objects.is_file() and not (own / "shallow").exists()


def test_a_rebuild_removes_the_old_stores_a_killed_rebuild_left(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worktree = repo / ".git" / "hub-worktrees" / "t1"
    _git(repo, "worktree", "add", "-q", "-b", "hub/t1", str(worktree))
    objects = _store(worktree)
    left = objects.parent / "objects.old-999999999"
    (left / "pack").mkdir(parents=True)
    (left / "pack" / "pack-old.pack").write_bytes(b"PACK")
    _git(worktree, "reset", "-q", "--hard", "HEAD~1")

    _store(worktree)

    assert list(objects.parent.glob("objects.old-*")) == []
