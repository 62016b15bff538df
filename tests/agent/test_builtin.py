"""The built-in tools on a real git repository: what they show, what they hide, and that every write goes
through edit mode's policy and pre-write check."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hub.agent.builtin import ToolRefused, Workspace
from hub.edits.policy import Policy

APP = 'def greet(name):\n    return "hello " + name\n\n\nclass Greeter:\n    def hi(self):\n        return "hi"\n'


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    files = {
        "src/app.py": APP,
        "src/util.py": "def helper():\n    return 42  # the answer\n",
        "docs/guide.md": "# Guide\nCall greet() to say hello.\n",
        "hub.yaml": "project: demo\n",
        "prompts/implementer.md": "secret instructions\n",
        ".gitignore": ".env\n",
        "data.bin": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "data.bin").write_bytes(b"\x00\x01hello\x00")
    (root / ".env").write_text("TOKEN=abc\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return root


def workspace(
    repo: Path, allowed: tuple[str, ...] = ("src/app.py",), max_files: int | None = None
) -> Workspace:
    return Workspace(root=repo, policy=Policy(repo_root=repo, allowed_paths=allowed, max_files=max_files))


def test_read_file_numbers_the_lines_and_reads_a_range(repo: Path) -> None:
    ws = workspace(repo)

    whole = ws.read_file({"path": "src/app.py"})
    part = ws.read_file({"path": "src/app.py", "start_line": 5, "end_line": 6})

    assert whole.startswith("src/app.py (lines 1-7 of 7):\n1| def greet(name):\n2|     return")
    assert (
        part
        == "src/app.py (lines 5-6 of 7):\n5| class Greeter:\n6|     def hi(self):\n(lines 5-6 of 7: read_file with start_line=7 for more)"
    )


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("hub.yaml", "not shown"),
        ("prompts/implementer.md", "not shown"),
        (".git/HEAD", "not shown"),
        (".env", "no such file"),
        ("../outside.txt", "may not leave the repository"),
        ("/etc/passwd", "relative to the repository root"),
        ("src", "is a folder"),
        ("data.bin", "binary"),
    ],
)
def test_reads_refuse_control_files_ignored_files_and_anything_outside(
    repo: Path, path: str, why: str
) -> None:
    (repo.parent / "outside.txt").write_text("private\n", encoding="utf-8")

    with pytest.raises(ToolRefused, match=why):
        workspace(repo).read_file({"path": path})


def test_a_link_is_never_followed_out_of_the_repository(repo: Path) -> None:
    (repo.parent / "outside.txt").write_text("private\n", encoding="utf-8")
    os.symlink(repo.parent / "outside.txt", repo / "src" / "link.py")

    with pytest.raises(ToolRefused, match="links are never followed"):
        workspace(repo).read_file({"path": "src/link.py"})


def test_list_files_shows_the_task_files_without_the_hubs_own(repo: Path) -> None:
    ws = workspace(repo)

    listing = ws.list_files({}).splitlines()
    python = ws.list_files({"pattern": "*.py"}).splitlines()
    under = ws.list_files({"path": "docs"}).splitlines()

    assert "src/app.py" in listing and "docs/guide.md" in listing
    assert not any(n.startswith(("hub.yaml", "prompts/", ".git/", ".env")) for n in listing)
    assert python == ["src/app.py", "src/util.py"]
    assert under == ["docs/guide.md"]


def test_search_finds_names_and_text_and_skips_binaries_and_control_files(repo: Path) -> None:
    ws = workspace(repo)

    found = ws.search({"text": "HELLO"}).splitlines()
    named = ws.search({"text": "util"}).splitlines()

    assert 'src/app.py:2: return "hello " + name' in found
    assert "docs/guide.md:2: Call greet() to say hello." in found
    assert not any("data.bin" in line for line in found)
    assert "src/util.py (name)" in named
    assert "was found in no file" in ws.search({"text": "secret instructions"})


def test_outline_lists_functions_and_classes_with_lines(repo: Path) -> None:
    shown = workspace(repo).outline({"path": "src/app.py"})

    assert "greet (L1-L2)" in shown and "class Greeter (L5-L7)" in shown


def test_write_and_edit_go_through_the_policy_and_the_pre_write_check(repo: Path) -> None:
    ws = workspace(repo)

    refused = ws.write_file({"path": "src/util.py", "content": "x = 1\n"})
    control = ws.write_file({"path": "hub.yaml", "content": "judge: {}\n"})
    broken = ws.write_file({"path": "src/app.py", "content": "def greet(name:\n"})
    elided = ws.write_file(
        {"path": "src/app.py", "content": "def greet(name):\n    # ... rest unchanged ...\n"}
    )
    missed = ws.edit_file({"path": "src/app.py", "search": "def greeet(nam):\n", "replace": "x\n"})
    done = ws.edit_file(
        {
            "path": "src/app.py",
            "search": '    return "hello " + name\n',
            "replace": '    return "hello, " + name\n',
        }
    )

    assert "not inside allowed_paths" in refused
    assert "control file 'hub.yaml'" in control
    assert refused.startswith("refused, nothing written") and broken.startswith("refused, nothing written")
    assert elided.startswith("refused, nothing written")
    assert "did not match" in missed and "def greet(name):" in missed
    assert done == "src/app.py written (+1 -1 lines)"
    assert (repo / "src/app.py").read_text(encoding="utf-8") == APP.replace('"hello "', '"hello, "')
    assert (repo / "src/util.py").read_text(encoding="utf-8").startswith("def helper")
    assert (repo / "hub.yaml").read_text(encoding="utf-8") == "project: demo\n"
    assert ws.written == ["src/app.py"] and ws.version == 1


def test_a_change_may_write_no_more_files_than_the_limit(repo: Path) -> None:
    ws = workspace(repo, allowed=("src",), max_files=1)
    ws.write_file({"path": "src/new.py", "content": "x = 1\n"})

    with pytest.raises(ToolRefused, match=r"limits\.max_changed_files"):
        ws.write_file({"path": "src/other.py", "content": "y = 2\n"})
    assert ws.write_file({"path": "src/new.py", "content": "x = 2\n"}).startswith("src/new.py written")


def test_a_new_file_the_agent_wrote_can_be_read_back(repo: Path) -> None:
    ws = workspace(repo, allowed=("src",))
    ws.write_file({"path": "src/new.py", "content": "x = 1\n"})

    assert "1| x = 1" in ws.read_file({"path": "src/new.py"})


def test_every_tool_has_a_json_schema_of_an_object_and_done_comes_last(repo: Path) -> None:
    tools = workspace(repo).tools()

    assert all(
        t.parameters["type"] == "object" and set(t.parameters["required"]) <= set(t.parameters["properties"])
        for t in tools
    )
    assert tools[-1].name == "done"
    assert tools[0].spec()["function"]["name"] == "read_file"


def test_a_folder_link_a_command_left_is_never_read_through(repo: Path) -> None:
    # An acceptance command may leave `src/leak -> ~/.ssh`-like links in the worktree: git lists the
    # link, never what lies behind it, and neither do the tools.
    secrets = repo.parent / "secrets"
    secrets.mkdir()
    (secrets / "id_rsa").write_text("PRIVATE KEY\n", encoding="utf-8")
    os.symlink(secrets, repo / "src" / "leak")
    ws = workspace(repo)

    with pytest.raises(ToolRefused):
        ws.read_file({"path": "src/leak/id_rsa"})
    assert "PRIVATE KEY" not in ws.search({"text": "PRIVATE"})
    assert "id_rsa" not in ws.list_files({})


def test_edit_blocks_in_a_reply_count_against_the_same_files_limit(repo: Path) -> None:
    ws = workspace(repo, allowed=("src",), max_files=1)
    ws.write_file({"path": "src/new.py", "content": "x = 1\n"})

    told = ws.answer("src/other.py\n```python\ny = 2\n```\n")
    again = ws.answer("src/new.py\n```python\nx = 3\n```\n")

    assert told is not None and "limits.max_changed_files" in told and not (repo / "src/other.py").exists()
    assert again is not None and "Written from your answer: src/new.py" in again


def test_a_whole_file_without_its_last_newline_keeps_the_files_own_ending(repo: Path) -> None:
    # The real 1.5B's write_file of a two-line stub: JSON content seldom ends in a newline, and the
    # missing one once counted as a deleted line, refusing the right answer as "an excerpt".
    (repo / "src/stub.py").write_text("def is_isogram(phrase):\n    pass\n", encoding="utf-8")
    (repo / "src/bare.py").write_text("x = 1", encoding="utf-8")
    ws = workspace(repo, allowed=("src",))
    body = "def is_isogram(phrase):\n    return len(set(phrase)) == len(phrase)"

    assert ws.write_file({"path": "src/stub.py", "content": body}) == "src/stub.py written (+1 -1 lines)"
    ws.write_file({"path": "src/bare.py", "content": "x = 2"})
    ws.write_file({"path": "src/new.py", "content": "y = 3"})

    assert (repo / "src/stub.py").read_text(encoding="utf-8") == body + "\n"
    assert (repo / "src/bare.py").read_text(encoding="utf-8") == "x = 2"
    assert (repo / "src/new.py").read_text(encoding="utf-8") == "y = 3\n"
