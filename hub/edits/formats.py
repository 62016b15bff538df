"""The pre-write check for files no grammar covers: data formats and build files. Pure.

`format_broken(path, before, after)` returns why `after` must not be written, or None. Each format is
judged as a parser or tool would read it, and only a file that did not have the fault before may be
refused for it (a check refuses what the answer breaks, never what it found):

- YAML (PyYAML, `safe_load_all`: a tab in the indentation, a bad mapping), JSON (`json`; a `.json`
  with comments, such as a tsconfig, did not parse before and is left alone), TOML (`tomllib`);
- a Makefile whose recipe lines are indented with spaces (make stops at them: "missing separator");
- Markdown that ends inside a fenced block (a file cut short, or an inner fence taken for the end);
- HTML with more unclosed or stray tags than before.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from html.parser import HTMLParser

_MAKEFILES = ("makefile", "gnumakefile")
# Lines make reads as its own even when indented with spaces inside a rule's context.
_MAKE_OWN = re.compile(
    r"^\s*(?:ifeq|ifneq|ifdef|ifndef|else|endif|-?include|define|endef|export|unexport|override|vpath"
    r"|[\w.$(){}-]+\s*(?:[:+?!]|::)?=)"
)
_MAKE_RULE = re.compile(r"^[^\s#=:][^#=]*?::?(?!=)")
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "!doctype",
    ]
)


# JSON with comments by convention (JSONC): the json module would refuse a valid one.
_JSONC = re.compile(
    r"(?:^|/)(?:tsconfig[\w.-]*|jsconfig[\w.-]*|devcontainer|\.vscode/[\w.-]+|\.?eslintrc)\.json$"
)
# A templated YAML file (Helm, Jinja, Ansible) is YAML only once rendered.
_TEMPLATED = re.compile(r"\{\{|\{%")


def format_broken(path: str, before: str | None, after: str) -> str | None:
    """Why `after` breaks the file's format where `before` did not, or None."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if (suffix == "json" and _JSONC.search(path.lower())) or (
        suffix in ("yaml", "yml") and _TEMPLATED.search(after)
    ):
        return None
    if suffix in ("html", "htm"):
        return _html_worse(before, after)
    check = _CHECKS.get(suffix) or (_makefile if name in _MAKEFILES or suffix == "mk" else None)
    if check is None:
        return None
    problem = check(after)
    if problem is None or (before is not None and check(before) is not None):
        return None
    return problem


def _yaml(text: str) -> str | None:
    import yaml  # only when a YAML file is written: the CLI's start-up does not pay for it

    try:
        for _ in yaml.safe_load_all(text):
            pass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).split("\n")[0]
        return (
            f"the result is not valid YAML ({problem}{where}); YAML indents with spaces, never tabs. "
            "Send the complete, valid file"
        )
    return None


def _json(text: str) -> str | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"the result is not valid JSON ({error.msg} at line {error.lineno}); send the complete, valid file"
    return None


def _toml(text: str) -> str | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return f"the result is not valid TOML ({error}); send the complete, valid file"
    return None


def _makefile(text: str) -> str | None:
    in_rule = continued = False
    for n, line in enumerate(text.split("\n"), 1):
        if continued:
            continued = line.endswith("\\")
            continue
        continued = line.endswith("\\")
        if line.startswith("\t") or not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] == " ":
            if in_rule and not _MAKE_OWN.match(line):
                return (
                    f"line {n} of the Makefile is a recipe line indented with spaces ({line.strip()!r}); "
                    'make stops there ("missing separator"): indent recipe lines with one tab'
                )
            continue
        in_rule = bool(_MAKE_RULE.match(line)) and not _MAKE_OWN.match(line)
    return None


def _markdown(text: str) -> str | None:
    opened: tuple[int, str] | None = None
    for n, line in enumerate(text.split("\n"), 1):
        fence = _MD_FENCE.match(line)
        if fence is None:
            continue
        mark = fence[1]
        if opened is None:
            if not (mark[0] == "`" and "`" in fence[2]):
                opened = (n, mark)
        elif mark[0] == opened[1][0] and len(mark) >= len(opened[1]) and not fence[2].strip():
            opened = None
    if opened is None:
        return None
    return (
        f"the Markdown ends inside the code block opened at line {opened[0]} ({opened[1]}): its closing "
        "fence is missing, so the file was probably cut short. Send the complete file, with each code "
        "block closed"
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.stray: list[str] = []
        self.unclosed: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if tag in self.stack:
            # Elements HTML closes implicitly (<p>, <li>) before this end tag are not a fault; others are.
            while self.stack and (inner := self.stack.pop()) != tag:
                if inner not in _IMPLIED:
                    self.unclosed.append(inner)
        else:
            self.stray.append(tag)


_IMPLIED = frozenset(
    [
        "p",
        "li",
        "dt",
        "dd",
        "tr",
        "td",
        "th",
        "thead",
        "tbody",
        "tfoot",
        "option",
        "html",
        "head",
        "body",
        "colgroup",
    ]
)


def _html_faults(text: str) -> list[str]:
    tags = _Tags()
    tags.feed(text)
    tags.close()
    return [f"<{t}> never closed" for t in tags.unclosed + tags.stack if t not in _IMPLIED] + [
        f"</{t}> closes nothing" for t in tags.stray
    ]


def _html_worse(before: str | None, after: str) -> str | None:
    """HTML in the wild rarely balances: only more faults than before is refused."""
    faults = _html_faults(after)
    if len(faults) <= (len(_html_faults(before)) if before is not None else 0):
        return None
    return (
        f"the HTML's tags balance less than before ({'; '.join(faults[:3])}); send the complete file with "
        "every tag closed"
    )


_CHECKS: dict[str, Callable[[str], str | None]] = {
    "yaml": _yaml,
    "yml": _yaml,
    "json": _json,
    "toml": _toml,
    "md": _markdown,
    "markdown": _markdown,
}
