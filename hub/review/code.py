"""Tree-sitter views of source files: an outline (functions, classes, imports) and syntax errors.

Grammars come bundled with tree-sitter-language-pack 0.13 (1.x downloads them at run time, which
fails offline). Both libraries are imported inside functions: `hub status` must not pay for them.

Conventions of the outline:
- `Symbol.kind` is "function", "method" or "class". Struct-like types (Go struct/interface types,
  Rust struct/enum/trait, C/C++ structs, Ruby modules) count as classes: they are what a reader looks
  for when asking "what types does this file define".
- A function defined directly inside a class is a method named `Class.method`; C++ definitions written
  outside their class (`int Foo::bar() {...}`) are methods named as written (`Foo::bar`); Go methods
  are named `Receiver.Method`.
- Only definitions with a body count: a Java interface method, a Go function implemented in assembly
  or a Rust trait signature is not code to edit.
- Lines are 1-based and inclusive; columns in `SyntaxIssue` are 1-based characters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tree_sitter import Node

_EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".java": "java",
    ".rs": "rust",
    ".rb": "ruby",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
}


@dataclass(frozen=True)
class Symbol:
    """A function, method or class: where it starts and ends (1-based, inclusive)."""

    kind: str
    name: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Outline:
    """What a file defines and imports; imports are their source text on one line each."""

    language: str
    functions: tuple[Symbol, ...]
    imports: tuple[str, ...]


@dataclass(frozen=True)
class SyntaxIssue:
    """A parse error (an ERROR node) or a token the parser had to invent (a MISSING node)."""

    line: int
    column: int
    message: str


@dataclass(frozen=True)
class _Spec:
    """How to read one grammar: a query capturing @function, @class and @import nodes, and the
    node types that make a function a method (`classes`) or hide it inside another function."""

    query: str
    classes: frozenset[str]
    functions: frozenset[str]
    import_filter: Callable[[Node], str | None] | None = None


def _ruby_require(node: Node) -> str | None:
    method = node.child_by_field_name("method")
    if node.child_by_field_name("receiver") is None and _text(method) in {
        "require",
        "require_relative",
        "load",
    }:
        return _text(node)
    return None


def _js_require(node: Node) -> str | None:
    if _text(node.child_by_field_name("function")) != "require":
        return None
    statement = node
    while statement.parent is not None and statement.type not in _JS_STATEMENTS:
        statement = statement.parent
    return _text(statement if statement.type in _JS_STATEMENTS else node)


def _go_import(node: Node) -> str | None:
    return "import " + _text(node)


_JS_STATEMENTS = frozenset({"lexical_declaration", "variable_declaration", "expression_statement"})
_JS_FUNCTIONS = """
[(function_declaration) (generator_function_declaration) (method_definition)] @function
(variable_declarator value: [(arrow_function) (function_expression)]) @function
(import_statement) @import
(call_expression function: (identifier)) @import
"""
_JS_FUNCTION_TYPES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "function_expression",
        "arrow_function",
    }
)
_TS_QUERY = _JS_FUNCTIONS + "[(class_declaration) (abstract_class_declaration)] @class\n"
_TS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})

_SPECS: dict[str, _Spec] = {
    "python": _Spec(
        query="""
        (function_definition) @function
        (class_definition) @class
        [(import_statement) (import_from_statement) (future_import_statement)] @import
        """,
        classes=frozenset({"class_definition"}),
        functions=frozenset({"function_definition", "lambda"}),
    ),
    "go": _Spec(
        query="""
        [(function_declaration) (method_declaration)] @function
        (type_spec type: [(struct_type) (interface_type)]) @class
        (import_spec) @import
        """,
        classes=frozenset(),
        functions=frozenset({"function_declaration", "method_declaration", "func_literal"}),
        import_filter=_go_import,
    ),
    "javascript": _Spec(
        query=_JS_FUNCTIONS + "(class_declaration) @class\n",
        classes=frozenset({"class_declaration", "class"}),
        functions=_JS_FUNCTION_TYPES,
        import_filter=lambda n: _js_require(n) if n.type == "call_expression" else _text(n),
    ),
    "typescript": _Spec(
        query=_TS_QUERY,
        classes=_TS_CLASSES,
        functions=_JS_FUNCTION_TYPES,
        import_filter=lambda n: _js_require(n) if n.type == "call_expression" else _text(n),
    ),
    "java": _Spec(
        query="""
        [(method_declaration) (constructor_declaration)] @function
        [(class_declaration) (interface_declaration) (enum_declaration) (record_declaration)] @class
        (import_declaration) @import
        """,
        classes=frozenset(
            {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}
        ),
        functions=frozenset({"method_declaration", "constructor_declaration", "lambda_expression"}),
    ),
    "rust": _Spec(
        query="""
        (function_item) @function
        [(struct_item) (enum_item) (trait_item) (union_item)] @class
        [(use_declaration) (extern_crate_declaration)] @import
        """,
        classes=frozenset({"impl_item", "trait_item"}),
        functions=frozenset({"function_item", "closure_expression"}),
    ),
    "ruby": _Spec(
        query="""
        [(method) (singleton_method)] @function
        [(class) (module)] @class
        (call method: (identifier)) @import
        """,
        classes=frozenset({"class", "module"}),
        functions=frozenset({"method", "singleton_method"}),
        import_filter=_ruby_require,
    ),
    "c": _Spec(
        query="""
        (function_definition) @function
        (struct_specifier name: (_) body: (_)) @class
        (preproc_include) @import
        """,
        classes=frozenset(),
        functions=frozenset({"function_definition"}),
    ),
    "cpp": _Spec(
        query="""
        (function_definition) @function
        [(class_specifier name: (_) body: (_)) (struct_specifier name: (_) body: (_))] @class
        (preproc_include) @import
        """,
        classes=frozenset({"class_specifier", "struct_specifier"}),
        functions=frozenset({"function_definition", "lambda_expression"}),
    ),
}
_SPECS["tsx"] = _SPECS["typescript"]

_C_NAME_TYPES = frozenset(
    {"identifier", "field_identifier", "qualified_identifier", "destructor_name", "operator_name"}
)


def language_for(path: str) -> str | None:
    """The grammar name for a file path by its extension, or None when we have no grammar for it."""
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return None
    return _EXTENSIONS.get(path[dot:].lower())


@functools.cache
def _parser(language: str) -> Any:
    from tree_sitter_language_pack import get_parser

    return get_parser(language)  # type: ignore[arg-type]


@functools.cache
def _query(language: str) -> Any:
    from tree_sitter import Query
    from tree_sitter_language_pack import get_language

    return Query(get_language(language), _SPECS[language].query)  # type: ignore[arg-type]


# A whole-line Python comment. tree-sitter-python parses a run of them in time quadratic in its length
# (2,000 lines 2 s, 8,000 lines 28 s on a busy machine: a 50 MB reply held the local review for 1,069 s);
# blanked to spaces of the same byte length first, every position in the tree stays where it was.
_PY_COMMENT_LINE = re.compile(rb"(?m)^([ \t]*)(#[^\r\n]*)")


def _blank_comments(data: bytes) -> bytes:
    return _PY_COMMENT_LINE.sub(lambda m: m.group(1) + b" " * len(m.group(2)), data)


def _parse(language: str, source: str) -> Node:
    data = source.encode("utf-8")
    if language == "python":
        data = _blank_comments(data)
    tree = _parser(language).parse(data)
    root: Node = tree.root_node
    return root


def outline(path: str, source: str) -> Outline | None:
    """Functions, methods, classes and imports of a source file; None for a language we do not know."""
    language = language_for(path)
    if language is None:
        return None
    symbols, imports = _read(language, _parse(language, source))
    return Outline(language=language, functions=tuple(s for s, _ in symbols), imports=tuple(imports))


def parse(path: str, source: str) -> tuple[str, Node] | None:
    """The file's grammar name and the root of its parse tree; None for a language we do not know.
    Python comment lines are blanked in the parsed text (see `_blank_comments`): node text shows spaces."""
    language = language_for(path)
    if language is None:
        return None
    return language, _parse(language, source)


def symbols(language: str, root: Node) -> list[tuple[Symbol, Node]]:
    """The outline's functions, methods and classes of a tree `parse` gave, each with its node."""
    return _read(language, root)[0]


