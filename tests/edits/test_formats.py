"""The pre-write check for files without a grammar: each format refused when the answer breaks it,
never for a fault the file already had."""

from __future__ import annotations

import pytest

from hub.edits.check import judge
from hub.edits.formats import format_broken


@pytest.mark.parametrize(
    ("path", "good", "broken", "said"),
    [
        ("ci.yml", "jobs:\n  test:\n    runs-on: x\n", "jobs:\n  test:\n\truns-on: x\n", "not valid YAML"),
        ("a.json", '{"a": 1}\n', '{"a": 1,}\n', "not valid JSON"),
        ("pyproject.toml", 'a = "1"\n', 'a = 1"\n', "not valid TOML"),
        ("Makefile", "all:\n\techo hi\n", "all:\n    echo hi\n", "indent recipe lines with one tab"),
        ("rules.mk", "all:\n\techo hi\n", "all:\n    echo hi\n", "missing separator"),
        (
            "README.md",
            "# a\n\n```\nx\n```\n",
            "# a\n\n```\nx\n",
            "ends inside the code block opened at line 3",
        ),
        ("i.html", "<div><p>a</div>\n", "<div><section><p>a</div>\n", "<section> never closed"),
    ],
)
def test_a_format_the_answer_breaks_is_refused_before_writing(
    path: str, good: str, broken: str, said: str
) -> None:
    assert format_broken(path, good, good) is None
    why = judge(path, good, broken, whole_file=False)
    assert why is not None and said in why


def test_a_fault_the_file_already_had_is_not_the_answers() -> None:
    with_comments = '{\n  // a tsconfig\n  "a": 1\n}\n'
    assert format_broken("tsconfig.json", with_comments, with_comments.replace("1", "2")) is None
    assert format_broken("i.html", "<div><span>a</div>\n", "<div><span>b</div>\n") is None


def test_make_lines_of_its_own_may_be_indented_with_spaces_inside_a_rule() -> None:
    text = "all: x\n\techo hi\n  ifeq ($(A),1)\n  X = 2\n  endif\n"
    assert format_broken("Makefile", None, text) is None


def test_a_new_file_must_be_valid_from_the_start() -> None:
    assert format_broken("new.yaml", None, "a: [1\n") is not None
    assert format_broken("new.yaml", None, "a: [1]\n") is None


def test_json_with_comments_by_convention_and_templated_yaml_are_left_alone() -> None:
    assert format_broken("tsconfig.json", None, '{\n  // strict\n  "strict": true\n}\n') is None
    assert format_broken(".vscode/settings.json", None, "{ /* x */ }\n") is None
    assert (
        format_broken("chart/templates/d.yaml", None, "{{- if .Values.on }}\nkind: X\n{{- end }}\n") is None
    )
    assert format_broken("plain.json", None, "{\n  // a comment\n}\n") is not None
