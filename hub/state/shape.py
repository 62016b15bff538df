"""A JSON schema from TypedDicts, read from their source: how the contract's schema is derived from
`hub.state.contract`, its one declaration (`hub.state.schema.contract_schema`).

The TypedDicts exist for mypy only (at run time they are plain dicts, see `hub.state.contract`), so they
are read as source, not imported. Every object a TypedDict describes refuses keys it does not declare
(`additionalProperties: false`) unless it is named open; `NotRequired` and `total=False` make a key
optional. Refinements a type cannot say (a minimum, a pattern, an enum) are added by path:
`limits.max_review_cycles`, `specification.requirements[]` (an item), `cost.*` (any key of a dict).
Pure: the caller reads the source.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

SIMPLE = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


class Shapes:
    """The TypedDicts of one module's source, by name, and the schemas they make."""

    def __init__(
        self, source: str, refinements: Mapping[str, Mapping[str, Any]], open_shapes: set[str]
    ) -> None:
        self.fields: dict[str, list[tuple[str, ast.expr, bool]]] = {}
        self.refinements = refinements
        self.open_shapes = open_shapes
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and any(_name(b) == "TypedDict" for b in node.bases):
                total = _total(node.keywords)
                self.fields[node.name] = [
                    (item.target.id, item.annotation, total)
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                ]
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                # `HistoryEntry = TypedDict("HistoryEntry", {"from": str, ...})`: "from" is a keyword.
                call = node.value
                if (
                    _name(call.func) == "TypedDict"
                    and len(call.args) == 2
                    and isinstance(call.args[1], ast.Dict)
                ):
                    total = _total(call.keywords)
                    name = str(ast.literal_eval(call.args[0]))
                    self.fields[name] = [
                        (str(ast.literal_eval(key)), value, total)
                        for key, value in zip(call.args[1].keys, call.args[1].values, strict=True)
                        if key is not None
                    ]

    def schema(self, name: str, path: str = "") -> dict[str, Any]:
        """The JSON schema of the TypedDict `name`, refined at `path` and below."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        for key, annotation, total in self.fields[name]:
            inner, optional = _unwrap_required(annotation)
            properties[key] = self.of(inner, f"{path}.{key}" if path else key)
            if total and not optional:
                required.append(key)
        schema: dict[str, Any] = {"type": "object", "required": required, "properties": properties}
        if name not in self.open_shapes:
            schema["additionalProperties"] = False
        return self._refined(schema, path)

    def of(self, node: ast.expr, path: str) -> dict[str, Any]:
        """The schema of one annotation."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._refined(_union([self.of(part, path) for part in _members(node)]), path)
        if isinstance(node, ast.Constant) and node.value is None:
            return {"type": "null"}
        if isinstance(node, ast.Subscript):
            outer = _name(node.value)
            if outer == "list":
                schema = {"type": "array", "items": self.of(node.slice, f"{path}[]")}
                return self._refined(schema, path)
            if outer == "dict" and isinstance(node.slice, ast.Tuple):
                values = self.of(node.slice.elts[1], f"{path}.*")
                schema = {"type": "object"} | ({"additionalProperties": values} if values else {})
                return self._refined(schema, path)
            raise ValueError(f"{path}: {ast.unparse(node)} has no JSON schema here")
        name = _name(node)
        if name in SIMPLE:
            return self._refined({"type": SIMPLE[name]}, path)
        if name == "Any":
            return self._refined({}, path)
        if name in self.fields:
            return self.schema(name, path)
        raise ValueError(f"{path}: {ast.unparse(node)} has no JSON schema here")

    def _refined(self, schema: dict[str, Any], path: str) -> dict[str, Any]:
        return schema | dict(self.refinements.get(path, {}))


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _total(keywords: list[ast.keyword]) -> bool:
    return not any(
        kw.arg == "total" and isinstance(kw.value, ast.Constant) and kw.value.value is False
        for kw in keywords
    )


def _unwrap_required(node: ast.expr) -> tuple[ast.expr, bool]:
    """The annotation inside NotRequired[...] / Required[...], and whether the key may be left out."""
    if isinstance(node, ast.Subscript) and _name(node.value) in ("NotRequired", "Required"):
        return node.slice, _name(node.value) == "NotRequired"
    return node, False


def _members(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _members(node.left) + _members(node.right)
    return [node]


def _union(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """`A | B | None` as one schema: the types listed together, with the keywords of the one member that
    has any (two structured members are not needed by the contract, and refused)."""
    if any("type" not in s for s in schemas):
        return {}  # Any is one of them
    structured = [s for s in schemas if set(s) - {"type"}]
    if len(structured) > 1:
        raise ValueError(f"a union of {len(structured)} structured shapes")
    merged = dict(structured[0]) if structured else {}
    types: list[str] = []
    for s in schemas:
        types += [t for t in (s["type"] if isinstance(s["type"], list) else [s["type"]]) if t not in types]
    merged["type"] = types[0] if len(types) == 1 else types
    return merged
