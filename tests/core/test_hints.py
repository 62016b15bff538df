"""An error's message says what is wrong; what a person should do goes in its `hint` (issue 33).

`hub.core.errors.with_hint` renders the two as "<message>; fix: <hint>" for the CLI, the MCP tools and
the halts. A fix written into the message instead cannot be shown apart, and reads "fix:" twice once it
has a hint too. This test reads hub/ with `ast` and refuses a string given to a HubError subclass (or a
`Trip`, a halt's reason) as its message that holds a fix clause.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from hub.core.errors import describe, with_hint

HUB = Path(__file__).resolve().parents[2] / "hub"

# What a fix clause starts with: the verbs the hub's messages used before issue 33 to tell a person what
# to do ("...; run `hub init` first", "...: pass --base with ...", "... (see `hub status`)").
IMPERATIVES = (
    "run|rerun|set|use|give|pass|try|install|add|remove|create|commit|resume|start|point|check|delete|"
    "fix|edit|name|wait|raise|clone|stash|call|read|rename|drop|choose|pick|see|enable|disable|make|"
    "write|send|stop|kill|finish|merge|rebase|upgrade|increase|reduce|unset|export|configure|allow|"
    "change|replace|answer"
)
# "fix:" anywhere; or a clause after ';', ':', '(' or "then" that opens with one of those verbs.
# "set aside" is what the hub did to a file, not an order.
FIX_CLAUSE = re.compile(
    r"(?i:fix:)|(?:[;:(]|\bthen)\s*(?:(?:then|or|else|and|so|please)\s+)?(?:" + IMPERATIVES + r")\b(?! aside)"
)

# Messages a model reads: it sees only the text, never a hint, so its fix stays in the text.
# - EditError (and apply's _Unfit): edits that cannot be applied become the implementer's feedback prompt
#   (hub/edits/feedback.py) and the agent's tool results (hub/agent/builtin.py).
# - ReviewParseError: the reviewer's unparseable answer is told back to the reviewer.
MODEL_FACING = frozenset({"EditError", "_Unfit", "ReviewParseError"})


# Files another part of issue 33 was still changing while the hints were moved; the coordinator sweeps
# them afterwards and empties this list.
def _trees(root: Path) -> dict[str, ast.Module]:
    return {
        str(path.relative_to(root.parent)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(root.rglob("*.py"))
    }


def _error_classes(trees: dict[str, ast.Module]) -> set[str]:
    """HubError and every class below it, by name, wherever in hub/ it is declared."""
    names = {"HubError"}
    grew = True
    while grew:
        grew = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                    if bases & names:
                        names.add(node.name)
                        grew = True
    return names


def _called(node: ast.Call, classes: set[str], enclosing: str | None) -> str | None:
    """The error class (or "Trip") a call builds: `Name(...)`, `module.Name(...)`, or `super().__init__`
    inside an error class."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name in classes or name == "Trip":
        return name
    is_super = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
    if is_super and name == "__init__" and getattr(func.value.func, "id", "") == "super":  # type: ignore[attr-defined]
        return enclosing if enclosing in classes else None
    return None


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            yield inner


def _fixes(node: ast.AST, relative: str, classes: set[str], enclosing: str | None) -> Iterator[str]:
    if isinstance(node, ast.ClassDef):
        enclosing = node.name
    if isinstance(node, ast.Call):
        built = _called(node, classes, enclosing)
        if built and built not in MODEL_FACING:
            given = [*node.args, *(k.value for k in node.keywords if k.arg != "hint")]
            for literal in (s for arg in given for s in _strings(arg)):
                if FIX_CLAUSE.search(literal.value):
                    yield f"{relative}:{literal.lineno}: {built}: {literal.value!r}"
    for child in ast.iter_child_nodes(node):
        yield from _fixes(child, relative, classes, enclosing)


def fixes_in_messages(root: Path) -> list[str]:
    """Every message literal (or f-string part) under `root` that holds a fix: "file:line: Class: text"."""
    trees = _trees(root)
    classes = _error_classes(trees)
    return [found for relative, tree in trees.items() for found in _fixes(tree, relative, classes, None)]


def test_no_error_message_carries_its_fix():
    found = fixes_in_messages(HUB)
    assert not found, "move the fix into hint=...:\n" + "\n".join(found)


def test_the_scanner_finds_a_fix_written_into_a_message(tmp_path):
    package = tmp_path / "hub"
    package.mkdir()
    (package / "errors.py").write_text(
        "class HubError(Exception): ...\nclass ConfigError(HubError): ...\n", encoding="utf-8"
    )
    (package / "use.py").write_text(
        "from hub.errors import ConfigError\n"
        "def one(x):\n"
        "    raise ConfigError(f'no judge {x}: set judge.command in hub.yaml')\n"
        "def two():\n"
        "    raise ConfigError('no judge configured', hint='set judge.command in hub.yaml')\n"
        "def three(reason):\n"
        "    return Trip('stall', f'stalled twice ({reason}); see STALL_REPORT.md')\n"
        "def four():\n"
        "    raise EditError('the block matches nowhere; send SEARCH/REPLACE blocks')\n",
        encoding="utf-8",
    )
    found = fixes_in_messages(package)
    assert [line.split(": ")[0] for line in found] == ["hub/use.py:3", "hub/use.py:7"]


def test_a_hint_is_shown_after_its_message():
    from hub.core.errors import WrongState

    error = WrongState("task t1 has no task branch yet", hint="run `hub setup-task` first")
    assert describe(error) == "task t1 has no task branch yet; fix: run `hub setup-task` first"
    assert with_hint("no hint here") == "no hint here"
