"""The rules tools of `hub mcp serve` (context-sherpa's names and inputs): the repository's ast-grep
rules, scans with them, and the community catalog. Each is one call into `hub.review.rules`,
`hub.review.scan` or `hub.review.catalog`, the functions `hub rules` calls."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from hub.faces.mcp_common import ContextFor, tool_errors
from hub.review import catalog as rules_catalog
from hub.review import rules, scan

if TYPE_CHECKING:
    from hub.phases.context import Context

RULES_TOOLS = (
    "initialize_ast_grep",
    "scan_code",
    "scan_path",
    "add_or_update_rule",
    "remove_rule",
    "search_community_rules",
    "get_community_rule_details",
    "import_community_rule",
)


def add_rules_tools(server: MCPServer, repo_root: Path, ctx: ContextFor) -> None:
    """Register the rules tools (RULES_TOOLS) on `server`, over the repository at `repo_root`."""

    @server.tool()
    def initialize_ast_grep() -> dict[str, Any]:
        """Create sgconfig.yml and the rules/ folder in the repository (needed before adding rules)."""
        with tool_errors():
            path = rules.init_project(repo_root)
            return {
                "success": True,
                "sgconfig": str(path),
                "rule_dirs": [str(d) for d in rules.project_rules(repo_root)],
            }

    @server.tool()
    def scan_code(
        code: Annotated[str, Field(description="the source text to scan")],
        language: Annotated[
            str, Field(description="its language, e.g. python, javascript, go (aliases: py, js)")
        ],
    ) -> dict[str, Any]:
        """Scan source code (not a file) with the packaged and the repository's ast-grep rules."""
        with tool_errors():
            findings = scan.scan_code(code, language, repo_root)
        return {"success": True, "issues": [_issue(f, with_file=False) for f in findings]}

    @server.tool()
    def scan_path(
        path: Annotated[str, Field(description="a file or folder, relative to the repository root")],
    ) -> dict[str, Any]:
        """Scan a file or folder of the repository (relative to its root) with the ast-grep rules."""
        with tool_errors():
            target = _inside(repo_root, path)
            findings = scan.scan_paths(repo_root, [str(target)])
        return {"success": True, "issues": [_issue(f, with_file=True) for f in findings]}

    @server.tool()
    def add_or_update_rule(
        rule_id: Annotated[str, Field(description="the rule's id (letters, digits, - and _); its file name")],
        rule_yaml: Annotated[
            str,
            Field(description="an ast-grep rule: id, language, severity, message, rule (pattern, kind, ...)"),
        ],
    ) -> dict[str, Any]:
        """Add or replace a repository rule; the YAML is checked by ast-grep first and refused if invalid."""
        with tool_errors():
            path = rules.add_or_update_rule(repo_root, rule_id, rule_yaml)
        return {"success": True, "rule_id": rule_id, "path": str(path)}

    @server.tool()
    def remove_rule(
        rule_id: Annotated[str, Field(description="the id of a rule in the repository's rules folder")],
    ) -> dict[str, Any]:
        """Delete a repository rule (a packaged rule is silenced instead with `severity: off`)."""
        with tool_errors():
            path = rules.remove_rule(repo_root, rule_id)
        return {"success": True, "rule_id": rule_id, "removed": str(path)}

    @server.tool()
    def search_community_rules(
        query: Annotated[
            str,
            Field(
                description="words to find in a rule's id, message and description (all must match; '' lists all)"
            ),
        ],
        language: Annotated[
            str | None, Field(description="only rules for this language (py, js, go, ...)")
        ] = None,
        tags: Annotated[
            str | list[str] | None,
            Field(description="only rules with every one of these tags: a list or 'a,b'"),
        ] = None,
    ) -> dict[str, Any]:
        """Search the community rule catalog (works offline). `rules` can be imported with
        import_community_rule; `active_rules` ship with agent-hub and run in every scan already."""
        wanted = [t.strip() for t in tags.split(",")] if isinstance(tags, str) else list(tags or [])
        wanted = [t for t in wanted if t]
        with tool_errors():
            found = rules_catalog.search_community_rules(query, language, wanted, catalog=_catalog(ctx()))
            active = rules_catalog.search_packaged_rules(query, language, wanted)
        return {"success": True, "rules": found, "active_rules": active}

    @server.tool()
    def get_community_rule_details(
        rule_id: Annotated[str, Field(description="an id from search_community_rules")],
    ) -> dict[str, Any]:
        """A community rule's description and full YAML."""
        with tool_errors():
            details = rules_catalog.get_community_rule_details(rule_id, catalog=_catalog(ctx()))
        return {"success": True, "rule": details}

    @server.tool()
    def import_community_rule(
        rule_id: Annotated[str, Field(description="an id from search_community_rules (its `rules` list)")],
    ) -> dict[str, Any]:
        """Copy a community rule into the repository's rules; it is active in the next scan."""
        with tool_errors():
            path = rules_catalog.import_community_rule(repo_root, rule_id, catalog=_catalog(ctx()))
        return {"success": True, "rule_id": rule_id, "path": str(path)}


def _issue(finding: Any, with_file: bool) -> dict[str, Any]:
    issue = {
        "ruleId": finding.rule_id,
        "message": finding.message,
        "line": finding.line,
        "column": finding.column,
        "severity": finding.severity,
    }
    if with_file:
        issue["file"] = finding.file
    return issue


def _inside(repo_root: Path, path: str) -> Path:
    """`path` (relative to the repository, or absolute) if it lies inside the repository."""
    root = repo_root.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{path} is outside the repository {root}; give a path inside it")
    if not target.exists():
        raise ToolError(f"{path} does not exist in {root}")
    return target


def _catalog(context: Context) -> Any:
    return rules_catalog.load_catalog(context.config.rules_catalog_url)
