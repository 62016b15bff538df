"""hub.review.code: tree-sitter outlines and syntax errors for each supported language."""

from __future__ import annotations

import pytest

from hub.review.code import Outline, Symbol, SyntaxIssue, language_for, outline, render_outline, syntax_errors


def fn(name: str, start: int, end: int) -> Symbol:
    return Symbol("function", name, start, end)


def method(name: str, start: int, end: int) -> Symbol:
    return Symbol("method", name, start, end)


def cls(name: str, start: int, end: int) -> Symbol:
    return Symbol("class", name, start, end)


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a.py", "python"),
        ("stubs/a.pyi", "python"),
        ("cmd/main.go", "go"),
        ("a.js", "javascript"),
        ("a.mjs", "javascript"),
        ("a.cjs", "javascript"),
        ("a.jsx", "javascript"),
        ("a.ts", "typescript"),
        ("a.tsx", "tsx"),
        ("A.java", "java"),
        ("src/lib.rs", "rust"),
        ("a.rb", "ruby"),
        ("a.c", "c"),
        ("a.h", "c"),
        ("a.cc", "cpp"),
        ("a.cpp", "cpp"),
        ("a.cxx", "cpp"),
        ("a.hpp", "cpp"),
        ("a.hh", "cpp"),
        ("A.PY", "python"),
        ("README.md", None),
        ("Makefile", None),
        ("dir.py/file", None),
    ],
)
def test_the_language_comes_from_the_file_extension(path: str, language: str | None) -> None:
    assert language_for(path) == language


PYTHON = """\
import os
from typing import (
    Any,
    Optional,
)

@decorator
def top(x):
    def inner():
        pass
    return inner

class Greeter(Base):
    def greet(self):
        return "hi"

    @property
    def name(self):
        import json
        return 1
"""

GO = """\
package main

import "fmt"
import (
	f "os"
	"strings"
)

type Server struct {
	a int
}

type Runner interface { Run() }

func (s *Server) Start() error {
	return nil
}

func (s Server) Stop() {}

func main() { fmt.Println(1) }
"""

JAVASCRIPT = """\
import { a, b } from "./x.js";
const path = require("path");

export function top(a) {
  return a;
}

class Greeter extends Base {
  constructor() { super(); }
  greet(x) {
    return "hi";
  }
}

const arrow = (x) => x * 2;
function* gen() {}
"""

TYPESCRIPT = """\
import type { Shape } from "./shape";
export function area(s: Shape): number { return 0; }
export default class Box<T> implements Shape {
  constructor(private v: T) {}
  get(): T { return this.v; }
}
interface Named { name(): string; }
abstract class A { abstract f(): void; g() {} }
const double = (n: number): number => n * 2;
"""

TSX = """\
import React from "react";
export function App(props: { name: string }) {
  return <div>{props.name}</div>;
}
const Item = ({ x }: { x: number }) => <li>{x}</li>;
"""

JAVA = """\
package a.b;
import java.util.List;
import static java.lang.Math.*;

public class Foo {
  public Foo() {}
  int bar(int x) {
    return x;
  }
  static class Inner { void baz() {} }
}
interface I { void m(); default void d() {} }
enum E { A; void e() {} }
"""

RUST = """\
use std::io::{self, Read};
extern crate serde;

struct Point { x: i32 }
enum Kind { A }
trait Shape {
    fn area(&self) -> f64;
    fn name(&self) -> &str { "shape" }
}
impl<T> Shape for Wrapper<T> {
    fn area(&self) -> f64 { 0.0 }
}
impl Point {
    pub fn new() -> Self {
        Point { x: 1 }
    }
}
fn main() {
    fn inner() {}
}
"""

RUBY = """\
require "json"
require_relative "lib/x"

module Shapes
  class Circle < Base
    def area(r)
      r * r
    end

    def self.unit; new; end
  end
end

def top; end
"""

C = """\
#include <stdio.h>
#include "util.h"

struct point { int x; };

static int *make(void) {
  return 0;
}

int main(int argc, char **argv) {
  return 0;
}
"""

