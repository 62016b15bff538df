"""Prompt templates: `prompts/<name>.md`, a repository's own folder first, then the packaged one.

Templates use `string.Template` placeholders (`${requirements}`), so braces in code stay literal.
"""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

import hub

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hub.state.contract import Contract, Issue


def packaged_dir(kind: str) -> Path:
    """`hub/_data/<kind>` in a wheel, `<checkout>/<kind>` in an editable install."""
    installed = Path(hub.__file__).parent / "_data" / kind
    return installed if installed.is_dir() else Path(hub.__file__).parent.parent / kind


def template(repo_root: Path, name: str) -> str:
    for folder in (repo_root / "prompts", packaged_dir("prompts")):
        path = folder / f"{name}.md"
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                from hub.core.errors import ConfigError

                raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    raise FileNotFoundError(f"no prompt template {name}.md in {repo_root / 'prompts'} or the package")


def render(repo_root: Path, name: str, **values: Any) -> str:
    return Template(template(repo_root, name)).safe_substitute({k: str(v) for k, v in values.items()})


def bullets(items: list[Any], empty: str = "(none)") -> str:
    lines = []
    for item in items:
        lines.append(f"- {item}" if isinstance(item, str) else f"- {json.dumps(item, ensure_ascii=False)}")
    return "\n".join(lines) or empty


def issue_lines(issues: Sequence[Issue], empty: str = "(none)") -> str:
    lines = []
    for issue in issues:
        where = issue.get("file") or ""
        if where and issue.get("line"):
            where += f":{issue['line']}"
        sev = issue.get("severity", "")
        fix = f" Fix: {issue['fix_required']}" if issue.get("fix_required") else ""
        lines.append(f"- [{sev}] {where + ': ' if where else ''}{issue.get('description', '')}{fix}")
    return "\n".join(lines) or empty


def render_review_request(repo_root: Path, contract: Contract, diff: str, rebuttal: str = "") -> str:
    spec = contract["specification"]
    data = contract["handoff_data"]
    acceptance = data.get("acceptance_results") or []
    acceptance_text = (
        "\n".join(f"- `{r.get('command')}` → exit {r.get('exit_code')}" for r in acceptance)
        or "(no acceptance commands)"
    )
    local = data.get("local_review_issues") or []
    return render(
        repo_root,
        "review_request",
        task_id=contract["task_id"],
        title=contract.get("title", ""),
        attempt=contract["attempt"],
        requirements=bullets(spec["requirements"]),
        acceptance_criteria=bullets(spec.get("acceptance_criteria", [])),
        acceptance_results=acceptance_text,
        local_review_passed=str(data.get("local_review_passed"))
        + (f"; {data['local_review_note']}" if data.get("local_review_note") else ""),
        local_review_issues=issue_lines(local),
        changed_files=bullets(data.get("changed_files", [])),
        diff=diff.strip() or "(empty diff)",
        rebuttal=rebuttal.strip() or "(none)",
        report_path="_handoff/JUDGE_REPORT.json",
    )