def _read(language: str, root: Node) -> tuple[list[tuple[Symbol, Node]], list[str]]:
    from tree_sitter import QueryCursor

    spec = _SPECS[language]
    captures = QueryCursor(_query(language)).captures(root)
    tagged = [(node, tag) for tag, nodes in captures.items() for node in nodes]
    tagged.sort(key=lambda pair: (pair[0].start_byte, -pair[0].end_byte))
    found: list[tuple[Symbol, Node]] = []
    imports: list[str] = []
    seen: set[tuple[int, int, str]] = set()
    for node, tag in tagged:
        key = (node.start_byte, node.end_byte, tag)
        if key in seen:
            continue
        seen.add(key)
        if tag == "import":
            line = spec.import_filter(node) if spec.import_filter else _text(node)
            if line is not None:
                imports.append(one_line(line))
        else:
            symbol = _symbol(language, spec, node, tag)
            if symbol is not None:
                found.append((symbol, node))
    return found, imports


def _symbol(language: str, spec: _Spec, node: Node, tag: str) -> Symbol | None:
    start, end = _lines(node)
    if node.parent is not None and node.parent.type == "decorated_definition":
        start = _lines(node.parent)[0]
    if tag == "class":
        name = _text(node.child_by_field_name("name"))
        return Symbol("class", name, start, end) if name else None
    if node.type == "variable_declarator":
        return Symbol("function", _text(node.child_by_field_name("name")), start, end)
    if language in ("java", "go") and node.child_by_field_name("body") is None:
        return None
    if language in ("c", "cpp"):
        name = _c_function_name(node)
        if "::" in name:
            return Symbol("method", name, start, end)
    else:
        name = _text(node.child_by_field_name("name"))
    if not name:
        return None
    if node.type == "method_declaration" and language == "go":
        receiver = _go_receiver(node)
        return Symbol("method", f"{receiver}.{name}" if receiver else name, start, end)
    owner = _enclosing_class(spec, node)
    if owner is not None:
        return Symbol("method", f"{owner}.{name}" if owner else name, start, end)
    if node.type in ("method_definition", "singleton_method", "constructor_declaration"):
        return Symbol("method", name, start, end)
    if language == "java":
        return Symbol("method", name, start, end)
    return Symbol("function", name, start, end)


