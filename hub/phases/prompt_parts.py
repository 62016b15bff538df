"""The phases' side of the prompt templates (`hub.core.templates`: finding and rendering them): lists and
issues as markdown, and the review request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.relpaths import acceptance_file, behaviour_file, refusal
from hub.core.templates import fragment, render, template

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hub.state.contract import Contract, Issue

# The loader, as the phases have always reached it (`prompts.render(...)`).
__all__ = ["bullets", "fragment", "issue_lines", "render", "render_review_request", "template"]


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


def render_review_request(
    repo_root: Path, contract: Contract, diff: str, rebuttal: str = "", report_path: str = "JUDGE_REPORT.json"
) -> str:
    """REVIEW_REQUEST.md: `report_path` is where the hub reads the judge's report (the task's own folder).
    Changed files that alter how git, CI or agents behave come first, marked, so the judge reads them
    before anything else."""
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
        changed_files=bullets(_marked(data.get("changed_files", []), contract)),
        diff=diff.strip() or "(empty diff)",
        rebuttal=rebuttal.strip() or "(none)",
        report_path=report_path,
    )


def _marked(files: list[str], contract: Contract) -> list[str]:
    """The changed files as the judge should read them: the acceptance tests the change rewrites first
    (the task named them, or the task could not pass on its own tests), then behaviour files, then files
    the task may not write (the one matcher says so; only a person's commit puts one there), then the rest."""
    constraints = contract["constraints"]
    commands = contract["specification"].get("acceptance_commands") or []
    tests, first, outside, rest = [], [], [], []
    for f in files:
        if acceptance_file(f, commands) is not None:
            tests.append(
                f"**{f}** (an acceptance test: this change rewrites what decides whether the task passes; "
                "read it first, and check that the tests still ask what the task asks)"
            )
        elif behaviour_file(f) is not None:
            first.append(f"**{f}** (changes how git, CI or coding agents behave: read it first)")
        elif refusal(f, constraints["allowed_paths"], constraints["forbidden_paths"]) is not None:
            outside.append(
                f"{f} (outside the task's allowed paths: not the implementer's; check who wrote it)"
            )
        else:
            rest.append(f)
    return tests + first + outside + rest
