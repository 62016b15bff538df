"""hub.review.repomap: the repository map of a small package with tests, on real files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.core.errors import GitError
from hub.review.ranking import Terms, is_test, pagerank
from hub.review.repomap import build_map, clean_path, estimate_tokens, tracked_files
from hub.review.tags import CACHE_NAME, file_tags

PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/calc.py": '''\
"""Arithmetic."""
from pkg.util import normalize


def add(a, b):
    return normalize(a) + normalize(b)


def parse_duration(text):
    return normalize(int(text))


class Cache:
    def get(self, key):
        return normalize(key)

    def _evict(self):
        pass
''',
    "pkg/util.py": '''\
def normalize(value):
    """Used by every module."""
    return value
''',
    "pkg/shapes.py": "from pkg.util import normalize\n\n\ndef area(w, h):\n    return normalize(w) * normalize(h)\n",
    "pkg/report.py": "from pkg.util import normalize\n\n\ndef render_report(rows):\n    return [normalize(r) for r in rows]\n",
    "pkg/leaf.py": "def lonely_helper():\n    return 1\n",
    "tests/test_calc.py": "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "README.md": "# pkg\n",
}


def write(root: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(files)


@pytest.fixture
def package(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "repo"
    return root, write(root, PACKAGE)


def test_the_file_defining_the_function_the_task_names_ranks_first(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(root, files, words="Make `parse_duration` accept hours as well", budget_tokens=400)
    assert result.files[0] == "pkg/calc.py"
    assert result.ranked[0] == "pkg/calc.py"
    assert result.text.startswith("pkg/calc.py:\n")
    assert "  def parse_duration(text)\n" in result.text


def test_a_name_written_as_code_outranks_one_the_task_only_uses_as_a_word(
    package: tuple[Path, list[str]],
) -> None:
    root, files = package
    result = build_map(root, files, words="the report should use render_report()", budget_tokens=400)
    assert result.ranked[0] == "pkg/report.py"


def test_a_file_many_files_use_ranks_above_a_leaf(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(root, files, words="", budget_tokens=400)
    assert result.ranked.index("pkg/util.py") < result.ranked.index("pkg/leaf.py")
    assert result.ranked[0] == "pkg/util.py"


def test_methods_are_shown_under_their_class_with_their_signatures(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(root, files, words="the `Cache` get method", budget_tokens=400)
    assert "pkg/calc.py:\n" in result.text
    assert "  class Cache:\n    def get(self, key)\n" in result.text


def test_a_private_definition_comes_after_the_public_ones_of_its_file(
    package: tuple[Path, list[str]],
) -> None:
    root, files = package
    result = build_map(root, files, words="the `Cache` class", budget_tokens=10_000)
    shown = result.text.splitlines()
    assert shown.index("    def get(self, key)") < shown.index("    def _evict(self)")


def test_pinned_files_come_first(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(
        root, files, words="Make `parse_duration` accept hours", budget_tokens=400, pinned=["pkg/leaf.py"]
    )
    assert result.files[0] == "pkg/leaf.py"
    assert result.ranked[0] == "pkg/leaf.py"
    assert result.text.startswith("pkg/leaf.py")


def test_a_pinned_file_outside_the_listed_files_is_still_mapped(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(
        root, [f for f in files if f != "pkg/leaf.py"], words="", budget_tokens=400, pinned=["pkg/leaf.py"]
    )
    assert result.files[0] == "pkg/leaf.py"


def test_the_same_input_gives_the_same_map(package: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, files = package
    words = "Cache get should normalize keys; see `add`"
    first = build_map(root, files, words=words, budget_tokens=150)
    again = build_map(root, list(reversed(files)), words=words, budget_tokens=150)
    cached = build_map(root, files, words=words, budget_tokens=150, cache_dir=tmp_path / "cache")
    from_cache = build_map(root, files, words=words, budget_tokens=150, cache_dir=tmp_path / "cache")
    assert first == again == cached == from_cache


_BUDGET_ROOT: list[tuple[Path, list[str]]] = []


def budget_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    if not _BUDGET_ROOT:
        root = tmp_path_factory.mktemp("budget")
        many = dict(PACKAGE)
        for i in range(30):
            many[f"pkg/mod_{i}.py"] = (
                f"from pkg.util import normalize\n\n\nclass Thing{i}:\n"
                f"    def method_{i}(self, first_argument, second_argument=None):\n        return normalize({i})\n"
            )
        _BUDGET_ROOT.append((root, write(root, many)))
    return _BUDGET_ROOT[0]


def by_words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize("count_tokens", [estimate_tokens, by_words, len])
def test_the_map_never_exceeds_its_budget(
    tmp_path_factory: pytest.TempPathFactory, count_tokens: Callable[[str], int]
) -> None:
    root, files = budget_package(tmp_path_factory)
    cache = tmp_path_factory.getbasetemp() / "budget-cache"

    @settings(max_examples=60, deadline=None)
    @given(budget=st.integers(min_value=0, max_value=3_000), pinned=st.booleans())
    def check(budget: int, pinned: bool) -> None:
        result = build_map(
            root,
            files,
            words="the Thing3 method",
            budget_tokens=budget,
            pinned=["pkg/leaf.py", "pkg/mod_7.py"] if pinned else (),
            cache_dir=cache,
            count_tokens=count_tokens,
        )
        assert result.tokens == count_tokens(result.text) <= budget
        for file in result.files:
            assert file in result.text
        # A definition line never appears before its file's path line.
        assert not result.text.startswith(" ")

    check()


def test_a_budget_that_fits_everything_shows_every_file(package: tuple[Path, list[str]]) -> None:
    root, files = package
    result = build_map(root, files, words="", budget_tokens=100_000)
    assert sorted(result.files) == sorted(files)


def test_a_symlink_to_a_file_outside_the_root_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, {"pkg/ok.py": "def fine():\n    pass\n"})
    outside = tmp_path / "outside"
    write(outside, {"secret.py": "def secret_function():\n    pass\n"})
    (root / "pkg" / "link.py").symlink_to(outside / "secret.py")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    files = [
        "pkg/ok.py",
        "pkg/link.py",
        "linked/secret.py",
        "../outside/secret.py",
        str(outside / "secret.py"),
    ]
    result = build_map(root, files, words="secret_function", budget_tokens=10_000)
    assert "secret" not in result.text
    assert result.ranked == ("pkg/ok.py",)


def test_a_symlink_inside_the_root_is_not_followed_either(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, {"pkg/real.py": "def real_one():\n    pass\n"})
    (root / "pkg" / "alias.py").symlink_to(root / "pkg" / "real.py")
    result = build_map(root, ["pkg/real.py", "pkg/alias.py"], words="", budget_tokens=10_000)
    assert result.ranked == ("pkg/real.py",)


def test_an_undecodable_file_is_skipped_with_its_path_still_listed(package: tuple[Path, list[str]]) -> None:
    root, files = package
    (root / "pkg" / "broken.py").write_bytes(b"def looks_fine():\n    return '\xff\xfe'\n")
    result = build_map(root, [*files, "pkg/broken.py"], words="", budget_tokens=10_000)
    assert "pkg/broken.py\n" in result.text
    assert "looks_fine" not in result.text


def test_a_file_with_a_syntax_error_keeps_the_definitions_around_it(package: tuple[Path, list[str]]) -> None:
    root, files = package
    (root / "pkg" / "half.py").write_text(
        "def before_it():\n    pass\n\ndef broken(:\n\ndef after_it():\n    pass\n"
    )
    result = build_map(root, [*files, "pkg/half.py"], words="", budget_tokens=10_000)
    assert "def before_it()" in result.text
    assert "def after_it()" in result.text


def test_a_file_over_the_size_cap_is_listed_not_read(package: tuple[Path, list[str]]) -> None:
    root, files = package
    (root / "pkg" / "huge.py").write_text("def enormous():\n    pass\n" + "x = 1\n" * 200)
    result = build_map(root, [*files, "pkg/huge.py"], words="", budget_tokens=10_000, max_file_bytes=500)
    assert "pkg/huge.py\n" in result.text
    assert "enormous" not in result.text


def test_vendored_generated_and_binary_files_are_left_out(package: tuple[Path, list[str]]) -> None:
    root, files = package
    extra = {
        "node_modules/lib/index.js": "function vendored() {}\n",
        ".venv/lib/site.py": "def venv_thing():\n    pass\n",
        "build/lib/pkg/calc.py": "def built():\n    pass\n",
        "pkg/__pycache__/calc.py": "def cached():\n    pass\n",
        "docs/logo.png": "not really a png",
        "web/app.min.js": "function minified(){}",
    }
    write(root, extra)
    result = build_map(root, [*files, *extra], words="", budget_tokens=100_000)
    assert set(result.ranked) == set(files)


def test_a_test_file_ranks_below_a_source_file_of_the_same_score_unless_the_words_name_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    same = "def standalone_helper():\n    return 1\n"
    files = write(root, {"tests/test_twin.py": same, "twin.py": same})
    assert build_map(root, files, words="", budget_tokens=1_000).ranked == ("twin.py", "tests/test_twin.py")
    named = build_map(root, files, words="fix tests/test_twin.py", budget_tokens=1_000)
    assert named.ranked[0] == "tests/test_twin.py"


def test_the_cache_is_written_and_a_changed_file_is_read_again(
    package: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, files = package
    cache = tmp_path / "cache"
    build_map(root, files, words="", budget_tokens=10_000, cache_dir=cache)
    stored = json.loads((cache / CACHE_NAME).read_text(encoding="utf-8"))
    assert "pkg/calc.py" in stored["files"]
    (root / "pkg" / "leaf.py").write_text(
        "def lonely_helper():\n    return 1\n\n\ndef fresh_one():\n    return 2\n"
    )
    result = build_map(root, files, words="", budget_tokens=10_000, cache_dir=cache)
    assert "def fresh_one()" in result.text


def test_a_file_rewritten_with_its_old_size_and_mtime_is_parsed_again(
    package: tuple[Path, list[str]], tmp_path: Path
) -> None:
    # The map is built over a task's worktree, which the model's code writes and whose mtimes it can set:
    # the cache, shared by the repository's tasks, must answer for the content, never for (size, mtime).
    root, files = package
    cache = tmp_path / "cache"
    leaf = root / "pkg" / "leaf.py"
    before = leaf.stat()
    build_map(root, files, words="", budget_tokens=10_000, cache_dir=cache)
    forged = "def lonely_hacker():\n    return 1\n"
    assert len(forged.encode()) == before.st_size
    leaf.write_text(forged, encoding="utf-8")
    os.utime(leaf, ns=(before.st_atime_ns, before.st_mtime_ns))

    result = build_map(root, files, words="", budget_tokens=10_000, cache_dir=cache)

    assert "def lonely_hacker()" in result.text and "lonely_helper" not in result.text
    stored = json.loads((cache / CACHE_NAME).read_text(encoding="utf-8"))["files"]["pkg/leaf.py"]
    assert stored["sha256"] == hashlib.sha256(forged.encode()).hexdigest()


def test_linked_only_shows_the_pinned_files_and_what_they_use_or_what_uses_them(
    package: tuple[Path, list[str]],
) -> None:
    root, files = package
    calc = build_map(root, files, words="", budget_tokens=10_000, pinned=["pkg/calc.py"], linked_only=True)
    # calc uses util's normalize; nothing uses calc but its test, and a test is what it tests.
    assert set(calc.files) == {"pkg/calc.py", "pkg/util.py"}
    util = build_map(root, files, words="", budget_tokens=10_000, pinned=["pkg/util.py"], linked_only=True)
    assert set(util.files) == {"pkg/util.py", "pkg/calc.py", "pkg/shapes.py", "pkg/report.py"}
    leaf = build_map(root, files, words="", budget_tokens=10_000, pinned=["pkg/leaf.py"], linked_only=True)
    assert leaf.files == ("pkg/leaf.py",)


def test_a_corrupt_cache_is_ignored(package: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, files = package
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / CACHE_NAME).write_text("{not json", encoding="utf-8")
    result = build_map(root, files, words="", budget_tokens=10_000, cache_dir=cache)
    assert "def lonely_helper()" in result.text
    assert json.loads((cache / CACHE_NAME).read_text(encoding="utf-8"))["files"]


def test_tracked_files_are_what_git_tracks(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, {"a.py": "x = 1\n", "sub dir/b.py": "y = 2\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "a.py", "sub dir/b.py"], check=True)
    (root / "untracked.py").write_text("z = 3\n")
    assert sorted(tracked_files(root)) == ["a.py", "sub dir/b.py"]


def test_tracked_files_outside_a_repository_is_a_git_error(tmp_path: Path) -> None:
    with pytest.raises(GitError):
        tracked_files(tmp_path / "missing")


@pytest.mark.parametrize(
    ("path", "clean"),
    [
        ("pkg/a.py", "pkg/a.py"),
        ("./pkg//a.py", "pkg/a.py"),
        ("../a.py", None),
        ("/etc/passwd", None),
        ("pkg/../../a.py", None),
        ("node_modules/x/a.js", None),
        ("src/thing.egg-info/PKG-INFO", None),
        ("img/logo.PNG", None),
        ("", None),
    ],
)
def test_paths_are_cleaned_and_those_leaving_the_repository_refused(path: str, clean: str | None) -> None:
    assert clean_path(path) == clean


def test_pagerank_sums_to_one_and_ranks_the_hub_of_a_star_first() -> None:
    nodes = ["a", "b", "c", "hub"]
    edges = {"a": {"hub": 1.0}, "b": {"hub": 1.0}, "c": {"hub": 1.0}}
    ranks = pagerank(nodes, edges, {})
    assert abs(sum(ranks.values()) - 1) < 1e-9
    assert max(ranks, key=lambda n: ranks[n]) == "hub"


def test_pagerank_restarts_where_it_is_personalised() -> None:
    nodes = ["a", "b", "c"]
    edges = {"a": {"b": 1.0}, "b": {"c": 1.0}, "c": {"a": 1.0}}
    ranks = pagerank(nodes, edges, {"a": 1.0})
    assert ranks["a"] > ranks["b"] > ranks["c"]


def test_task_words_split_code_names_from_plain_words() -> None:
    terms = Terms.of("Make `add` and parse_args() handle TagCache; the cache map, see pkg/calc.py")
    assert {"add", "parse_args", "tagcache"} <= terms.names
    assert "cache" not in terms.names
    assert {"cache", "map", "parse", "args", "tag"} <= terms.words
    assert "the" not in terms.words
    assert terms.names_file("pkg/calc.py")
    assert not terms.names_file("pkg/other.py")


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("tests/test_a.py", True),
        ("pkg/test_a.py", True),
        ("pkg/a_test.go", True),
        ("src/a.test.ts", True),
        ("src/a.spec.js", True),
        ("conftest.py", True),
        ("pkg/a.py", False),
        ("pkg/testament.py", False),
    ],
)
def test_test_files_are_known_by_folder_or_name(path: str, test: bool) -> None:
    assert is_test(path) is test


@pytest.mark.parametrize(
    ("path", "source", "signatures"),
    [
        (
            "a.py",
            "class Cache(Base):\n    @property\n    def get(self, key,  # why\n            default=None) -> int:\n"
            "        def inner():\n            pass\n        return key\n",
            [("Cache", 0, "class Cache(Base):"), ("Cache.get", 1, "def get(self, key, default=None) -> int")],
        ),
        (
            "a.go",
            "package a\ntype Cache struct {\n\tx int\n}\nfunc (c *Cache) Get(key string) string {\n\treturn key\n}\n",
            [("Cache", 0, "type Cache struct"), ("Cache.Get", 0, "func (c *Cache) Get(key string) string")],
        ),
        (
            "a.ts",
            "export class Cache extends Base {\n  get(key: string): string { return key }\n}\n"
            "const add = (a: number, b: number): number => a + b;\n",
            [
                ("Cache", 0, "class Cache extends Base"),
                ("Cache.get", 1, "get(key: string): string"),
                ("add", 0, "add = (a: number, b: number): number =>"),
            ],
        ),
        (
            "A.java",
            "class Cache {\n  int get(String key) { return 1; }\n}\n",
            [("Cache", 0, "class Cache"), ("Cache.get", 1, "int get(String key)")],
        ),
        (
            "a.rs",
            "pub struct Cache { x: u32 }\nimpl Cache {\n    pub fn get(&self, key: &str) -> u32 { 1 }\n}\n",
            [("Cache", 0, "pub struct Cache"), ("Cache.get", 0, "pub fn get(&self, key: &str) -> u32")],
        ),
    ],
)
def test_definitions_are_signature_lines_without_nested_functions(
    path: str, source: str, signatures: list[tuple[str, int, str]]
) -> None:
    tags = file_tags(path, source)
    assert tags is not None
    assert [(d.name, d.depth, d.signature) for d in tags.definitions] == signatures


def test_references_are_names_used_not_local_variables_or_own_definitions() -> None:
    tags = file_tags(
        "a.py",
        "from pkg.util import normalize\n\n\ndef area(width):\n    total = normalize(width)\n"
        "    return total.scaled\n",
    )
    assert tags is not None
    assert set(tags.references) == {"normalize", "scaled"}
    assert tags.references["normalize"] == 2


def test_a_file_whose_text_holds_the_tasks_words_ranks_above_one_that_does_not(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = write(
        root,
        {
            "net/fetch.py": "def get_page(url):\n    # Retries with an exponential backoff between attempts.\n    return url\n",
            "net/parse.py": "def read_page(text):\n    # Splits the page into its parts.\n    return text\n",
        },
    )
    result = build_map(root, files, words="the backoff between attempts is too short", budget_tokens=1_000)
    assert result.ranked[0] == "net/fetch.py"


def test_a_file_every_file_uses_does_not_lead_a_map_whose_words_point_elsewhere(
    package: tuple[Path, list[str]],
) -> None:
    root, files = package
    assert build_map(root, files, words="", budget_tokens=400).ranked[0] == "pkg/util.py"
    result = build_map(root, files, words="the report should list its rows sorted", budget_tokens=400)
    assert result.ranked[0] == "pkg/report.py"
    assert result.files[0] == "pkg/report.py"
