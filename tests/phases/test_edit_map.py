"""Edit mode's map beside a task's named files (issue 34): the files linked to them, after their text;
nothing for a stub and its test alone (hub eval's exercism layout, where a map only grows the prompt), and
nothing by default (`edit_map` is off until measured on real replies). In-process against a FakeOllama, in a real repository."""

from __future__ import annotations

from .conftest import GREET_FIXED, IMPL, Pipeline, whole_file

USES_UTIL = 'from util import polite\n\n\ndef greet(name):\n    return "hello " + polite(name)\n'
FIXED = USES_UTIL.replace('"hello "', '"hello, "')
LINKED = {
    "src/app.py": USES_UTIL,
    "src/util.py": "def polite(word):\n    return word.strip()\n",
    "src/shapes.py": "class Square:\n    def area(self):\n        return 4\n",
    "tests/test_app.py": "from app import greet\n\n\ndef test_greet():\n    assert greet('x') == 'hello, x'\n",
}
HEADING = "## Around these files"


def the_map(prompt: str) -> str:
    return prompt.split(HEADING, 1)[1].split("## How to answer", 1)[0] if HEADING in prompt else ""


def test_a_task_naming_its_file_is_shown_the_files_linked_to_it_after_its_text(pipe: Pipeline) -> None:
    pipe.configure(extra_yaml="edit_map: true\n")
    pipe.commit("linked modules", LINKED)
    pipe.fake.script(IMPL, whole_file("src/app.py", FIXED))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    (prompt,) = pipe.prompts()
    shown = the_map(prompt)
    assert "src/util.py:" in shown and "def polite(word)" in shown
    # The named file is in the prompt whole, not again on the map; what is not linked to it is not shown.
    assert "src/app.py" not in shown and "shapes" not in shown and "tests/" not in shown
    assert prompt.index("from util import polite") < prompt.index(HEADING)


def test_a_stub_and_its_test_alone_get_no_map(pipe: Pipeline) -> None:
    pipe.configure(extra_yaml="edit_map: true\n")
    pipe.commit("the stub's test", {"tests/test_app.py": LINKED["tests/test_app.py"]})
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert HEADING not in pipe.prompts()[0]


def test_by_default_a_task_naming_its_file_gets_no_map(pipe: Pipeline) -> None:
    pipe.commit("linked modules", LINKED)
    pipe.fake.script(IMPL, whole_file("src/app.py", FIXED))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    assert HEADING not in pipe.prompts()[0]


def test_the_users_secret_in_a_signature_on_the_map_is_redacted(pipe: Pipeline) -> None:
    pipe.configure(extra_yaml="edit_map: true\n")
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    (pipe.repo / ".env").write_text(f"SERVICE_TOKEN={secret}\n", encoding="utf-8")
    uses_client = 'from client import connect\n\n\ndef greet(name):\n    return "hello " + connect(name)\n'
    pipe.commit(
        "a client",
        {
            ".gitignore": ".env\n",
            "src/app.py": uses_client,
            "src/client.py": f"def connect(name, token='{secret}'):\n    return name\n",
        },
    )
    pipe.fake.script(IMPL, whole_file("src/app.py", uses_client.replace('"hello "', '"hello, "')))
    pipe.start()

    assert pipe.implement().to_state == "pending_local_review"

    shown = the_map(pipe.prompts()[0])
    assert "def connect(name, token=" in shown and secret not in shown