CPP = """\
#include <vector>
#include "a.hpp"

namespace ns {
class Foo : public Base {
 public:
  Foo();
  int bar(int x) { return x; }
  virtual ~Foo() {}
};
struct S { void s() const {} };
template <typename T> T biggest(T a, T b) { return a; }
}

Foo::Foo() {}
int ns::Foo::baz() { return 1; }
"""


@pytest.mark.parametrize(
    ("path", "source", "functions", "imports"),
    [
        (
            "a.py",
            PYTHON,
            [
                fn("top", 7, 11),
                fn("inner", 9, 10),
                cls("Greeter", 13, 20),
                method("Greeter.greet", 14, 15),
                method("Greeter.name", 17, 20),
            ],
            ["import os", "from typing import (Any, Optional)", "import json"],
        ),
        (
            "main.go",
            GO,
            [
                cls("Server", 9, 11),
                cls("Runner", 13, 13),
                method("Server.Start", 15, 17),
                method("Server.Stop", 19, 19),
                fn("main", 21, 21),
            ],
            ['import "fmt"', 'import f "os"', 'import "strings"'],
        ),
        (
            "a.js",
            JAVASCRIPT,
            [
                fn("top", 4, 6),
                cls("Greeter", 8, 13),
                method("Greeter.constructor", 9, 9),
                method("Greeter.greet", 10, 12),
                fn("arrow", 15, 15),
                fn("gen", 16, 16),
            ],
            ['import { a, b } from "./x.js";', 'const path = require("path");'],
        ),
        (
            "a.ts",
            TYPESCRIPT,
            [
                fn("area", 2, 2),
                cls("Box", 3, 6),
                method("Box.constructor", 4, 4),
                method("Box.get", 5, 5),
                cls("A", 8, 8),
                method("A.g", 8, 8),
                fn("double", 9, 9),
            ],
            ['import type { Shape } from "./shape";'],
        ),
        ("a.tsx", TSX, [fn("App", 2, 4), fn("Item", 5, 5)], ['import React from "react";']),
        (
            "Foo.java",
            JAVA,
            [
                cls("Foo", 5, 11),
                method("Foo.Foo", 6, 6),
                method("Foo.bar", 7, 9),
                cls("Inner", 10, 10),
                method("Inner.baz", 10, 10),
                cls("I", 12, 12),
                method("I.d", 12, 12),
                cls("E", 13, 13),
                method("E.e", 13, 13),
            ],
            ["import java.util.List;", "import static java.lang.Math.*;"],
        ),
        (
            "lib.rs",
            RUST,
            [
                cls("Point", 4, 4),
                cls("Kind", 5, 5),
                cls("Shape", 6, 9),
                method("Shape.name", 8, 8),
                method("Wrapper.area", 11, 11),
                method("Point.new", 14, 16),
                fn("main", 18, 20),
                fn("inner", 19, 19),
            ],
            ["use std::io::{self, Read};", "extern crate serde;"],
        ),
        (
            "a.rb",
            RUBY,
            [
                cls("Shapes", 4, 12),
                cls("Circle", 5, 11),
                method("Circle.area", 6, 8),
                method("Circle.unit", 10, 10),
                fn("top", 14, 14),
            ],
            ['require "json"', 'require_relative "lib/x"'],
        ),
        (
            "a.c",
            C,
            [cls("point", 4, 4), fn("make", 6, 8), fn("main", 10, 12)],
            ["#include <stdio.h>", '#include "util.h"'],
        ),
        (
            "a.cpp",
            CPP,
            [
                cls("Foo", 5, 10),
                method("Foo.bar", 8, 8),
                method("Foo.~Foo", 9, 9),
                cls("S", 11, 11),
                method("S.s", 11, 11),
                fn("biggest", 12, 12),
                method("Foo::Foo", 15, 15),
                method("ns::Foo::baz", 16, 16),
            ],
            ["#include <vector>", '#include "a.hpp"'],
        ),
    ],
)
def test_the_outline_lists_functions_methods_classes_and_imports(
    path: str, source: str, functions: list[Symbol], imports: list[str]
) -> None:
    result = outline(path, source)
    assert result is not None
    assert list(result.functions) == functions
    assert list(result.imports) == imports
    assert result.language == language_for(path)
    assert syntax_errors(path, source) == []


