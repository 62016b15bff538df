"""A reviewer's "critical" halts only on evidence: a security finding quoting a line the change adds."""

from __future__ import annotations

from hub.phases.evidence import added_lines, agrees, quote_in_change, second_look_prompt, sort_criticals
from hub.state.contract import Issue

DIFF = """\
diff --git a/app/run.py b/app/run.py
--- a/app/run.py
+++ b/app/run.py
@@ -1,2 +1,3 @@
 def run(cmd):
-    pass
+    import os
+    return os.system("sh -c " + cmd)
"""


def critical(**fields: object) -> Issue:
    issue: Issue = {"severity": "critical", "description": "shell built from input", "file": "app/run.py"}
    return {**issue, **fields}  # type: ignore[typeddict-item]


def test_added_lines_are_read_per_file_without_their_plus() -> None:
    assert added_lines(DIFF) == {"app/run.py": ["import os", 'return os.system("sh -c " + cmd)']}


def test_a_security_finding_quoting_an_added_line_asks_for_a_second_look() -> None:
    issue = critical(kind="security", quote='return   os.system("sh -c " + cmd)')
    judged = sort_criticals([issue], DIFF)
    assert judged.candidates == [issue] and judged.downgraded == []


def test_an_opinion_without_a_quote_is_downgraded_for_the_judge() -> None:
    judged = sort_criticals([critical(kind="security")], DIFF)
    assert judged.candidates == []
    [kept] = judged.downgraded
    assert kept["severity"] == "major"
    assert (
        "rated critical by the local reviewer; not a halt: it quotes no line the change adds"
        in kept["description"]
    )


def test_a_quote_of_a_removed_or_invented_line_is_no_evidence() -> None:
    assert not quote_in_change(critical(quote="pass # TODO remove"), added_lines(DIFF))
    assert not quote_in_change(critical(quote="eval(user_input)"), added_lines(DIFF))
    assert not quote_in_change(critical(quote="cmd"), added_lines(DIFF))  # too short to prove anything


def test_a_quote_from_another_changed_file_than_the_one_named_is_no_evidence() -> None:
    both = DIFF + DIFF.replace("app/run.py", "app/other.py").replace("import os", "import sys")
    assert quote_in_change(critical(quote="import sys", file="app/other.py"), added_lines(both))
    assert not quote_in_change(critical(quote="import sys", file="app/run.py"), added_lines(both))
    # A file the change does not touch (a model's wrong path): any added line may be the one it means.
    assert quote_in_change(critical(quote="import sys", file="lib/nowhere.py"), added_lines(both))


def test_a_critical_that_is_not_about_security_never_halts() -> None:
    issue = critical(kind="bug", quote="import os", description="does not check if the input is a string")
    [kept] = sort_criticals([issue], DIFF).downgraded
    assert kept["severity"] == "major" and "not a security finding" in kept["description"]


def test_the_second_look_names_the_line_and_agrees_only_with_a_plain_yes() -> None:
    prompt = second_look_prompt(critical(kind="security", quote="import os"))
    assert "    import os" in prompt and "shell built from input" in prompt
    assert agrees("YES: the command is built from input.")
    assert agrees("**Yes** - it runs a shell")
    assert not agrees("NO. Validation is not security.")
    assert not agrees("The line is not a security hole; yes, it could be cleaner.")
