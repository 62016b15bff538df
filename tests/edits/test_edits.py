"""hub.edits: parsing model answers, matching search/replace blocks, and the policy-guarded writer."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hub.edits.apply import apply_edits, plan_edits
from hub.edits.edit import FileEdit, SearchReplace
from hub.edits.feedback import blocks_failed
from hub.edits.match import apply_blocks, unified_diff
from hub.edits.parse import NO_EDIT, ends_inside, parse_edits
from hub.edits.policy import Policy, path_allowed

CODE = "def main():\n    return 1\n"


def fence(body: str, info: str = "python") -> str:
    body = body if not body or body.endswith("\n") else body + "\n"
    return f"```{info}\n{body}```\n"


def render_edit(edit: FileEdit) -> str:
    """An edit in the format `parse_edits` reads (whole file or search/replace): the oracle of the round trips."""
    if edit.delete:
        return f"DELETE: {edit.path}\n"
    parts = [edit.path]
    if edit.content is not None:
        longest = max((len(m) for m in re.findall(r"^[ \t]*(`{3,})", edit.content, re.MULTILINE)), default=2)
        outer = "`" * max(3, longest + 1)
        body = edit.content if not edit.content or edit.content.endswith("\n") else edit.content + "\n"
        parts.append(f"{outer}\n{body}{outer}")
    for block in edit.blocks:
        parts.append(f"<<<<<<< SEARCH\n{block.search}=======\n{block.replace}>>>>>>> REPLACE")
    return "\n".join(parts) + "\n"


def only_edit(text: str, default_path: str | None = None) -> FileEdit:
    result = parse_edits(text, default_path)
    assert len(result.edits) == 1, result
    return result.edits[0]


# ------------------------------------------------------------------------------------ whole-file parsing


@pytest.mark.parametrize(
    "path_line",
    [
        "src/app.py",
        "**src/app.py**",
        "`src/app.py`",
        "File: src/app.py",
        "file: `src/app.py`",
        "### src/app.py",
        "## File: `src/app.py`",
        "**`src/app.py`**:",
        "- `src/app.py`:",
        "1. src/app.py",
        "src/app.py (new file)",
        "Here is the updated `src/app.py`:",
        "Updated src/app.py:",
        "./src/app.py",
    ],
)
def test_a_decorated_path_line_before_a_fence_makes_a_whole_file_edit(path_line: str) -> None:
    edit = only_edit(f"{path_line}\n{fence(CODE)}")
    assert edit == FileEdit("src/app.py", content=CODE)


@pytest.mark.parametrize(
    "info",
    [
        "python src/app.py",
        "src/app.py",
        "python:src/app.py",
        'python title="src/app.py"',
        "py file=src/app.py",
    ],
)
def test_the_path_may_sit_in_the_fence_info_string(info: str) -> None:
    assert only_edit(fence(CODE, info)) == FileEdit("src/app.py", content=CODE)


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ("# file: src/app.py", "src/app.py"),
        ("// file: web/app.js", "web/app.js"),
        ("# File: src/app.py", "src/app.py"),
        ("/* filename: src/app.c */", "src/app.c"),
        ("<!-- file: docs/index.html -->", "docs/index.html"),
    ],
)
def test_a_file_header_on_the_first_line_names_the_file_and_is_removed(header: str, path: str) -> None:
    assert only_edit(fence(f"{header}\n{CODE}", "")) == FileEdit(path, content=CODE)


def test_the_block_header_wins_over_the_info_string_and_the_line_before() -> None:
    text = "other/one.py\n" + fence(f"# file: src/app.py\n{CODE}", "python other/two.py")
    assert only_edit(text).path == "src/app.py"


def test_tilde_fences_and_long_fences_are_accepted() -> None:
    assert only_edit(f"src/app.py\n~~~python\n{CODE}~~~\n").content == CODE
    assert only_edit(f"src/app.py\n````\n{CODE}````\n").content == CODE


def test_prose_and_a_think_block_around_the_edit_are_ignored() -> None:
    text = (
        "<think>Maybe I should write `src/decoy.py`:\n```python\nprint('no')\n```\n</think>\n"
        "Sure! I fixed the bug. Here is the complete file.\n\n"
        f"src/app.py\n{fence(CODE)}\n"
        "This returns 1 now. Let me know if you need anything else!"
    )
    result = parse_edits(text)
    assert result.edits == (FileEdit("src/app.py", content=CODE),)
    assert result.problems == ()


def test_an_unclosed_think_block_hides_everything_after_it() -> None:
    text = f"src/app.py\n{fence(CODE)}<think>\nsrc/decoy.py\n{fence('x = 1')}"
    assert [e.path for e in parse_edits(text).edits] == ["src/app.py"]


def test_a_lone_closing_think_tag_drops_the_thinking_before_it() -> None:
    text = f"src/decoy.py\n{fence('x = 1')}</think>\nsrc/app.py\n{fence(CODE)}"
    assert [e.path for e in parse_edits(text).edits] == ["src/app.py"]


def test_think_tags_inside_a_file_are_part_of_the_file() -> None:
    content = 'THINK = re.compile(r"<think>(.*?)</think>")\n<think>\nkept\n</think>\n'
    assert only_edit(f"src/strip.py\n{fence(content)}") == FileEdit("src/strip.py", content=content)


def test_a_think_tag_named_in_prose_hides_nothing() -> None:
    text = f"I fixed how `</think>` and '<think>' are stripped in src/app.py:\n{fence(CODE)}"
    assert only_edit(text) == FileEdit("src/app.py", content=CODE)


def test_a_commented_path_on_the_first_line_names_the_file_when_nothing_else_does() -> None:
    assert only_edit(fence(f"# src/app.py\n{CODE}")) == FileEdit("src/app.py", content=CODE)
    shebang = "#!/usr/bin/env python\nprint(1)\n"
    assert parse_edits(fence(shebang)).edits == ()
    commented = "# keep.py\n" + CODE
    assert only_edit("src/app.py\n" + fence(commented)).content == commented


def test_several_files_come_back_in_the_order_given() -> None:
    text = f"b.py\n{fence('b = 1')}\nThen:\n\na/c.py\n{fence('c = 1')}\nweb/d.ts\n{fence('let d = 1;', 'ts')}"
    assert [(e.path, e.content) for e in parse_edits(text).edits] == [
        ("b.py", "b = 1\n"),
        ("a/c.py", "c = 1\n"),
        ("web/d.ts", "let d = 1;\n"),
    ]


def test_an_answer_ending_inside_a_fence_is_a_cut_and_refused_whole_whatever_the_server_said() -> None:
    text = f"a.py\n{fence('a = 1')}\nb.py\n```python\ndef half(\n    x"
    result = parse_edits(text)
    assert result.edits == () and result.truncated
    assert result.problems == (ends_inside("the block at line 7 for b.py (its fence has no closing line)"),)


def test_crlf_answers_give_lf_content() -> None:
    text = f"src/app.py\n{fence(CODE)}".replace("\n", "\r\n")
    assert only_edit(text) == FileEdit("src/app.py", content=CODE)


def test_a_block_without_a_path_is_not_an_edit() -> None:
    result = parse_edits(f"Here you go:\n{fence(CODE)}")
    assert result.edits == ()
    assert "no file path" in result.problems[0]


def test_default_path_takes_the_only_bare_block() -> None:
    assert only_edit(fence(CODE), default_path="src/app.py") == FileEdit("src/app.py", content=CODE)


def test_default_path_is_not_used_when_there_are_two_bare_blocks_or_a_named_edit() -> None:
    assert parse_edits(fence(CODE) + fence("x = 1\n"), default_path="src/app.py").edits == ()
    named = parse_edits(f"b.py\n{fence('b = 1')}\nAlso:\n{fence(CODE)}", default_path="src/app.py")
    assert [e.path for e in named.edits] == ["b.py"]


def test_a_prose_line_naming_two_files_attaches_neither() -> None:
    result = parse_edits(f"I changed `a.py` and `b.py` like this\n{fence(CODE)}")
    assert result.edits == ()


def test_a_path_line_further_back_counts_but_prose_further_back_does_not() -> None:
    assert only_edit(f"### src/app.py\n\nThe fixed version:\n{fence(CODE)}").path == "src/app.py"
    assert parse_edits(f"I edited `src/app.py`.\nIt now returns 1.\n{fence(CODE)}").edits == ()


def test_the_prompts_own_file_section_echoed_back_is_understood() -> None:
    text = f"### src/app.py\n\nimports: (none)\nfunctions: main (L1-L2)\n\n{fence(CODE)}"
    assert only_edit(text) == FileEdit("src/app.py", content=CODE)


def test_a_pandoc_class_in_the_info_string_is_not_a_path() -> None:
    assert parse_edits(fence(CODE, "{.python}")).edits == ()


def test_a_path_does_not_carry_over_from_an_earlier_block() -> None:
    text = f"a.py\n{fence('a = 1')}\nNow run it:\n{fence('python a.py', 'bash')}"
    assert [e.path for e in parse_edits(text).edits] == ["a.py"]


def test_fences_nested_in_a_markdown_file_stay_inside_it() -> None:
    readme = "# Title\n\n```python\nprint(1)\n```\n\nMore text.\n"
    assert only_edit(f"README.md\n```markdown\n{readme}```\n") == FileEdit("README.md", content=readme)


def test_an_indented_fence_is_dedented_like_markdown() -> None:
    text = "1. Update `src/app.py`:\n\n   ```python\n   def main():\n       return 1\n   ```\n"
    assert only_edit(text) == FileEdit("src/app.py", content=CODE)


def test_a_unified_diff_block_becomes_a_patch_edit_per_file() -> None:
    diff = (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x\n+y\n"
        "--- a/src/b.py\t2024-01-01\n+++ b/src/b.py\n@@ -1 +1 @@\n-p\n+q\n"
    )
    result = parse_edits(f"src/app.py\n{fence(diff, 'diff')}")
    assert result.edits == (
        FileEdit("src/app.py", patch="@@ -1 +1 @@\n-x\n+y\n"),
        FileEdit("src/b.py", patch="@@ -1 +1 @@\n-p\n+q\n"),
    )
    unfenced = parse_edits("Here is the change:\n\n" + diff.split("--- a/src/b.py")[0] + "\nDone.\n")
    assert unfenced.edits == (FileEdit("src/app.py", patch="@@ -1 +1 @@\n-x\n+y\n"),)


def test_a_diff_that_deletes_a_file_is_a_problem_not_an_edit() -> None:
    result = parse_edits(fence("--- a/src/app.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", "diff"))
    assert result.edits == () and "DELETE: path" in result.problems[0]


def test_the_same_file_given_twice_keeps_both_versions_for_the_apply_to_choose() -> None:
    result = parse_edits(f"a.py\n{fence('a = 1')}\nOops, fixed:\n\na.py\n{fence('a = 2')}")
    assert result.edits == (FileEdit("a.py", content="a = 2\n", others=("a = 1\n",)),)
    assert result.problems == ()


def test_a_delete_line_asks_to_delete_a_file() -> None:
    assert only_edit("DELETE: old/thing.py\n") == FileEdit("old/thing.py", delete=True)


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "~/.bashrc", ".git/config"])
def test_dangerous_paths_are_parsed_so_the_policy_can_refuse_them_by_name(path: str) -> None:
    assert only_edit(f"{path}\n{fence('x', '')}").path == path


def test_an_empty_answer_says_no_edit_was_found() -> None:
    result = parse_edits("I could not do it, sorry.")
    assert result.edits == ()
    assert result.problems == (NO_EDIT,)
    assert "send each file's path on a line of its own" in NO_EDIT


def test_an_empty_fence_makes_an_empty_file() -> None:
    assert only_edit("src/empty.py\n```\n```\n") == FileEdit("src/empty.py", content="")


# ------------------------------------------------------------------------------- search/replace parsing

SR = "<<<<<<< SEARCH\n{0}=======\n{1}>>>>>>> REPLACE\n"


def test_search_replace_blocks_after_a_path_line_are_parsed() -> None:
    text = "src/app.py\n" + SR.format("    return 1\n", "    return 2\n") + "\n" + SR.format("a\n", "b\n")
    assert only_edit(text) == FileEdit(
        "src/app.py", blocks=(SearchReplace("    return 1\n", "    return 2\n"), SearchReplace("a\n", "b\n"))
    )


def test_search_replace_blocks_inside_a_fence_are_parsed() -> None:
    text = "src/app.py\n" + fence(SR.format("x\n", "y\n"))
    assert only_edit(text) == FileEdit("src/app.py", blocks=(SearchReplace("x\n", "y\n"),))


def test_a_path_line_inside_the_fence_names_the_file_for_the_blocks_after_it() -> None:
    body = "a.py\n" + SR.format("x\n", "y\n") + "b.py\n" + SR.format("p\n", "q\n")
    result = parse_edits(fence(body))
    assert [(e.path, e.blocks) for e in result.edits] == [
        ("a.py", (SearchReplace("x\n", "y\n"),)),
        ("b.py", (SearchReplace("p\n", "q\n"),)),
    ]


def test_later_blocks_without_a_path_go_to_the_previous_blocks_file() -> None:
    text = "a.py\n" + fence(SR.format("x\n", "y\n")) + "\nand also\n\n" + fence(SR.format("p\n", "q\n"))
    assert only_edit(text).blocks == (SearchReplace("x\n", "y\n"), SearchReplace("p\n", "q\n"))


def test_a_search_replace_block_after_a_whole_file_goes_to_that_file() -> None:
    text = "a.py\n" + fence("x = 1\n") + "\nOne more fix:\n" + SR.format("x = 1\n", "x = 2\n")
    assert only_edit(text) == FileEdit(
        "a.py", content="x = 1\n", blocks=(SearchReplace("x = 1\n", "x = 2\n"),)
    )


def test_an_answer_ending_inside_a_search_replace_block_is_a_cut_and_refused_whole() -> None:
    text = "a.py\n" + SR.format("x\n", "y\n") + "<<<<<<< SEARCH\np\n=======\nq\n"
    result = parse_edits(text)
    assert result.edits == () and result.truncated
    assert "ends inside the SEARCH/REPLACE block at line 7" in result.problems[0]
    assert "none of it was applied" in result.problems[0]


def test_a_block_missing_its_divider_does_not_borrow_the_next_blocks() -> None:
    text = "a.py\n" + SR.format("ok\n", "fine\n") + "<<<<<<< SEARCH\nx\n" + SR.format("p\n", "q\n")
    result = parse_edits(text)
    assert result.edits == (FileEdit("a.py", blocks=(SearchReplace("ok\n", "fine\n"),)),)
    assert "out of order" in result.problems[0]


def test_an_empty_search_section_parses_as_an_empty_string() -> None:
    assert only_edit("new.py\n" + SR.format("", "x = 1\n")).blocks == (SearchReplace("", "x = 1\n"),)


def test_a_file_whose_text_contains_conflict_markers_later_on_is_still_a_whole_file() -> None:
    content = "x = 1\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n"
    assert only_edit(f"notes.txt\n{fence(content, 'text')}") == FileEdit("notes.txt", content=content)


# ---------------------------------------------------------------------------------------- round trip

_path = st.lists(st.from_regex(r"[a-z_][a-z0-9_\-]{0,8}", fullmatch=True), min_size=0, max_size=3).map(
    lambda dirs: "/".join([*dirs, "file.py"])
)
_line = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x85\u2028\u2029"), max_size=30
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=_path, lines=st.lists(st.one_of(_line, st.sampled_from(["```", "```python", "~~~", "", "    x"])))
)
def test_a_rendered_whole_file_edit_parses_back_to_itself(path: str, lines: list[str]) -> None:
    content = "".join(line + "\n" for line in lines)
    # Lines the format gives a meaning to: a `# file:` header first, search/replace markers, think tags.
    assume(not lines or not parse_edits(f"```\n{lines[0]}\n```\n").edits)
    assume(not any(re.match(r"\s*<{5,9}\s*SEARCH\s*$", line, re.IGNORECASE) for line in lines))
    assume(not any("<think" in line.lower() or "</think" in line.lower() for line in lines))
    edit = FileEdit(path, content=content)
    assert parse_edits(render_edit(edit)).edits == (edit,)


def test_a_rendered_search_replace_edit_parses_back_to_itself() -> None:
    edit = FileEdit("src/a.py", blocks=(SearchReplace("a\n", "b\n"), SearchReplace("", "c\n")))
    assert parse_edits(render_edit(edit)).edits == (edit,)


# ------------------------------------------------------------------------------------------- matching

FILE = "import os\n\n\nclass Greeter:\n    def greet(self, name):\n        message = f'hi {name}'\n        return message\n\n    def leave(self):\n        return 'bye'\n"


def test_an_exact_search_block_is_replaced() -> None:
    text, failures = apply_blocks(
        "g.py", FILE, [SearchReplace("        return 'bye'\n", "        return 'ciao'\n")]
    )
    assert failures == []
    assert text == FILE.replace("'bye'", "'ciao'")


def test_a_search_block_with_wrong_indentation_matches_and_the_replacement_is_reindented() -> None:
    block = SearchReplace(
        "def leave(self):\n    return 'bye'\n", "def leave(self):\n    print('going')\n    return 'ciao'\n"
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert failures == []
    assert text is not None and text.endswith(
        "    def leave(self):\n        print('going')\n        return 'ciao'\n"
    )


def test_trailing_whitespace_and_blank_edge_lines_in_the_search_block_are_tolerated() -> None:
    block = SearchReplace(
        "\n    def leave(self):   \n        return 'bye'\t\n\n", "    def leave(self):\n        return 0\n"
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert failures == []
    assert text == FILE.replace("return 'bye'", "return 0")


def test_a_search_block_whose_middle_differs_is_refused_naming_its_anchor_lines() -> None:
    # Applying it would delete the real `message = f'hi {name}'` line and invent the model's.
    block = SearchReplace(
        "    def greet(self, name):\n        msg = 'hello ' + name\n        return message\n",
        "    def greet(self, name):\n        return f'hello {name}'\n",
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert text == FILE
    assert "lines 5 and 7" in failures[0].reason and "differ" in failures[0].reason
    assert "message = f'hi {name}'" in failures[0].closest


def test_a_search_block_differing_only_in_blank_lines_applies_and_keeps_the_files_blank_lines() -> None:
    block = SearchReplace(
        "    def greet(self, name):\n\n        message = f'hi {name}'\n        return message\n",
        "    def greet(self, name):\n\n        message = f'hi {name}'\n        return message.upper()\n",
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert failures == []
    assert text == FILE.replace("return message\n", "return message.upper()\n")


def test_blank_lines_do_not_drift_either_way() -> None:
    two = "a = 1\n\n\nb = 2\nc = 3\n"
    one_in_search = SearchReplace("a = 1\n\nb = 2\n", "a = 1\n\nb = 20\n")
    assert apply_blocks("f.py", two, [one_in_search]) == ("a = 1\n\n\nb = 20\nc = 3\n", [])
    one = "a = 1\n\nb = 2\nc = 3\n"
    two_in_search = SearchReplace("a = 1\n\n\nb = 2\n", "a = 1\n\n\nb = 20\n")
    assert apply_blocks("f.py", one, [two_in_search]) == ("a = 1\n\nb = 20\nc = 3\n", [])


@pytest.mark.parametrize(
    ("file_line", "search_line"),
    [
        ('s = "a\u00a0b"\n', 's = "a b"\n'),  # a no-break space inside a string
        ('row = "x     y"\n', 'row = "x y"\n'),  # column padding
        ("x  =  1\n", "x = 1\n"),
    ],
)
def test_spaces_inside_a_line_are_never_tolerated(file_line: str, search_line: str) -> None:
    text = "import os\n" + file_line + "print(1)\n"
    block = SearchReplace(search_line + "print(1)\n", search_line + "print(2)\n")
    new, failures = apply_blocks("f.py", text, [block])
    assert new == text
    assert "spaces inside its lines" in failures[0].reason


def test_a_line_kept_unchanged_keeps_the_files_trailing_whitespace_and_indentation() -> None:
    text = "def f():\n    x = 1   \n    return x\n"
    block = SearchReplace("  x = 1\n  return x\n", "  x = 1\n  return x + 1\n")
    assert apply_blocks("f.py", text, [block]) == ("def f():\n    x = 1   \n    return x + 1\n", [])


def test_search_lines_copied_with_their_line_numbers_match_without_them() -> None:
    text = "def f():\n    x = 1\n    return x\n"
    block = SearchReplace("2 |     x = 1\n3 |     return x\n", "2 |     x = 1\n3 |     return x + 1\n")
    assert apply_blocks("f.py", text, [block]) == ("def f():\n    x = 1\n    return x + 1\n", [])


def test_a_tab_indented_file_edited_with_spaces_keeps_its_tabs() -> None:
    tabbed = "func f() {\n\tif x {\n\t\treturn 1\n\t}\n\treturn 0\n}\n"
    block = SearchReplace(
        "    if x {\n        return 1\n    }\n",
        "    if x {\n        log(x)\n        if y {\n            return 2\n        }\n        return 1\n    }\n",
    )
    text, failures = apply_blocks("f.go", tabbed, [block])
    assert failures == []
    assert text == (
        "func f() {\n\tif x {\n\t\tlog(x)\n\t\tif y {\n\t\t\treturn 2\n\t\t}\n\t\treturn 1\n\t}\n"
        "\treturn 0\n}\n"
    )


def test_a_space_indented_file_edited_with_tabs_keeps_its_spaces() -> None:
    block = SearchReplace(
        "\tdef leave(self):\n\t\treturn 'bye'\n", "\tdef leave(self):\n\t\tif self:\n\t\t\treturn 0\n"
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert failures == []
    assert text is not None and text.endswith(
        "    def leave(self):\n        if self:\n            return 0\n"
    )


def test_blank_lines_at_a_blocks_edges_are_the_files_own() -> None:
    dropped = SearchReplace("        return message\n\n", "        return message.upper()\n")
    text, failures = apply_blocks("g.py", FILE, [dropped])
    assert failures == []
    assert text == FILE.replace("return message\n", "return message.upper()\n")
    added = SearchReplace("import os\n", "import os\n\n")
    text, failures = apply_blocks("g.py", FILE, [added])
    assert (text, failures) == (FILE, [])


def test_elided_search_and_replace_apply_piece_by_piece_when_each_piece_is_unique() -> None:
    block = SearchReplace(
        "    def greet(self, name):\n        ...\n    def leave(self):\n        return 'bye'\n",
        "    def greet(self, name):\n        ...\n    def leave(self):\n        return 'ciao'\n",
    )
    text, failures = apply_blocks("g.py", FILE, [block])
    assert failures == []
    assert text == FILE.replace("'bye'", "'ciao'")


def test_a_search_block_matching_several_places_fails_instead_of_guessing() -> None:
    text = "x = 1\ny = 2\nx = 1\n"
    new, failures = apply_blocks("a.py", text, [SearchReplace("x = 1\n", "x = 3\n")])
    assert new == text
    assert "2 places" in failures[0].reason and "lines 1, 3" in failures[0].reason


def test_one_failing_block_among_several_keeps_the_others_and_names_the_closest_lines() -> None:
    blocks = [
        SearchReplace("import os\n", "import sys\n"),
        SearchReplace("        message = f'hello {name}'\n", "        message = name\n"),
        SearchReplace("        return 'bye'\n", "        return 'ciao'\n"),
    ]
    text, failures = apply_blocks("g.py", FILE, blocks)
    assert text == FILE.replace("import os", "import sys").replace("'bye'", "'ciao'")
    assert len(failures) == 1
    failure = failures[0]
    assert failure.path == "g.py"
    assert failure.search == "        message = f'hello {name}'\n"
    assert failure.reason == "SEARCH text not found in the file"
    assert failure.closest == "6 |         message = f'hi {name}'"


def test_the_closest_lines_cover_as_many_lines_as_the_search_block() -> None:
    search = "    def greet(self, nom):\n        message = f'ho {name}'\n"
    _, failures = apply_blocks("g.py", FILE, [SearchReplace(search, "x\n")])
    assert failures[0].closest == "5 |     def greet(self, name):\n6 |         message = f'hi {name}'"


def test_nothing_alike_gives_no_closest_lines() -> None:
    _, failures = apply_blocks("g.py", FILE, [SearchReplace("zzzzqqqq\n", "x\n")])
    assert failures[0].closest == ""


def test_an_empty_search_creates_a_missing_file_and_fails_on_a_non_empty_one() -> None:
    assert apply_blocks("n.py", None, [SearchReplace("", "x = 1\n")]) == ("x = 1\n", [])
    text, failures = apply_blocks("g.py", FILE, [SearchReplace("", "x = 1\n")])
    assert text == FILE
    assert "empty SEARCH" in failures[0].reason


def test_a_search_in_a_missing_file_fails() -> None:
    text, failures = apply_blocks("n.py", None, [SearchReplace("x\n", "y\n")])
    assert text is None
    assert "does not exist" in failures[0].reason


def test_a_file_without_a_final_newline_keeps_it_that_way() -> None:
    assert apply_blocks("a.py", "a\nb", [SearchReplace("b\n", "c\n")]) == ("a\nc", [])


def test_feedback_names_each_failed_block_its_reason_and_the_closest_lines() -> None:
    _, failures = apply_blocks("g.py", FILE, [SearchReplace("        message = f'hello {name}'\n", "x\n")])
    text = blocks_failed(failures)
    assert "1 SEARCH/REPLACE block(s) did not match" in text
    assert "## 1. g.py: SEARCH text not found in the file" in text
    assert "        message = f'hello {name}'\n```" in text
    assert "6 |         message = f'hi {name}'" in text
    assert blocks_failed([]) == ""


# ---------------------------------------------------------------------------------------------- diffs


def test_unified_diff_is_git_style() -> None:
    diff = unified_diff("src/a.py", "a\nb\nc\n", "a\nB\nc\n")
    assert diff == "--- a/src/a.py\n+++ b/src/a.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


def test_unified_diff_of_a_new_file_reads_from_dev_null_and_marks_a_missing_newline() -> None:
    diff = unified_diff("n.py", "", "x = 1", created=True)
    assert diff == "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x = 1\n\\ No newline at end of file\n"


def test_unified_diff_applies_with_git(tmp_path: Path) -> None:
    old = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"
    new = "one\n2\nthree\nfour\nfive\nsix\nseven\neight\nnine"
    (tmp_path / "f.txt").write_text(old)
    (tmp_path / "p.diff").write_text(
        unified_diff("f.txt", old, new) + unified_diff("g.txt", "", "g\n", created=True)
    )
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "f.txt").read_text() == new
    assert (tmp_path / "g.txt").read_text() == "g\n"


# ------------------------------------------------------------------------------------ policy and apply


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "src" / "app.py").write_text(CODE)
    return root


def policy(root: Path, **overrides: object) -> Policy:
    values: dict[str, object] = {"allowed_paths": ("src",)}
    values.update(overrides)
    return Policy(repo_root=root, **values)  # type: ignore[arg-type]


def snapshot(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def test_a_whole_file_edit_is_written_and_recorded_as_a_diff(repo: Path) -> None:
    result = apply_edits([FileEdit("src/app.py", content="def main():\n    return 2\n")], policy(repo))
    assert (repo / "src/app.py").read_text() == "def main():\n    return 2\n"
    assert result.refused == () and result.failed_blocks == ()
    (applied,) = result.applied
    assert (applied.path, applied.added, applied.removed, applied.created) == ("src/app.py", 1, 1, False)
    assert applied.diff == (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def main():\n-    return 1\n+    return 2\n"
    )
    assert result.changed_files == ("src/app.py",)


def test_a_new_file_is_created_with_its_folders(repo: Path) -> None:
    result = apply_edits([FileEdit("src/pkg/sub/new.py", content="x = 1\n")], policy(repo))
    assert (repo / "src/pkg/sub/new.py").read_text() == "x = 1\n"
    assert result.applied[0].created
    assert result.applied[0].diff.startswith("--- /dev/null\n+++ b/src/pkg/sub/new.py\n")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../evil.py", "escapes the repository ('..')"),
        ("src/../../evil.py", "escapes the repository ('..')"),
        ("/tmp/evil.py", "absolute path"),
        ("~/evil.py", "home-relative"),
        (".git/config", "inside .git/"),
        ("src/.git/hooks/pre-commit", "inside .git/"),
        ("docs/readme.md", "not inside allowed_paths (src)"),
        ("", "empty path"),
    ],
)
def test_paths_outside_the_rules_are_refused_and_nothing_is_written(
    tmp_path: Path, repo: Path, path: str, reason: str
) -> None:
    before = snapshot(tmp_path)
    result = apply_edits([FileEdit(path, content="pwned\n")], policy(repo))
    assert result.applied == ()
    assert len(result.refused) == 1 and reason in result.refused[0].reason
    assert snapshot(tmp_path) == before


def test_a_symlinked_folder_pointing_outside_is_refused_and_nothing_is_written_outside(
    tmp_path: Path, repo: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "src" / "link").symlink_to(outside, target_is_directory=True)
    result = apply_edits([FileEdit("src/link/evil.py", content="pwned\n")], policy(repo))
    assert "escapes the repository through the symlink src/link" in result.refused[0].reason
    assert list(outside.iterdir()) == []


def test_a_symlink_inside_the_repository_is_not_written_through(repo: Path) -> None:
    (repo / "src" / "alias.py").symlink_to(repo / "src" / "app.py")
    result = apply_edits([FileEdit("src/alias.py", content="x = 1\n")], policy(repo))
    assert "goes through the symlink src/alias.py" in result.refused[0].reason
    assert (repo / "src/app.py").read_text() == CODE


def test_a_repository_root_reached_through_a_symlink_still_works(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "via").symlink_to(repo, target_is_directory=True)
    new = CODE.replace("1", "2")
    result = apply_edits([FileEdit("src/app.py", content=new)], policy(tmp_path / "via"))
    assert result.refused == ()
    assert (repo / "src/app.py").read_text() == new


def test_forbidden_paths_win_over_allowed_paths(repo: Path) -> None:
    rules = policy(
        repo, allowed_paths=("src", "tests"), forbidden_paths=("src/secrets", "**/*.lock", "*.pem")
    )
    edits = [
        FileEdit("src/secrets/key.py", content="k\n"),
        FileEdit("src/deep/poetry.lock", content="l\n"),
        FileEdit("src/a/b/cert.pem", content="c\n"),
        FileEdit("src/ok.py", content="ok\n"),
    ]
    result = apply_edits(edits, rules)
    assert [r.path for r in result.refused] == [
        "src/secrets/key.py",
        "src/deep/poetry.lock",
        "src/a/b/cert.pem",
    ]
    assert all("forbidden_paths" in r.reason for r in result.refused)
    assert result.changed_files == ("src/ok.py",)
    assert not (repo / "src/secrets").exists()


@pytest.mark.parametrize(
    ("path", "entries", "allowed"),
    [
        ("src/a.py", ("src/a.py",), True),
        ("src/a.py.bak", ("src/a.py",), False),
        ("src/x/y.py", ("src/",), True),
        ("srcx/y.py", ("src",), False),
        ("src/x/y.py", ("src/**/*.py",), True),
        ("src/y.py", ("src/**/*.py",), True),
        ("src/x/y.txt", ("src/**/*.py",), False),
        ("src/x/y.py", ("src/*.py",), False),
        ("deep/er/f.md", ("*.md",), True),
        ("build7/out/f.o", ("build?",), True),
        ("anything/at/all", (".",), True),
        ("a.py", ("[ab].py",), True),
        ("c.py", ("[!ab].py",), True),
        ("a.py", (), False),
    ],
)
def test_allowed_path_entries_are_files_folders_or_globs(
    path: str, entries: tuple[str, ...], allowed: bool
) -> None:
    assert path_allowed(path, entries) is allowed


def test_a_binary_payload_is_refused(repo: Path) -> None:
    edits = [
        FileEdit("src/app.py", content="x = 1\x00\x00\n"),
        FileEdit("src/b.py", content="".join(chr(n % 32) for n in range(200))),
        FileEdit("src/app.py", blocks=(SearchReplace("    return 1\n", "\x00\n"),)),
    ]
    result = apply_edits(edits, policy(repo))
    assert [r.reason for r in result.refused] == [
        "binary payload (NUL bytes or mostly control characters)"
    ] * 3
    assert (repo / "src/app.py").read_text() == CODE and not (repo / "src/b.py").exists()


def test_a_change_over_max_diff_lines_is_refused_and_the_file_left_alone(repo: Path) -> None:
    big = CODE + "".join(f"x{n} = {n}\n" for n in range(50))
    result = apply_edits([FileEdit("src/app.py", content=big)], policy(repo, max_diff_lines=20))
    assert result.refused[0].reason == "change of 50 lines is over max_diff_lines=20"
    assert (repo / "src/app.py").read_text() == CODE
    assert apply_edits([FileEdit("src/app.py", content=big)], policy(repo, max_diff_lines=50)).applied


def test_crlf_files_stay_crlf_and_the_file_mode_is_kept(repo: Path) -> None:
    script = repo / "src" / "run.sh"
    script.write_bytes(b"#!/bin/sh\r\necho one\r\n")
    script.chmod(0o754)
    result = apply_edits(
        [FileEdit("src/run.sh", blocks=(SearchReplace("echo one\n", "echo two\n"),))], policy(repo)
    )
    assert result.failed_blocks == ()
    assert script.read_bytes() == b"#!/bin/sh\r\necho two\r\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o754
    assert "\r" not in result.applied[0].diff


def test_a_missing_final_newline_and_a_bom_are_kept(repo: Path) -> None:
    target = repo / "src" / "bom.py"
    target.write_bytes(b"\xef\xbb\xbfx = 1")
    apply_edits([FileEdit("src/bom.py", content="x = 2\n")], policy(repo))
    assert target.read_bytes() == b"\xef\xbb\xbfx = 2"


def test_a_new_file_gets_the_umask_mode(repo: Path) -> None:
    apply_edits([FileEdit("src/new.py", content="x\n")], policy(repo))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((repo / "src/new.py").stat().st_mode) == 0o666 & ~umask


def test_planning_writes_nothing_and_predicts_the_result(repo: Path) -> None:
    edits = [FileEdit("src/app.py", content="x = 1\n"), FileEdit("../x.py", content="x\n")]
    before = snapshot(repo.parent)
    plan = plan_edits(edits, policy(repo))
    assert snapshot(repo.parent) == before
    assert plan.result() == apply_edits(edits, policy(repo))


def test_search_replace_edits_apply_the_blocks_that_match_and_report_the_rest(repo: Path) -> None:
    edit = FileEdit(
        "src/app.py",
        blocks=(
            SearchReplace("def main():\n", "def main() -> int:\n"),
            SearchReplace("    return 9\n", "x\n"),
        ),
    )
    result = apply_edits([edit], policy(repo))
    assert (repo / "src/app.py").read_text() == "def main() -> int:\n    return 1\n"
    assert result.changed_files == ("src/app.py",)
    assert [(f.path, f.closest) for f in result.failed_blocks] == [("src/app.py", "2 |     return 1")]


def test_an_edit_whose_blocks_all_fail_writes_nothing_and_is_not_called_unchanged(repo: Path) -> None:
    result = apply_edits([FileEdit("src/app.py", blocks=(SearchReplace("nope\n", "x\n"),))], policy(repo))
    assert result.applied == () and result.unchanged == () and len(result.failed_blocks) == 1


def test_an_edit_that_changes_nothing_is_reported_unchanged(repo: Path) -> None:
    result = apply_edits([FileEdit("src/app.py", content=CODE)], policy(repo))
    assert result.applied == () and result.unchanged == ("src/app.py",)


def test_deleting_is_refused_unless_allowed(repo: Path) -> None:
    refused = apply_edits([FileEdit("src/app.py", delete=True)], policy(repo))
    assert "not allowed" in refused.refused[0].reason and (repo / "src/app.py").exists()
    done = apply_edits([FileEdit("src/app.py", delete=True)], policy(repo, delete_allowed=True))
    assert not (repo / "src/app.py").exists()
    assert done.applied[0].deleted and done.applied[0].diff.startswith("--- a/src/app.py\n+++ /dev/null\n")


def test_an_existing_non_utf8_file_is_refused(repo: Path) -> None:
    (repo / "src" / "latin.txt").write_bytes(b"caf\xe9\n")
    result = apply_edits([FileEdit("src/latin.txt", content="cafe\n")], policy(repo))
    assert "not UTF-8" in result.refused[0].reason
    assert (repo / "src/latin.txt").read_bytes() == b"caf\xe9\n"


def test_a_folder_is_not_overwritten_as_a_file(repo: Path) -> None:
    result = apply_edits([FileEdit("src", content="x\n")], policy(repo, allowed_paths=(".",)))
    assert result.refused[0].reason == "not a regular file"


def test_two_edits_of_one_file_apply_in_order(repo: Path) -> None:
    edits = [
        FileEdit("src/app.py", content=CODE + "a = 1\n"),
        FileEdit("src/app.py", blocks=(SearchReplace("a = 1\n", "a = 2\n"),)),
    ]
    result = apply_edits(edits, policy(repo))
    assert (repo / "src/app.py").read_text() == CODE + "a = 2\n"
    assert [a.diff.splitlines()[-1] for a in result.applied] == ["+a = 1", "+a = 2"]


def test_no_temporary_files_are_left_behind(repo: Path) -> None:
    apply_edits(
        [FileEdit("src/app.py", content="x = 1\n"), FileEdit("src/n/new.py", content="y\n")], policy(repo)
    )
    assert sorted(str(p.relative_to(repo)) for p in (repo / "src").rglob("*")) == [
        "src/app.py",
        "src/n",
        "src/n/new.py",
    ]


def test_parsed_model_output_goes_end_to_end_to_files(repo: Path) -> None:
    answer = (
        "<think>ok</think>Here are the changes.\n\nsrc/app.py\n"
        + fence(SR.format("    return 1\n", "    return 2\n"))
        + "\nsrc/util.py\n"
        + fence("def helper():\n    return 3\n")
    )
    parsed = parse_edits(answer)
    result = apply_edits(parsed.edits, policy(repo))
    assert result.changed_files == ("src/app.py", "src/util.py")
    assert (repo / "src/app.py").read_text() == "def main():\n    return 2\n"
    assert (repo / "src/util.py").read_text() == "def helper():\n    return 3\n"


# -------------------------------------------------------------------- shapes small models print (issue 12)

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
SR_SUB = "<<<<<<< SEARCH\n    return a - b\n=======\n    return b - a\n>>>>>>> REPLACE\n"


@pytest.mark.parametrize(
    ("start", "divider", "end"),
    [
        ("<<<<<<< SEARCH>", "=======", ">>>>>>> REPLACE"),
        ("<<< SEARCH", "===", ">>> REPLACE"),
        ("<<<<<<<<< search", "=========", ">>>>>>>>> replace"),
    ],
)
def test_search_replace_marker_variants_are_read_as_markers(start: str, divider: str, end: str) -> None:
    edit = only_edit(f"calc.py\n{start}\n    return a - b\n{divider}\n    return b - a\n{end}\n")
    assert edit.blocks == (SearchReplace("    return a - b\n", "    return b - a\n"),)


def test_a_fence_holding_only_a_path_names_the_next_blocks_file() -> None:
    edit = only_edit(f"{fence('calc.py', '')}{fence(CALC)}")
    assert edit == FileEdit("calc.py", content=CALC)


def test_the_path_repeated_on_a_blocks_first_line_is_not_content() -> None:
    assert only_edit(fence("calc.py\n" + CALC)) == FileEdit("calc.py", content=CALC)
    assert only_edit("calc.py\n" + fence("**calc.py**\n" + CALC)) == FileEdit("calc.py", content=CALC)


def test_a_whole_answer_wrapped_in_a_markdown_fence_is_read_from_inside() -> None:
    inner = "calc.py\n" + fence(CALC) + "\nand\n\nutil.py\n" + fence(SR_SUB)
    result = parse_edits(f"```markdown\n{inner}```\n")
    assert result.edits == (
        FileEdit("calc.py", content=CALC),
        FileEdit("util.py", blocks=(SearchReplace("    return a - b\n", "    return b - a\n"),)),
    )


def test_a_markdown_file_holding_fences_is_a_whole_file_not_a_wrapper() -> None:
    doc = "# Use\n\nsetup.py\n```python\nx = 1\n```\n"
    assert only_edit(f"README.md\n````markdown\n{doc}````\n") == FileEdit("README.md", content=doc)


def test_a_unified_diff_is_applied_by_git_and_checked_first(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text(CALC)
    diff = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return b - a\n"
    result = apply_edits(parse_edits(fence(diff, "diff")).edits, policy(repo))
    assert result.refused == ()
    assert (repo / "src" / "calc.py").read_text() == CALC.replace("a - b", "b - a")


def test_a_diff_hunk_that_is_not_in_the_file_or_is_in_it_twice_is_refused(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text(CALC + "\n\ndef sub2(a, b):\n    return a - b\n")
    missing = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1 +1 @@\n-    return a * b\n+    return b\n"
    twice = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -6 +6 @@\n-    return a - b\n+    return b - a\n"
    for diff, why in ((missing, "is not found"), (twice, "matches 2 places")):
        result = apply_edits(parse_edits(fence(diff, "diff")).edits, policy(repo))
        assert why in result.refused[0].reason and result.refused[0].retry
    assert "b - a" not in (repo / "src" / "calc.py").read_text()


def test_a_diff_creates_a_new_file(repo: Path) -> None:
    diff = "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+def f():\n+    return 1\n"
    result = apply_edits(parse_edits(fence(diff, "diff")).edits, policy(repo))
    assert result.refused == () and (repo / "src" / "new.py").read_text() == "def f():\n    return 1\n"


def test_the_one_allowed_file_takes_an_edit_under_the_wrong_folder(repo: Path) -> None:
    only = policy(repo, allowed_paths=("src/app.py",))
    result = apply_edits([FileEdit("app.py", content=CODE.replace("1", "2"))], only)
    assert result.changed_files == ("src/app.py",)
    assert (repo / "src" / "app.py").read_text() == CODE.replace("1", "2")


def test_the_one_allowed_file_takes_a_wrong_name_whose_search_matches_it_exactly(repo: Path) -> None:
    only = policy(repo, allowed_paths=("src/app.py",))
    block = SearchReplace("    return 1\n", "    return 2\n")
    assert apply_edits([FileEdit("main.py", blocks=(block,))], only).changed_files == ("src/app.py",)
    missing = SearchReplace("    return 9\n", "    return 2\n")
    assert apply_edits([FileEdit("main.py", blocks=(missing,))], only).changed_files == ()


def test_no_retargeting_with_several_allowed_files_or_an_escaping_path(repo: Path) -> None:
    two = policy(repo, allowed_paths=("src/app.py", "src/b.py"))
    assert (
        "not inside allowed_paths" in apply_edits([FileEdit("app.py", content="x\n")], two).refused[0].reason
    )
    only = policy(repo, allowed_paths=("src/app.py",))
    assert "escapes" in apply_edits([FileEdit("../app.py", content="x\n")], only).refused[0].reason


def test_a_cut_off_answer_is_refused_whole_even_when_its_first_block_is_complete(repo: Path) -> None:
    from hub.edits.answer import apply_answer
    from hub.edits.feedback import answer_feedback, output_truncated

    answer = "src/app.py\n" + fence(CODE.replace("1", "2")) + "\nsrc/b.py\n```python\ndef b():\n    ret"
    parsed, result = apply_answer(answer, policy(repo), done_reason="length")
    assert parsed.truncated and result.changed_files == ()
    assert parsed.problems == (output_truncated(),)
    assert (repo / "src" / "app.py").read_text() == CODE
    assert "cut off" in answer_feedback(parsed, result)


def test_feedback_names_each_refused_content_and_says_what_was_written(repo: Path) -> None:
    from hub.edits.answer import apply_answer
    from hub.edits.feedback import answer_feedback

    answer = "src/app.py\n" + fence("") + "\nsrc/b.py\n" + fence("x = 1\n")
    parsed, result = apply_answer(answer, policy(repo))
    feedback = answer_feedback(parsed, result)
    assert "1 edit(s) were refused" in feedback and "(written: src/b.py)" in feedback
    assert "- src/app.py: the new content is empty" in feedback


def test_a_flattened_search_block_is_refused_rather_than_flattening_the_file() -> None:
    text = "def f():\n    if x:\n        return 1\n    return 0\n"
    new, failures = apply_blocks("f.py", text, [SearchReplace("if x:\nreturn 1\n", "if x:\nreturn 2\n")])
    assert new == text and "indented alike" in failures[0].reason


def test_a_two_space_block_in_a_four_space_file_is_scaled_to_the_files_step() -> None:
    text = "def f():\n    if x:\n        return 1\n    return 0\n"
    block = SearchReplace("  if x:\n    return 1\n", "  if x:\n    if y:\n      return 3\n    return 2\n")
    new, failures = apply_blocks("f.py", text, [block])
    assert failures == []
    assert new == "def f():\n    if x:\n        if y:\n            return 3\n        return 2\n    return 0\n"


def test_a_file_whose_docstring_shows_a_fenced_example_with_a_path_stays_one_file() -> None:
    text = '"""Example:\n\nusage.py\n```python\nx = 1\n```\n"""\ndef f():\n    return 1\n'
    assert only_edit(f"calc.py\n```\n{text}```\n") == FileEdit("calc.py", content=text)


def test_a_markdown_files_heading_naming_the_file_is_content_not_a_label() -> None:
    text = "# README.md\n\nHow to use this.\n"
    assert only_edit(f"README.md\n```markdown\n{text}```\n") == FileEdit("README.md", content=text)


def test_a_git_diff_of_two_files_applies_to_both(repo: Path) -> None:
    # `git diff` output: the `diff --git` and `index` lines of the second file are not hunk lines of the first.
    (repo / "src" / "b.py").write_text("p = 1\nq = 2\n")
    diff = (
        "diff --git a/src/app.py b/src/app.py\nindex 83db48f..bf269f4 100644\n"
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def main():\n-    return 1\n+    return 2\n"
        "diff --git a/src/b.py b/src/b.py\nindex 1a2b3c4..5d6e7f8 100644\n"
        "--- a/src/b.py\n+++ b/src/b.py\n@@ -1,2 +1,2 @@\n p = 1\n-q = 2\n+q = 3\n"
    )
    result = apply_edits(parse_edits(fence(diff, "diff")).edits, policy(repo))
    assert result.refused == () and result.changed_files == ("src/app.py", "src/b.py")
    assert (repo / "src" / "app.py").read_text() == CODE.replace("1", "2")
    assert (repo / "src" / "b.py").read_text() == "p = 1\nq = 3\n"


def test_an_excerpt_given_as_the_whole_file_is_refused_even_with_blocks_after_it(repo: Path) -> None:
    # The blocks apply to the excerpt, so the file still becomes the excerpt: judged as a whole file.
    (repo / "src" / "calc.py").write_text(CALC)
    excerpt = "def sub(a, b):\n    return b - a\n"
    block = "<<<<<<< SEARCH\n    return b - a\n=======\n    return (b - a)\n>>>>>>> REPLACE\n"
    reply = f"src/calc.py\n{fence(excerpt)}\nsrc/calc.py\n{fence(block)}"
    result = apply_edits(parse_edits(reply).edits, policy(repo))
    assert result.changed_files == () and "excerpt" in result.refused[0].reason
    assert (repo / "src" / "calc.py").read_text() == CALC


def test_a_file_given_as_blocks_and_as_a_diff_is_refused_not_half_applied(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text(CALC)
    block = "<<<<<<< SEARCH\n    return a + b\n=======\n    return b + a\n>>>>>>> REPLACE\n"
    diff = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return b - a\n"
    for reply in (
        f"src/calc.py\n{fence(block)}\n{fence(diff, 'diff')}",
        f"{fence(diff, 'diff')}\nsrc/calc.py\n{fence(block)}",
    ):
        result = apply_edits(parse_edits(reply).edits, policy(repo))
        assert result.changed_files == () and "one kind of edit per file" in result.refused[0].reason
        assert result.refused[0].retry
    assert (repo / "src" / "calc.py").read_text() == CALC


def test_two_diffs_of_one_file_both_apply(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text(CALC)
    first = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n"
    second = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return b - a\n"
    result = apply_edits(parse_edits(fence(first, "diff") + "\n" + fence(second, "diff")).edits, policy(repo))
    assert result.refused == ()
    assert (repo / "src" / "calc.py").read_text() == CALC.replace("a + b", "b + a").replace("a - b", "b - a")


def test_a_block_with_a_heading_underline_is_refused_not_split_at_a_guess() -> None:
    block = "<<<<<<< SEARCH\nInstall\n=======\n\npip\n=======\nInstall\n=======\n\npipx\n>>>>>>> REPLACE\n"
    result = parse_edits("README.md\n" + block)
    assert result.edits == () and "more than one line of only '='" in result.problems[0]


def test_a_diff_hunk_without_context_is_refused_rather_than_placed_by_its_line_number(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text(CALC)
    diff = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -2,0 +3,1 @@\n+    # add\n"
    result = apply_edits(parse_edits(fence(diff, "diff")).edits, policy(repo))
    assert result.changed_files == () and "no context" in result.refused[0].reason
    assert (repo / "src" / "calc.py").read_text() == CALC


def test_a_git_diff_file_without_its_own_minus_plus_lines_goes_to_the_file_its_diff_line_names() -> None:
    diff = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/b.py b/b.py\n@@ -1 +1 @@\n-p\n+q\n"
    assert parse_edits(fence(diff, "diff")).edits == (
        FileEdit("a.py", patch="@@ -1 +1 @@\n-x\n+y\n"),
        FileEdit("b.py", patch="@@ -1 +1 @@\n-p\n+q\n"),
    )


def test_json_in_prose_is_not_a_tool_call_and_a_call_for_a_read_is_no_edit() -> None:
    text = 'The config is\n{"name": "app", "version": 1}\n\na.py\n' + fence("x = 1")
    assert parse_edits(text).edits == (FileEdit("a.py", content="x = 1\n"),)
    call = '{"name": "run_command", "arguments": {"command": "pytest"}}\n'
    result = parse_edits(call)
    assert result.edits == () and "the hub runs no tools" in result.problems[0]


def test_a_codex_patch_becomes_blocks_a_new_file_and_a_delete() -> None:
    text = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n x = 1\n-y = 2\n+y = 3\n"
        "*** Add File: b.py\n+z = 1\n*** Delete File: c.py\n*** End Patch\n"
    )
    assert parse_edits(text).edits == (
        FileEdit("a.py", blocks=(SearchReplace("x = 1\ny = 2\n", "x = 1\ny = 3\n"),)),
        FileEdit("b.py", content="z = 1\n"),
        FileEdit("c.py", delete=True),
    )
    cut = parse_edits(text.replace("*** End Patch\n", ""))
    assert cut.truncated and "the patch at line 1 (no *** End Patch line)" in cut.problems[0]


def test_clines_xml_write_inside_a_fence_is_a_whole_file_and_unclosed_it_is_a_cut() -> None:
    call = "<write_to_file>\n<path>a.py</path>\n<content>\nx = 1\n</content>\n</write_to_file>\n"
    assert parse_edits(f"```xml\n{call}```\n").edits == (FileEdit("a.py", content="x = 1\n"),)
    cut = parse_edits("<write_to_file>\n<path>a.py</path>\n<content>\nx =")
    assert cut.truncated and "the <write_to_file> call at line 1 (no closing tag)" in cut.problems[0]