def _enclosing_class(spec: _Spec, node: Node) -> str | None:
    """The name of the class a function sits directly in ("" if unnamed), or None if it is not in one."""
    parent = node.parent
    while parent is not None:
        if parent.type in spec.classes:
            if parent.type == "impl_item":
                return _rust_impl_type(parent)
            return _text(parent.child_by_field_name("name"))
        if parent.type in spec.functions:
            return None
        parent = parent.parent
    return None


def _rust_impl_type(impl: Node) -> str:
    kind = impl.child_by_field_name("type")
    while kind is not None and kind.type in ("generic_type", "scoped_type_identifier", "reference_type"):
        kind = kind.child_by_field_name("type") or kind.child_by_field_name("name")
    return _text(kind)


def _go_receiver(method: Node) -> str:
    receiver = method.child_by_field_name("receiver")
    if receiver is None:
        return ""
    for parameter in receiver.named_children:
        kind = parameter.child_by_field_name("type")
        while kind is not None and kind.type in ("pointer_type", "generic_type"):
            kind = kind.named_children[0] if kind.type == "pointer_type" else kind.child_by_field_name("type")
        return _text(kind)
    return ""


def _c_function_name(definition: Node) -> str:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in _C_NAME_TYPES:
        inner = declarator.child_by_field_name("declarator")
        if inner is None and declarator.named_children:
            inner = declarator.named_children[0]
        declarator = inner
    return one_line(_text(declarator))


def syntax_errors(path: str, source: str) -> list[SyntaxIssue]:
    """Every ERROR and MISSING node of the file's parse tree, in source order; [] for unknown languages."""
    language = language_for(path)
    if language is None:
        return []
    data = source.encode("utf-8")
    root = _parse(language, source)
    issues = []
    for node in _error_nodes(root):
        row, byte_column = node.start_point
        line_start = data.rfind(b"\n", 0, node.start_byte) + 1
        column = len(data[line_start : line_start + byte_column].decode("utf-8", errors="replace")) + 1
        if node.is_missing:
            message = f"missing {node.type!r}" if not node.is_named else f"missing {node.type}"
        else:
            snippet = _text(node).strip().split("\n", 1)[0]
            snippet = snippet[:40] + ("..." if len(snippet) > 40 else "")
            message = f"syntax error near {snippet!r}" if snippet else "syntax error"
        issues.append(SyntaxIssue(line=row + 1, column=column, message=message))
    return issues


def _error_nodes(node: Node) -> Iterator[Node]:
    # Only subtrees that hold an error are walked, so a clean file costs one check.
    if node.is_missing or node.is_error:
        yield node
        if node.is_error:
            # A MISSING token inside an ERROR is the same mistake seen twice.
            return
    for child in node.children:
        if child.has_error or child.is_missing:
            yield from _error_nodes(child)


def render_outline(o: Outline) -> str:
    """Compact text for a prompt: one line of imports, one of definitions with their line ranges."""
    imports = "; ".join(line.rstrip(";") for line in o.imports) if o.imports else "(none)"
    parts = []
    for symbol in o.functions:
        prefix = "class " if symbol.kind == "class" else ""
        parts.append(f"{prefix}{symbol.name} (L{symbol.start_line}-L{symbol.end_line})")
    return f"imports: {imports}\nfunctions: {', '.join(parts) if parts else '(none)'}"


def _lines(node: Node) -> tuple[int, int]:
    start = node.start_point[0] + 1
    end_row, end_column = node.end_point
    # A node that swallows its trailing newline (C's #include) ends on the line before.
    end = end_row if end_column == 0 and end_row > node.start_point[0] else end_row + 1
    return start, end


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def one_line(text: str) -> str:
    """Source text on one line: line breaks inside brackets dropped, others a single space."""
    text = re.sub(r"([(\[{])\s*\n\s*", r"\1", text.strip())
    text = re.sub(r",?\s*\n\s*([)\]}])", r"\1", text)
    return re.sub(r"\s*\n\s*", " ", text)
