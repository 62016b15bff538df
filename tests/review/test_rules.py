"""The rules room: packaged rules and their tests, scanning code and paths, rule edits, the catalog."""

from __future__ import annotations

import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hub.core.errors import RuleError
from hub.review import catalog as rules_catalog
from hub.review import rules
from hub.review.scan import CODE_FILE, Finding, is_blocking, scan_code, scan_paths

REPO = Path(__file__).resolve().parents[2]
RULE_TESTS = REPO / "tests" / "rules"
PACKAGED_TESTS = RULE_TESTS / "rule-tests"
CATALOG_TESTS = RULE_TESTS / "catalog-tests"
CATALOG_RULES = REPO / "hub" / "review" / "community" / "rules"

PROJECT_RULE = """\
id: no-print
language: python
severity: warning
message: print($ARG) left in
note: use logging
rule:
  pattern: print($ARG)
metadata:
  tags: [hygiene, team]
"""


def _rule_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yml"))


def _cases(test_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name.removesuffix("-test.yml"), yaml.safe_load(path.read_text(encoding="utf-8")))
        for path in sorted(test_dir.glob("*-test.yml"))
    ]


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with an sgconfig.yml, one rule of its own and code that breaks it and a packaged rule."""
    rules.init_project(tmp_path)
    (tmp_path / "rules" / "no-print.yml").write_text(PROJECT_RULE, encoding="utf-8")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.py").write_text(
        "import os\n\nprint(os.name)\nresult = eval(expr)\n", encoding="utf-8"
    )
    (tmp_path / "app" / "clean.py").write_text("def f(x):\n    return x + 1\n", encoding="utf-8")
    return tmp_path


# --- the packaged rules and the catalog's rule files ----------------------------------------------------


def test_every_packaged_and_catalog_rule_passes_its_ast_grep_tests() -> None:
    done = subprocess.run(
        [rules.ast_grep_binary(), "test", "-c", str(RULE_TESTS / "sgconfig.yml"), "--skip-snapshot-tests"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    expected = len(_rule_files(REPO / "rules")) + len(_rule_files(CATALOG_RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{expected} passed; 0 failed" in done.stdout + done.stderr


@pytest.mark.parametrize("folder, tests", [(REPO / "rules", PACKAGED_TESTS), (CATALOG_RULES, CATALOG_TESTS)])
def test_every_rule_file_is_one_documented_rule_with_valid_and_invalid_cases(
    folder: Path, tests: Path
) -> None:
    files = _rule_files(folder)
    assert len(files) >= 15
    for path in files:
        # PyYAML must read every rule file ast-grep reads: the room loads them itself.
        docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        assert len(docs) == 1, path
        rule = docs[0]
        assert rule["id"] == path.stem
        assert {"language", "severity", "message", "note", "rule"} <= rule.keys(), path
        assert rule["severity"] in ("error", "warning"), path
        tags = rule["metadata"]["tags"]
        assert tags and all(isinstance(t, str) for t in tags), path
        if rule["severity"] == "error":
            assert "security" in tags, f"{path}: an error that does not halt the pipeline should be a warning"
        case = yaml.safe_load((tests / f"{path.stem}-test.yml").read_text(encoding="utf-8"))
        assert case["id"] == path.stem and case["valid"] and case["invalid"], path


def test_packaged_rules_cover_the_required_hazards() -> None:
    ids = {p.stem for p in _rule_files(REPO / "rules")}
    required = {
        "py-eval-exec", "py-subprocess-shell", "py-os-command", "py-sql-format", "py-hardcoded-secret",
        "js-eval", "ts-eval", "js-inner-html", "ts-inner-html", "go-ignored-error",
        "py-pickle-load", "py-yaml-unsafe-load", "py-requests-no-verify", "py-flask-debug",
    }  # fmt: skip
    assert required <= ids
    assert not ids & {p.stem for p in _rule_files(CATALOG_RULES)}, "catalog ids must not shadow packaged ones"


def _joined(snippets: list[str]) -> tuple[str, list[range]]:
    """The snippets in one file (one scan instead of one per snippet) and the lines each one holds."""
    code, spans, line = "", [], 1
    for snippet in snippets:
        text = snippet.rstrip("\n") + "\n\n\n"
        spans.append(range(line, line + snippet.rstrip("\n").count("\n") + 1))
        code += text
        line += text.count("\n")
    return code, spans


def test_in_process_engine_fires_exactly_where_the_rule_tests_say(tmp_path: Path) -> None:
    # The catalog rules join the packaged ones in a project, so both sets go through the same engine.
    rules.init_project(tmp_path)
    for path in _rule_files(CATALOG_RULES):
        (tmp_path / "rules" / path.name).write_bytes(path.read_bytes())
    languages = {r.id: r.language for r in rules.list_rules(tmp_path)}
    for rule_id, case in _cases(PACKAGED_TESTS) + _cases(CATALOG_TESTS):
        code, spans = _joined(case["invalid"])
        lines = {
            f.line for f in scan_code(code, languages[rule_id], tmp_path, engine="py") if f.rule_id == rule_id
        }
        for snippet, span in zip(case["invalid"], spans, strict=True):
            assert lines & set(span), f"{rule_id} missed:\n{snippet}"
        code, _ = _joined(case["valid"])
        noisy = [
            f for f in scan_code(code, languages[rule_id], tmp_path, engine="py") if f.rule_id == rule_id
        ]
        assert not noisy, f"{rule_id} is noisy on:\n{code}"


def test_in_process_engine_reports_what_the_cli_reports(tmp_path: Path) -> None:
    rules.init_project(tmp_path)
    for path in _rule_files(CATALOG_RULES):
        (tmp_path / "rules" / path.name).write_bytes(path.read_bytes())
    languages = {r.id: r.language for r in rules.list_rules(tmp_path)}
    # One file per language holding every invalid snippet: one CLI process per language.
    by_language: dict[str, list[str]] = {}
    for rule_id, case in _cases(PACKAGED_TESTS) + _cases(CATALOG_TESTS):
        by_language.setdefault(languages[rule_id], []).extend(case["invalid"])
    for language, snippets in by_language.items():
        code = "\n".join(snippets)
        in_process = scan_code(code, language, tmp_path, engine="py")
        cli = scan_code(code, language, tmp_path, engine="cli")
        assert in_process == cli, language
        assert in_process


# --- scanning --------------------------------------------------------------------------------------------


def test_scan_code_finds_eval_with_a_packaged_rule_on_its_line() -> None:
    code = "import sys\n\n\ndef run(x):\n    return eval(x)\n"
    [finding] = scan_code(code, "python")
    assert finding.rule_id == "py-eval-exec"
    assert (finding.line, finding.column, finding.file) == (5, 12, CODE_FILE)
    assert finding.severity == "error" and "security" in finding.tags and is_blocking(finding)
    assert "x" in finding.message and finding.note


def test_scan_code_takes_language_aliases_and_refuses_unknown_languages() -> None:
    assert [f.rule_id for f in scan_code("el.innerHTML = html\n", "ts")] == ["ts-inner-html"]
    assert scan_code("eval(x)\n", "py") == scan_code("eval(x)\n", "Python")
    assert scan_code("x = 1\n", "lua") == []
    with pytest.raises(RuleError, match="unknown language 'klingon'"):
        scan_code("x", "klingon")


def test_scan_code_uses_the_repositorys_rules_too(project: Path) -> None:
    found = scan_code("print(secret)\neval(x)\n", "python", project)
    assert [(f.rule_id, f.line, f.tags) for f in found] == [
        ("no-print", 1, ("hygiene", "team")),
        ("py-eval-exec", 2, ("security", "injection", "python")),
    ]
    assert found[0].message == "print(secret) left in"


def test_scan_paths_runs_packaged_and_project_rules_and_carries_tags(project: Path) -> None:
    findings = scan_paths(project)
    assert [(f.file, f.line, f.rule_id) for f in findings] == [
        ("app/main.py", 3, "no-print"),
        ("app/main.py", 4, "py-eval-exec"),
    ]
    no_print, evaluated = findings
    assert (
        no_print.tags == ("hygiene", "team") and no_print.severity == "warning" and not is_blocking(no_print)
    )
    assert no_print.note == "use logging" and no_print.message == "print(os.name) left in"
    assert evaluated.tags == ("security", "injection", "python") and is_blocking(evaluated)
    assert evaluated.column == 10


def test_scan_paths_scans_only_the_changed_files_and_skips_deleted_ones(project: Path) -> None:
    assert scan_paths(project, ["app/clean.py", "app/gone.py"]) == []
    assert scan_paths(project, ["app/gone.py"]) == []
    only = scan_paths(project, [str(project / "app" / "main.py")], include_packaged=False)
    assert [(f.file, f.rule_id) for f in only] == [("app/main.py", "no-print")]


def test_scan_paths_writes_nothing_into_the_repository(project: Path) -> None:
    before = _tree_bytes(project)
    scan_paths(project)
    assert _tree_bytes(project) == before


def test_scan_paths_without_any_rule_finds_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("eval(x)\n", encoding="utf-8")
    assert scan_paths(tmp_path, include_packaged=False) == []
    assert [f.rule_id for f in scan_paths(tmp_path)] == ["py-eval-exec"]


def test_a_project_rule_with_a_packaged_id_replaces_the_packaged_rule(project: Path) -> None:
    silenced = "id: py-eval-exec\nlanguage: python\nseverity: off\nrule:\n  pattern: eval($X)\n"
    # A person's choice (`hub rules add`): a tool call may not weaken a packaged security rule.
    rules.add_or_update_rule(project, "py-eval-exec", silenced, person=True)
    assert [f.rule_id for f in scan_paths(project)] == ["no-print"]
    assert [f.rule_id for f in scan_code("eval(x)\n", "python", project)] == []
    listed = [r for r in rules.list_rules(project) if r.id == "py-eval-exec"]
    assert [(r.source, r.severity) for r in listed] == [("project", "off")]


def test_a_broken_rule_on_disk_is_a_rule_error_naming_the_cause(project: Path) -> None:
    (project / "rules" / "broken.yml").write_text(
        "id: broken\nlanguage: python\nrule:\n  kind: no_such_kind\n", encoding="utf-8"
    )
    with pytest.raises(RuleError, match="no_such_kind"):
        scan_paths(project)


def test_rules_using_the_repositorys_util_rules_are_validated_and_run(project: Path) -> None:
    (project / "sgconfig.yml").write_text("ruleDirs: [rules]\nutilDirs: [utils]\n", encoding="utf-8")
    (project / "utils").mkdir()
    util = "id: print-call\nlanguage: python\nrule:\n  pattern: print($$$)\n"
    (project / "utils" / "print-call.yml").write_text(util, encoding="utf-8")
    rule = (
        "id: print-in-function\nlanguage: python\nseverity: warning\nmessage: print in a function\n"
        "rule:\n  matches: print-call\n  inside: {kind: function_definition, stopBy: end}\n"
    )
    rules.add_or_update_rule(project, "print-in-function", rule)
    code = "print(0)\n\ndef f():\n    print(1)\n"
    found = [(f.rule_id, f.line) for f in scan_code(code, "python", project)]
    assert ("print-in-function", 4) in found and ("print-in-function", 1) not in found
    with pytest.raises(RuleError, match="no-such-util"):
        rules.validate_rule(rule.replace("matches: print-call", "matches: no-such-util"), repo_root=project)


def test_is_blocking_needs_both_error_severity_and_the_security_tag() -> None:
    def finding(severity: str, tags: tuple[str, ...]) -> Finding:
        return Finding("r", severity, "m", "f.py", 1, 1, tags)

    assert is_blocking(finding("error", ("security",)))
    assert not is_blocking(finding("warning", ("security",)))
    assert not is_blocking(finding("error", ("correctness",)))


# --- the repository's rules ----------------------------------------------------------------------------


def test_init_project_creates_sgconfig_and_rules_once(tmp_path: Path) -> None:
    path = rules.init_project(tmp_path)
    assert path == tmp_path / "sgconfig.yml"
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == {
        "ruleDirs": ["rules"],
        "testConfigs": [{"testDir": "rule-tests"}],
    }
    assert (tmp_path / "rules").is_dir()
    path.write_text("ruleDirs: [lint]\n", encoding="utf-8")
    assert rules.init_project(tmp_path) == path
    assert path.read_text(encoding="utf-8") == "ruleDirs: [lint]\n"
    assert (tmp_path / "lint").is_dir()


def test_add_scan_remove_round_trips_through_the_rules_folder(project: Path) -> None:
    rule = "id: no-assert\nlanguage: python\nseverity: warning\nmessage: assert\nrule:\n  kind: assert_statement\n"
    (project / "app" / "check.py").write_text("assert ready\n", encoding="utf-8")
    path = rules.add_or_update_rule(project, "no-assert", rule)
    assert path == project / "rules" / "no-assert.yml"
    assert path.read_text(encoding="utf-8") == rule
    assert [f.rule_id for f in scan_paths(project, ["app/check.py"])] == ["no-assert"]

    updated = rule.replace("severity: warning", "severity: error")
    assert rules.add_or_update_rule(project, "no-assert", updated) == path
    assert [f.severity for f in scan_paths(project, ["app/check.py"])] == ["error"]

    assert rules.remove_rule(project, "no-assert") == path
    assert not path.exists()
    assert scan_paths(project, ["app/check.py"]) == []
    with pytest.raises(RuleError, match="no project rule 'no-assert'"):
        rules.remove_rule(project, "no-assert")


@pytest.mark.parametrize(
    "rule_yaml, complaint",
    [
        ("id: bad\nlanguage: python\nrule: [unclosed\n", "does not parse"),
        ("id: bad\nlanguage: python\nmessage: no rule\n", "missing: rule"),
        ("id: bad\nlanguage: klingon\nrule:\n  pattern: x\n", "unknown language 'klingon'"),
        ("id: bad\nlanguage: python\nrule:\n  kind: not_a_kind\n", "not_a_kind"),
        ("id: bad\nlanguage: python\nrule:\n  pattern: x\n  frobnicate: 1\n", "unknown field `frobnicate`"),
        ("id: other\nlanguage: python\nrule:\n  pattern: x\n", "does not match"),
        ("- just\n- a list\n", "YAML mapping"),
    ],
)
def test_an_invalid_rule_is_refused_and_nothing_changes(
    project: Path, rule_yaml: str, complaint: str
) -> None:
    (project / "rules" / "bad.yml").write_text(PROJECT_RULE.replace("no-print", "bad"), encoding="utf-8")
    before = _tree_bytes(project)
    with pytest.raises(RuleError, match=complaint):
        rules.add_or_update_rule(project, "bad", rule_yaml)
    assert _tree_bytes(project) == before


@pytest.mark.parametrize(
    "rule_id", ["../escape", "a/b", "/etc/passwd", "", ".hidden", "a\\b", "x" * 200, "a..b"]
)
def test_path_like_rule_ids_are_refused(project: Path, rule_id: str) -> None:
    before = _tree_bytes(project)
    with pytest.raises(RuleError, match="invalid rule id"):
        rules.add_or_update_rule(project, rule_id, f"id: {rule_id}\nlanguage: python\nrule:\n  pattern: x\n")
    with pytest.raises(RuleError, match="invalid rule id"):
        rules.remove_rule(project, rule_id)
    assert _tree_bytes(project) == before


@pytest.mark.parametrize("rule_id", ["CON", "con", "Nul", "aux.x", "COM1", "lpt9", "prn"])
def test_windows_device_names_are_refused_as_rule_ids(rule_id: str) -> None:
    with pytest.raises(RuleError, match="invalid rule id") as refused:
        rules.check_rule_id(rule_id)
    assert "Windows device name" in (refused.value.hint or "")


@pytest.mark.parametrize("rule_id", ["console", "nul-check", "com", "com10x", "auxiliary"])
def test_names_that_only_begin_like_a_device_are_rule_ids(rule_id: str) -> None:
    assert rules.check_rule_id(rule_id) == rule_id


def test_adding_a_rule_without_sgconfig_asks_for_initialization(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match=r"no sgconfig\.yml: call initialize_ast_grep first"):
        rules.add_or_update_rule(tmp_path, "no-print", PROJECT_RULE)
    assert list(tmp_path.iterdir()) == []


def test_packaged_rules_cannot_be_removed_but_can_be_silenced(project: Path) -> None:
    with pytest.raises(RuleError, match=r"packaged rule.*severity: off"):
        rules.remove_rule(project, "py-eval-exec")


def test_list_rules_shows_project_rules_first_then_packaged(project: Path) -> None:
    listed = rules.list_rules(project)
    assert listed[0].id == "no-print" and listed[0].source == "project"
    assert (
        listed[0].tags == ("hygiene", "team")
        and listed[0].path == (project / "rules" / "no-print.yml").resolve()
    )
    packaged = [r for r in listed if r.source == "packaged"]
    assert len(packaged) == len(_rule_files(REPO / "rules"))
    assert all(r.path.parent == rules.packaged_rules_dir() for r in packaged)
    assert json.loads(json.dumps([r.as_dict() for r in listed]))[0]["tags"] == ["hygiene", "team"]


def test_validate_rule_returns_the_parsed_rule() -> None:
    rule = rules.validate_rule(PROJECT_RULE, "no-print")
    assert rule["id"] == "no-print" and rule["metadata"]["tags"] == ["hygiene", "team"]


# --- the community catalog -----------------------------------------------------------------------------


def test_catalog_index_matches_its_rule_files() -> None:
    shipped = json.loads((REPO / "hub" / "review" / "community" / "index.json").read_text(encoding="utf-8"))
    assert shipped == rules_catalog.build_index(), (
        "regenerate with: .venv/bin/python -c 'from hub.review.catalog import write_index; write_index()'"
    )
    assert 10 <= len(shipped["rules"]) <= 20
    assert len({e["language"] for e in shipped["rules"]}) >= 5


def test_catalog_search_by_query_language_and_tags() -> None:
    assert [e["id"] for e in rules_catalog.search_community_rules("sql")] == ["java-sql-concat"]
    by_language = rules_catalog.search_community_rules("", language="golang")
    assert {e["id"] for e in by_language} == {"go-defer-in-loop", "go-tls-insecure-skip-verify"}
    tagged = rules_catalog.search_community_rules("", language="py", tags=["security"])
    assert tagged and all(e["language"] == "python" and "security" in e["tags"] for e in tagged)
    assert rules_catalog.search_community_rules("", tags="security") == rules_catalog.search_community_rules(
        "", tags=["security"]
    )
    assert rules_catalog.search_community_rules("timeout requests")[0]["id"] == "py-http-no-timeout"
    assert rules_catalog.search_community_rules("no such words anywhere") == []
    entry = rules_catalog.search_community_rules("gets")[0]
    assert {"id", "tool", "path", "language", "severity", "message", "description", "tags"} <= entry.keys()


def test_catalog_rule_details_hold_the_rule_yaml() -> None:
    details = rules_catalog.get_community_rule_details("go-tls-insecure-skip-verify")
    assert details["severity"] == "error" and "security" in details["tags"]
    assert yaml.safe_load(details["rule_yaml"])["id"] == "go-tls-insecure-skip-verify"
    with pytest.raises(RuleError, match="no community rule 'nope'"):
        rules_catalog.get_community_rule_details("nope")


def test_importing_a_community_rule_makes_it_active_in_the_next_scan(project: Path) -> None:
    (project / "app" / "tmp.py").write_text("import tempfile\npath = tempfile.mktemp()\n", encoding="utf-8")
    assert scan_paths(project, ["app/tmp.py"]) == []
    path = rules_catalog.import_community_rule(project, "py-tempfile-mktemp")
    assert path == (project / "rules" / "py-tempfile-mktemp.yml").resolve()
    [finding] = scan_paths(project, ["app/tmp.py"])
    assert (finding.rule_id, finding.line, finding.tags) == (
        "py-tempfile-mktemp",
        2,
        ("security", "race-condition", "python"),
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_catalog_url_falls_back_to_the_packaged_catalog(tmp_path: Path) -> None:
    catalog = rules_catalog.load_catalog(f"http://127.0.0.1:{_closed_port()}/index.json", tmp_path, timeout=2)
    assert catalog.source == "packaged"
    assert rules_catalog.search_community_rules("sql", catalog=catalog)[0]["id"] == "java-sql-concat"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def catalog_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server holding a one-rule catalog; yields its index URL and the served folder."""
    served = tmp_path / "served"
    (served / "r").mkdir(parents=True)
    rule = "id: team-no-print\nlanguage: python\nseverity: warning\nmessage: print\nrule:\n  pattern: print($$$)\n"
    (served / "r" / "team-no-print.yml").write_text(rule, encoding="utf-8")
    index = {
        "version": 1,
        "rules": [
            {"id": "team-no-print", "tool": "ast-grep", "path": "r/team-no-print.yml", "language": "python",
             "severity": "warning", "message": "print", "description": "no prints", "tags": ["hygiene"]},
            {"id": "other-tool", "tool": "semgrep", "path": "x.yml"},
        ],
    }  # fmt: skip
    (served / "index.json").write_text(json.dumps(index), encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(served))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/index.json", served
        finally:
            server.shutdown()
            thread.join(timeout=5)


