"""Issue 28, point 1 and 11: the sandbox hides by default. Run against a checkout outside /tmp in a home
folder full of planted secrets (conftest.py), as a user's real `~/src/proj` is."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.faces.doctor import check_sandbox
from hub.phases.acceptance import jail_for, run_command

PY = shlex.quote(sys.executable)


def worktree_of(ground: Any) -> Path:
    """A task's worktree beside the checkout, as setup-task makes one (its .git a file into the checkout's)."""
    worktree = ground.root / "worktrees" / "t1"
    subprocess.run(
        ["git", "worktree", "add", "-q", "-b", "task/t1", str(worktree)], cwd=ground.checkout, check=True
    )
    return worktree


def test_model_code_reads_nothing_of_the_home_folder_or_the_users_checkout(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    worktree = worktree_of(ground)
    jail = jail_for(load_config(ground.checkout), worktree)
    # Every planted file by name, then anything at all under the home folder and the checkout.
    command = (
        f"cd {ground.home} && cat .gitconfig .config/pip/pip.conf .ollama/id_ed25519 .bash_history "
        f".config/anthropic/api_key .env.global .ssh/id_rsa .netrc .config/someapp/settings.json; "
        f"cat {ground.checkout}/.env; grep -r PLANTED {ground.home} {ground.checkout} 2>/dev/null; "
        f"ls -a {ground.home} {ground.checkout}; echo DONE"
    )

    result = run_command(command, worktree, 60, jail)

    assert "DONE" in result.stdout, result.stderr
    assert leaks(result.stdout + result.stderr) == []
    assert ".bash_history" not in result.stdout and "settings.cfg" not in result.stdout


def test_the_worktree_is_writable_and_the_toolchain_under_home_runs(ground: Any) -> None:
    worktree = worktree_of(ground)
    jail = jail_for(load_config(ground.checkout), worktree)
    command = f"mytool && {PY} -c 'print(40 + 2)' && git log --oneline -1 && echo ok > new.txt; touch {ground.tool}/x"

    result = run_command(command, worktree, 60, jail)

    assert "TOOL-RAN" in result.stdout and "42" in result.stdout and "initial" in result.stdout, result.stderr
    assert (worktree / "new.txt").read_text(encoding="utf-8") == "ok\n"
    assert not (ground.tool / "x").exists()  # the toolchain is read-only


def test_read_paths_from_hub_yaml_are_readable_and_nothing_beside_them(ground: Any) -> None:
    data = ground.home / "datasets"
    data.mkdir()
    (data / "rows.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  read_paths: [{data}]\n", encoding="utf-8"
    )
    worktree = worktree_of(ground)
    jail = jail_for(load_config(ground.checkout), worktree)

    result = run_command(f"cat {data}/rows.csv; touch {data}/w; cat {ground.home}/.netrc", worktree, 60, jail)

    assert "1,2" in result.stdout
    assert not (data / "w").exists()
    assert "PLANTED" not in result.stdout


def test_a_socket_file_under_the_home_folder_is_unreachable(ground: Any) -> None:
    # A user daemon's socket in a folder the command may read (here a read path): reachable through a
    # read-only mount and outside the network namespace, unless covered.
    run = ground.home / "run"
    run.mkdir()
    path = run / "agent.sock"
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  read_paths: [{run}]\n", encoding="utf-8"
    )
    worktree = worktree_of(ground)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        jail = jail_for(load_config(ground.checkout), worktree)
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r}); print('CONNECTED')"

        result = run_command(f"{PY} -c {shlex.quote(code)}", worktree, 60, jail)

    assert "CONNECTED" not in result.stdout
    assert result.exit_code != 0


def test_hub_doctor_prints_what_a_command_can_see(ground: Any) -> None:
    data = ground.home / "datasets"
    data.mkdir()
    (ground.checkout / "hub.yaml").write_text(
        f"project: p\nsandbox:\n  read_paths: [{data}]\n", encoding="utf-8"
    )

    check = check_sandbox(load_config(ground.checkout))

    assert check.ok
    assert str(data) in check.detail and str(ground.tool) in check.detail and "/usr" in check.detail
    assert f"{ground.home}," not in check.detail and f"{ground.home};" not in check.detail
    assert "nothing else of the home folder" in check.detail