def test_an_unknown_language_has_no_outline_and_no_syntax_errors() -> None:
    assert outline("notes.txt", "def f(:") is None
    assert syntax_errors("notes.txt", "def f(:") == []


def test_an_empty_file_has_an_empty_outline() -> None:
    assert outline("a.py", "") == Outline("python", (), ())


def test_a_file_with_errors_still_gets_an_outline_of_what_parses() -> None:
    result = outline("a.py", "def good():\n    return 1\n\ndef bad(:\n    pass\n")
    assert result is not None and result.functions[0] == fn("good", 1, 2)


def test_python_syntax_errors_name_the_line_and_column() -> None:
    assert syntax_errors("a.py", "def ok():\n    pass\n\ndef f(:\n    pass\n") == [
        SyntaxIssue(line=4, column=7, message="missing ')'")
    ]
    issues = syntax_errors("a.py", "x = 1\nif x\n    y = 2\n")
    assert [i.line for i in issues] == [2]


def test_javascript_syntax_errors_are_found() -> None:
    issues = syntax_errors("a.js", "const ok = 1;\nfunction f( {\n  return 1\n")
    assert issues and issues[0].line == 2
    assert syntax_errors("a.js", "let x = [1, 2;\n") == [
        SyntaxIssue(line=1, column=14, message="missing ']'")
    ]


def test_go_syntax_errors_are_found() -> None:
    issues = syntax_errors("main.go", "package main\n\nfunc main() {\n\tx := \n}\n")
    assert [(i.line, i.message) for i in issues] == [(4, "missing identifier")]


def test_an_error_node_quotes_the_text_it_could_not_parse() -> None:
    (issue,) = syntax_errors("a.py", "x = 1\nprint 'hello' world\n")
    assert issue.line == 2 and issue.message.startswith("syntax error near ")


@pytest.mark.parametrize(
    ("path", "broken"),
    [
        ("a.ts", "function f(: number {"),
        ("A.java", "class A { void f( { } }"),
        ("a.rs", "fn main() { let x = ; }"),
        ("a.rb", "def f(\n  1 +\nend end"),
        ("a.c", "int main( { return 0 }"),
        ("a.cpp", "class A { int f( };"),
    ],
)
def test_every_language_reports_broken_code(path: str, broken: str) -> None:
    assert syntax_errors(path, broken)


def test_columns_count_characters_not_bytes() -> None:
    (issue,) = syntax_errors("a.js", "const s = 'héllo'; let x = [1, 2;\n")
    assert issue.column == 33


def test_render_outline_is_one_line_of_imports_and_one_of_definitions() -> None:
    result = outline("a.py", PYTHON)
    assert result is not None
    assert render_outline(result) == (
        "imports: import os; from typing import (Any, Optional); import json\n"
        "functions: top (L7-L11), inner (L9-L10), class Greeter (L13-L20), Greeter.greet (L14-L15), "
        "Greeter.name (L17-L20)"
    )


def test_render_outline_drops_statement_semicolons_and_says_none_when_empty() -> None:
    result = outline("a.js", 'import x from "x";\n')
    assert result is not None
    assert render_outline(result) == 'imports: import x from "x"\nfunctions: (none)'
    assert render_outline(Outline("python", (), ())) == "imports: (none)\nfunctions: (none)"


def test_an_error_after_a_long_run_of_comment_lines_is_found_at_its_place() -> None:
    # Comment lines are blanked before parsing (tree-sitter-python is quadratic in them): positions hold.
    source = "# é ünïcode comment\n" * 3000 + "def f(:\n    # inside\n    pass\n"

    issues = syntax_errors("big.py", source)

    assert issues and issues[0].line == 3001
    assert syntax_errors("ok.py", "# c\n" * 3000 + "x = 1  # trailing\n") == []
