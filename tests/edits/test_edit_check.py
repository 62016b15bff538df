"""hub.edits.check.judge: what a planned file may not become, decided before anything is written."""

from __future__ import annotations

import pytest

from hub.edits.check import is_elision, judge

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def test_a_sound_whole_file_change_passes() -> None:
    assert judge("calc.py", CALC, CALC.replace("a - b", "b - a"), whole_file=True) is None


@pytest.mark.parametrize("after", ["", "\n", "   \n\n"])
def test_emptying_a_non_empty_file_is_refused(after: str) -> None:
    why = judge("calc.py", CALC, after, whole_file=True)
    assert why is not None and "empty" in why and "erase" in why


def test_an_empty_new_file_is_allowed() -> None:
    assert judge("pkg/__init__.py", None, "", whole_file=True) is None


def test_a_change_that_breaks_a_parse_that_held_is_refused_naming_the_line() -> None:
    why = judge("calc.py", CALC, CALC.replace("def sub(a, b):", "def sub(a, b)"), whole_file=False)
    assert why is not None and "would not parse" in why and "line 5" in why


def test_a_file_that_did_not_parse_before_is_not_held_to_parsing() -> None:
    broken = CALC.replace("def sub(a, b):", "def sub(a, b)")
    assert judge("calc.py", broken, broken + "\nx = (\n", whole_file=False) is None


def test_a_whole_file_that_deletes_more_than_it_adds_is_refused_as_an_excerpt() -> None:
    why = judge("calc.py", CALC, "    return b - a\n", whole_file=False)
    assert why is not None and "would not parse" in why and "indent" in why
    why = judge("notes.txt", "a\nb\nc\nd\n", "a\nx\n", whole_file=True)
    assert why is not None and "deletes 3 lines and adds 1" in why
    # A deletion on purpose is possible too: the reason says how to send one.
    assert "empty REPLACE" in why


def test_a_search_replace_deletion_is_what_was_asked_and_passes() -> None:
    assert judge("notes.txt", "a\nb\nc\nd\n", "a\n", whole_file=False) is None


def test_delete_allowed_lifts_the_destructive_rule() -> None:
    assert judge("notes.txt", "a\nb\nc\nd\n", "a\nx\n", whole_file=True, delete_allowed=True) is None


@pytest.mark.parametrize(
    "placeholder",
    [
        "# ... rest of the class unchanged ...",
        "// ... existing code ...",
        "[original content here]",
        "...",
        "    # rest of the code remains the same",
        "<!-- rest of the page unchanged -->",
        "...the whole file...",
    ],
)
def test_a_new_elision_placeholder_is_refused(placeholder: str) -> None:
    why = judge("notes.txt", "a\nb\n", f"a\nb\n{placeholder}\nc\n", whole_file=False)
    assert why is not None and "placeholder" in why and placeholder.strip() in why


def test_a_placeholder_the_original_already_had_is_kept() -> None:
    text = "a = 1\n# ... existing code ...\n"
    assert judge("p.txt", text, text.replace("1", "2"), whole_file=True) is None
    assert judge("p.txt", text, text + "# ... existing code ...\n", whole_file=False) is not None


def test_a_python_stub_body_is_not_an_elision() -> None:
    stub = "class P(Protocol):\n    def f(self) -> int:\n        ...\n"
    assert judge("p.py", stub, stub + "\n    def g(self) -> str:\n        ...\n", whole_file=False) is None
    assert judge("p.py", stub, stub + "\n...\n", whole_file=False) is not None


@pytest.mark.parametrize(
    "line",
    [
        "# keep the cache warm",
        "# skip existing files",
        "x = ...  # TODO",
        "# Loop over items...",
        "# parse the rest of the arguments",
        "# 'y' is the same as 'b', for compatibility",
    ],
)
def test_ordinary_comments_are_not_elisions(line: str) -> None:
    assert not is_elision(line)


@pytest.mark.parametrize(
    "marker", ["<<<<<<< SEARCH>", ">>> REPLACE", "=======", "+++ b/calc.py", "@@ -1,2 +1,2 @@", "```python"]
)
def test_a_stray_edit_marker_or_fence_is_refused_in_code(marker: str) -> None:
    why = judge("notes.cfg", "a = 1\n", f"a = 1\n{marker}\nb = 2\n", whole_file=False)
    assert why is not None and "marker" in why


def test_fences_and_underlines_are_content_in_a_markdown_file() -> None:
    readme = "Title\n=====\n\ntext\n"
    assert judge("README.md", readme, readme + "\n```python\nx = 1\n```\n", whole_file=True) is None


def test_line_numbers_on_every_line_are_refused() -> None:
    numbered = "1: name: demo\n2: port: 9090\n3: debug: false\n"
    why = judge("config.yaml", "name: demo\nport: 8080\ndebug: false\n", numbered, whole_file=True)
    assert why is not None and "line number" in why


def test_whole_file_content_that_leaves_out_a_definition_is_refused() -> None:
    shorter = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef div(a, b):\n    return a / b\n"
    why = judge("calc.py", CALC, shorter, whole_file=True)
    assert why is not None and "leaves out sub" in why and "SEARCH/REPLACE" in why
    assert judge("calc.py", CALC, shorter, whole_file=False) is None


def test_a_fenced_example_in_a_docstring_is_content_in_code_with_a_grammar() -> None:
    new = (
        CALC
        + '\n\ndef mul(a, b):\n    """Multiply.\n\n    ```python\n    mul(2, 3)\n    ```\n    """\n    return a * b\n'
    )
    assert judge("calc.py", CALC, new, whole_file=True) is None


def test_a_renamed_definition_keeps_its_body_and_passes() -> None:
    renamed = CALC.replace("def sub(", "def subtract(")
    assert judge("calc.py", CALC, renamed, whole_file=True) is None
