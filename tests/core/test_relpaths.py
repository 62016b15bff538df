"""hub.core.relpaths: one spelling of a repository-relative path, and one glob test."""

from __future__ import annotations

import pytest

from hub.core.relpaths import clean_path, is_glob, path_parts


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("src/a.py", "src/a.py"),
        ("./src//a.py", "src/a.py"),
        (".\\src\\./a.py", "src/a.py"),
        ("./", ""),
        (".", ""),
    ],
)
def test_a_path_is_read_with_backslashes_as_slashes_and_without_empty_or_dot_parts(
    raw: str, clean: str
) -> None:
    assert clean_path(raw) == clean


def test_path_parts_split_on_slashes_only() -> None:
    assert path_parts("./src//a.py/") == ["src", "a.py"]
    assert path_parts("src\\a.py") == ["src\\a.py"]


@pytest.mark.parametrize(
    ("entry", "glob"), [("src/*.py", True), ("a?.py", True), ("[ab].py", True), ("src/a.py", False)]
)
def test_an_entry_with_a_glob_character_is_a_glob(entry: str, glob: bool) -> None:
    assert is_glob(entry) is glob
