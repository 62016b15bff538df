"""A new task's contract: `new_contract` from its fields, `proposal_fields` from a markdown proposal
(a proposal file, a backlog entry), `make_task_id` for its name. Pure: `hub.state.store.save` writes it."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hub.core.config import DEFAULT_MAX_CHANGED_FILES
from hub.core.errors import ContractInvalid
from hub.core.text import one_line
from hub.state.contract import COMPLEXITIES, SCHEMA_VERSION, iso
from hub.state.machine import PENDING_IMPLEMENTER
from hub.state.schema import validate

if TYPE_CHECKING:
    from hub.state.contract import Contract, Limits, Specification, TaskFields


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "task"


def make_task_id(project: str, title: str, now: datetime) -> str:
    """`PROJECT-MMDDHHMMSS-slug`."""
    return f"{slugify(project, 24)}-{now.astimezone(UTC).strftime('%m%d%H%M%S')}-{slugify(title)}"


DEFAULT_LIMITS: Limits = {
    "max_rebuttals": 2,
    "max_review_cycles": 3,
    "timeout_minutes": {"implementer": 30, "local_review": 15, "judge": 60},
    "token_budget": 500_000,
    "cost_ceiling_usd": 5.0,
    "max_changed_files": DEFAULT_MAX_CHANGED_FILES,
}


def new_contract(
    *,
    project: str,
    title: str,
    requirements: list[str],
    now: datetime,
    roles: dict[str, str],
    target_file: str | None = None,
    source_files: list[str] | None = None,
    acceptance_criteria: list[str] | None = None,
    acceptance_commands: list[str] | None = None,
    allowed_paths: list[str] | None = None,
    forbidden_paths: list[str] | None = None,
    complexity: str = "minor",
    max_diff_lines: int | None = None,
    global_timeout_hours: float = 4.0,
) -> Contract:
    """A fresh, valid contract in `pending_implementer`."""
    source_files = list(source_files or [])
    # A task naming no file at all: the implementer finds them (hub.phases.attempt_files).
    find_files = not target_file and not source_files and not allowed_paths
    if allowed_paths is None:
        allowed_paths = sorted({p for p in [target_file, *source_files] if p})
    specification: Specification = {
        "source_files": source_files,
        "target_file": target_file,
        "requirements": list(requirements),
        "acceptance_criteria": list(acceptance_criteria or []),
        "acceptance_commands": list(acceptance_commands or []),
    }
    if find_files:
        specification["find_files"] = True
    contract: Contract = {
        "schema_version": SCHEMA_VERSION,
        "task_id": make_task_id(project, one_line(title), now),
        "title": one_line(title),
        "project": project,
        "complexity": complexity,
        "status": PENDING_IMPLEMENTER,
        "status_reason": "created",
        "attempt": 1,
        "timestamps": {
            "created_at": iso(now),
            "updated_at": iso(now),
            "deadline_at": iso(now + timedelta(hours=global_timeout_hours)),
        },
        "git": {"repo_root": None, "base_branch": None, "task_branch": None, "base_commit": None},
        "roles": {
            "implementer": roles.get("implementer", ""),
            "local_reviewer": roles.get("local_reviewer", ""),
            "judge": roles.get("judge", ""),
        },
        "limits": copy.deepcopy(DEFAULT_LIMITS),
        "constraints": {
            "allowed_paths": allowed_paths,
            "forbidden_paths": list(forbidden_paths or []),
            "delete_allowed": False,
            "max_diff_lines": max_diff_lines,
        },
        "specification": specification,
        "handoff_data": {
            "changed_files": [],
            "diff_summary": None,
            "local_review_passed": None,
            "local_review_issues": [],
            "judge_verdict": None,
            "judge_blocking_issues": [],
            "judge_suggestions": [],
            "acceptance_results": [],
            "attempts": [],
        },
        "lock": None,
        "breaker": {"status": "closed", "trigger": None, "reason": None, "counters": {}},
        "cost": {},
        "history": [],
    }
    return validate(contract, "new contract")


_HEADING = re.compile(r"^#+\s*(.+?)\s*$")
PROPOSAL_FIELD = re.compile(
    r"^\s*(?:[-*]\s*)?\**(target(?: file)?|source(?: files?)?|complexity)\**\s*:\s*(.+)$", re.IGNORECASE
)


def proposal_fields(markdown: str, file: str = "proposal") -> TaskFields:
    """Title (first heading), requirements (bullets under a 'Requirements' heading), target and sources.

    Recognised lines: `Target: path`, `Source: a.py, b.py`, `Complexity: minor`; a section named
    'Acceptance' gives acceptance criteria, one named 'Commands' gives acceptance commands.
    """
    title: str | None = None
    section = ""
    fields: TaskFields = {
        "requirements": [],
        "acceptance_criteria": [],
        "acceptance_commands": [],
        "source_files": [],
        "target_file": None,
    }
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            if title is None:
                title = heading.group(1)
            section = heading.group(1).lower()
            continue
        field = PROPOSAL_FIELD.match(line)
        if field:
            key, value = field.group(1).lower(), field.group(2).strip().strip("`")
            if key.startswith("target"):
                fields["target_file"] = value
            elif key.startswith("source"):
                fields["source_files"] = [v.strip().strip("`") for v in value.split(",") if v.strip()]
            else:
                fields["complexity"] = value.lower()
            continue
        bullet = re.match(r"^\s*(?:[-*]|\d+[.)])\s+(.+)$", line)
        if not bullet:
            continue
        item = bullet.group(1).strip()
        if "requirement" in section:
            fields["requirements"].append(item)
        elif "acceptance" in section or "criteria" in section:
            fields["acceptance_criteria"].append(item)
        elif "command" in section:
            fields["acceptance_commands"].append(item.strip("`"))
    if title is None:
        raise ContractInvalid(file, "title", "no '# Title' heading")
    if not fields["requirements"]:
        raise ContractInvalid(file, "requirements", "no bullet list under a 'Requirements' heading")
    if fields.get("complexity") not in (None, *COMPLEXITIES):
        raise ContractInvalid(
            file, "complexity", f"'{fields['complexity']}' is not one of {', '.join(COMPLEXITIES)}"
        )
    fields["title"] = title
    return fields
