"""A bad hub.yaml, said well (`render`: one line per problem with its file line, key path and expected
form; `yaml_error`), and the key reference README's table is checked against (`reference`).

Apart from config_schema, whose table it reads: a hub.yaml that passes, the common case on every
command, needs none of this, and `hub status` does not load it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hub.core.config_schema import (
    SCHEMA,
    AnyOf,
    Bool,
    Command,
    ListOf,
    Map,
    MapOf,
    Num,
    Path,
    Problem,
    Scalar,
    Spec,
    Str,
)


def dotted(path: Path) -> str:
    """roles.implementer.model, workers[0].url, models["qwen2.5-coder:7b"].num_ctx"""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out or "(top level)"


def locate(text: str, path: Path, at_key: bool = False) -> int | None:
    """The 1-based line of `path` in the YAML `text` (of its key when `at_key`), or None."""
    import yaml

    try:
        node: Any = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == str(part):
                    line = key_node.start_mark.line if (last and at_key) else value_node.start_mark.line
                    if last and not at_key and not isinstance(value_node, yaml.ScalarNode):
                        line = key_node.start_mark.line
                    node = value_node
                    break
            else:
                return line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            return line + 1
    return line + 1


def yaml_error(path: Any, exc: Exception) -> str:
    """`hub.yaml:LINE: not valid YAML: ...`, naming the file where PyYAML says "<unicode string>"."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    return f"{where}: not valid YAML: " + str(exc).replace(
        "<unicode string>", getattr(path, "name", str(path))
    )


def render(problems: Sequence[Problem], source: str, text: str | None) -> str:
    """One line per problem: `file:line: key.path: what (expected: form)`."""
    lines = []
    for p in problems:
        line = locate(text, p.path, p.at_key) if text is not None else None
        where = f"{source}:{line}" if line else source
        expected = f" (expected {p.expected})" if p.expected else ""
        lines.append(f"{where}: {dotted(p.path)}: {p.problem}{expected}")
    return "\n".join(lines)


# --- the key reference -------------------------------------------------------------------------------


def reference(spec: Spec = SCHEMA, prefix: str = "") -> list[tuple[str, str]]:
    """Every key hub.yaml may hold, as (key path, its form in a few words), in the table's order: the
    key and type columns of README's key reference, which tests/core/test_config.py checks against this so
    the two cannot drift. `roles.<role>`: a mapping whose keys all take one mapping form; `workers[]`:
    a list of mappings."""
    rows: list[tuple[str, str]] = []
    if isinstance(spec, Map):
        forms = list(spec.fields.values())
        if len(forms) > 1 and isinstance(forms[0], Map) and all(form is forms[0] for form in forms):
            each = prefix.rsplit(".", 1)[-1].removesuffix("s")
            return reference(forms[0], f"{prefix}.<{each}>")
        for key, form in spec.fields.items():
            found = reference(form, f"{prefix}.{key}" if prefix else key)
            if key in spec.required:
                found[0] = (found[0][0], f"{found[0][1]}, required")
            rows += found
        return rows
    if isinstance(spec, MapOf) and isinstance(spec.values, Map):
        return reference(spec.values, f"{prefix}.<{prefix.rsplit('.', 1)[-1].removesuffix('s')}>")
    if isinstance(spec, ListOf) and isinstance(spec.items, Map):
        return reference(spec.items, f"{prefix}[]")
    rows.append((prefix, form_of(spec)))
    if isinstance(spec, AnyOf):
        for form in spec.forms:
            if isinstance(form, Map):
                rows += reference(form, prefix)
    return rows


def form_of(spec: Spec) -> str:
    """A value's form in a few words, for the key reference."""
    if isinstance(spec, Str):
        if spec.choices:
            return "/".join(spec.choices)
        return "file name" if spec.plain_name else "string"
    if isinstance(spec, Num):
        return spec.expected.removeprefix("a ").removeprefix("an ")
    if isinstance(spec, Command):
        return "command: string or list"
    if isinstance(spec, Scalar):
        return "string, number or boolean"
    if isinstance(spec, Bool):
        return "true/false"
    if isinstance(spec, AnyOf):
        return " or ".join("mapping (below)" if isinstance(f, Map) else form_of(f) for f in spec.forms)
    if isinstance(spec, MapOf):
        return f"mapping of name to {form_of(spec.values)}"
    if isinstance(spec, ListOf):
        return f"list of {form_of(spec.items)}"
    return "mapping"