def test_a_catalog_url_is_fetched_cached_and_used_offline(
    catalog_server: tuple[str, Path], tmp_path: Path, project: Path
) -> None:
    url, served = catalog_server
    cache = tmp_path / "cache"
    catalog = rules_catalog.load_catalog(url, cache)
    assert catalog.source == url
    assert [e["id"] for e in rules_catalog.search_community_rules("", catalog=catalog)] == ["team-no-print"]

    # The server's copy changes and then vanishes: a fresh cache is used without asking, a stale one on failure.
    (served / "index.json").unlink()
    assert rules_catalog.load_catalog(url, cache).entries == catalog.entries
    stale = rules_catalog.load_catalog(url, cache, max_age=0)
    assert stale.source == url and stale.entries == catalog.entries

    path = rules_catalog.import_community_rule(project, "team-no-print", catalog=stale)
    assert path.name == "team-no-print.yml"
    assert "team-no-print" in {f.rule_id for f in scan_paths(project, ["app/main.py"])}


# --- the command line (each call is a process start, so a few calls cover every verb) -------------------


def _hub(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(HUB_LOG_FORMAT="json", HUB_LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, "-m", "hub", "--repo", str(repo), "rules", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def test_cli_rules_refuses_to_add_before_init_with_exit_1(tmp_path: Path) -> None:
    done = _hub(tmp_path, "add", "-", stdin=PROJECT_RULE)
    assert done.returncode == 1
    assert "no sgconfig.yml" in done.stderr and done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_cli_rules_add_scan_import_remove(project: Path) -> None:
    rule = "id: no-assert\nlanguage: python\nseverity: warning\nmessage: assert\nrule:\n  kind: assert_statement\n"
    (project / "app" / "check.py").write_text("assert ready\n", encoding="utf-8")
    added = _hub(project, "add", "-", stdin=rule)
    assert added.returncode == 0, added.stderr
    assert Path(added.stdout.strip()) == (project / "rules" / "no-assert.yml").resolve()

    (project / "app" / "defaults.py").write_text("def f(seen=[]):\n    return seen\n", encoding="utf-8")
    imported = _hub(project, "import", "py-mutable-default-arg")
    assert imported.returncode == 0, imported.stderr

    scanned = _hub(project, "scan", "--json")
    assert scanned.returncode == 0, scanned.stderr
    found = {(f["file"], f["rule_id"], f["blocking"]) for f in json.loads(scanned.stdout)}
    assert found == {
        ("app/check.py", "no-assert", False),
        ("app/defaults.py", "py-mutable-default-arg", False),
        ("app/main.py", "no-print", False),
        ("app/main.py", "py-eval-exec", True),
    }

    removed = _hub(project, "remove", "no-assert")
    assert removed.returncode == 0 and not (project / "rules" / "no-assert.yml").exists()


def test_an_ast_grep_ignore_comment_in_the_code_does_not_silence_the_rules(project: Path) -> None:
    # The code under review must not decide which rules apply to it: ast-grep obeys these comments.
    code = "eval(a)  # ast-grep-ignore\n# ast-grep-ignore: py-eval-exec\neval(b)\n"
    (project / "app" / "sneaky.py").write_text(code, encoding="utf-8")

    found = scan_paths(project, ["app/sneaky.py", "app/main.py"])
    in_memory = scan_code(code, "python", project, engine="cli")

    assert [(f.file, f.line, f.column) for f in found if f.rule_id == "py-eval-exec"] == [
        ("app/main.py", 4, 10),
        ("app/sneaky.py", 1, 1),
        ("app/sneaky.py", 3, 1),
    ]
    assert [(f.line, f.rule_id) for f in in_memory] == [(1, "py-eval-exec"), (3, "py-eval-exec")]
    assert (project / "app" / "sneaky.py").read_text(encoding="utf-8") == code


@pytest.mark.parametrize("name", ["rules/latin1.yml", "sgconfig.yml"])
def test_a_rule_file_or_sgconfig_that_is_not_utf8_is_a_rule_error_naming_it(project: Path, name: str) -> None:
    (project / name).write_bytes(b"id: caf\xe9\nlanguage: python\nrule:\n  pattern: print($A)\n")
    with pytest.raises(RuleError, match=rf"{name.split('/')[-1]}: not valid YAML: 'utf-8' codec"):
        rules.list_rules(project)
