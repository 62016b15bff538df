"""What the implementer is told, in both modes: edit mode's prompt (the task and its files' text, or
outlines of the files other than the target when the whole does not fit), agent mode's (the task and the
names of its files: the model reads what it needs), and what both carry from earlier (the judge's issues,
the model's own last stall, a person's notes). Templates come from the trust root, never the task's files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hub.core.files import read_text_capped
from hub.core.redaction import user_secrets
from hub.phases import prompt_parts
from hub.phases.run import Run
from hub.review.code import language_for, outline, render_outline
from hub.state.backlog import notes_for_prompt
from hub.state.contract import Contract, Verdict

MAX_FILE_CHARS = 60_000


def task_fields(contract: Contract, feedback: str, no_allowed_path: str) -> dict[str, Any]:
    """The task as both modes' templates show it: what it asks, where it may write, how it is checked."""
    spec, constraints = contract["specification"], contract["constraints"]
    forbidden = constraints["forbidden_paths"]
    return {
        "task_id": contract["task_id"],
        "title": contract.get("title", ""),
        "allowed_paths": ", ".join(constraints["allowed_paths"]) or no_allowed_path,
        "forbidden_line": f"Never touch: {', '.join(forbidden)}.\n" if forbidden else "",
        "requirements": prompt_parts.bullets(spec["requirements"]),
        "acceptance_criteria": prompt_parts.bullets(spec.get("acceptance_criteria", [])),
        "acceptance_commands": ", ".join(f"`{c}`" for c in spec.get("acceptance_commands", [])) or "(none)",
        "feedback": feedback,
    }


def named_files(contract: Contract) -> list[str]:
    """The files the task names, its target first, each once."""
    spec = contract["specification"]
    return list(dict.fromkeys(p for p in [spec.get("target_file"), *spec.get("source_files", [])] if p))


def build_prompt(run: Run, outlines: bool = False, repo_map: str = "") -> str:
    """The implementer's prompt in edit mode; with `outlines`, the files other than the target as
    outlines only (for a task whose files the hub found, the first the model chose stands for the
    target: outlines of every file leave the model nothing to edit); `repo_map` after the files
    (attempt_files.named_map)."""
    contract = run.contract
    spec = contract["specification"]
    # The task's files as the task sees them: its worktree (before setup-task, the user's checkout).
    files_root = run.worktree if run.worktree.is_dir() else run.ctx.repo_root
    paths = named_files(contract)
    example = spec.get("target_file") or (paths[0] if paths else "path/to/file.py")
    whole = spec.get("target_file") or (paths[0] if paths and spec.get("find_files") else None)
    # Templates from the trust root (the user's checkout), never from the task's files. The files are
    # what the model's code may have written: the user's own secrets in them are replaced (issue 28).
    known = user_secrets(run.ctx.config, run.worktree)
    return known.redact_known(
        prompt_parts.render(
            run.ctx.config.trust_root,
            "implementer",
            **task_fields(contract, feedback_section(run), "none (the task names no target or allowed path)"),
            files="\n\n".join(
                outline_section(files_root, p) if outlines and p != whole else file_section(files_root, p)
                for p in paths
            )
            or "(no files named in the contract)",
            repo_map=repo_map,
            example_path=example,
            example_lang=language_for(example) or "",
        )
    )


def agent_prompt(run: Run, repo_map: str = "") -> str:
    """The task as agent mode tells it: the requirements and the files the task names, not their text
    (the model reads what it needs), then `repo_map` (agent mode's map of the repository), if any."""
    named = named_files(run.contract)
    if named:
        lead = "The task names these files: " + ", ".join(named) + ". Read them before you change them."
    elif repo_map:
        lead = ""  # the map says where the code is
    else:
        lead = "The task names no file: find the code it is about with list_files and search."
    files = "\n\n".join(part for part in (lead, repo_map) if part)
    return prompt_parts.render(
        run.ctx.config.trust_root,
        "agent",
        **task_fields(run.contract, feedback_section(run), "none (the task names no allowed path)"),
        files=files,
    )


def file_section(repo_root: Path, rel: str) -> str:
    path = repo_root / rel
    if not path.resolve().is_relative_to(repo_root.resolve()):
        # A symlink in the repository pointing out of it: its target is never sent to the model.
        return f"### {rel}\n\n(outside the repository: not shown)"
    if not path.is_file():
        return f"### {rel}\n\n(does not exist yet: create it)"
    # Never more than the cap (4 bytes a character at most): a huge file is cut below all the same.
    text = read_text_capped(path, 4 * MAX_FILE_CHARS + 4, root=repo_root) or ""
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + "\n... (cut: the file is longer)"
    shape = outline(rel, text)
    summary = f"\n{render_outline(shape)}\n" if shape else ""
    # A fence longer than any backtick run in the file, so a markdown file cannot close it early.
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"### {rel}\n{summary}\n{fence}{language_for(rel) or ''}\n{text.rstrip()}\n{fence}"


def outline_section(repo_root: Path, rel: str) -> str:
    """A source file as its outline (functions, classes, imports): what fits when the whole does not."""
    path = repo_root / rel
    if not path.is_file():
        return file_section(repo_root, rel)
    shape = outline(rel, read_text_capped(path, root=repo_root) or "")
    body = render_outline(shape) if shape else "(no outline: the file's language is not parsed)"
    return f"### {rel} (outline only: the whole file did not fit the model's context)\n\n{body}"


def feedback_section(run: Run) -> str:
    """What the model must know from earlier: the judge's issues, its own last stall, a person's notes."""
    data, root = run.contract["handoff_data"], run.ctx.config.trust_root
    parts: list[str] = []
    if data.get("judge_verdict") in (Verdict.FAIL, Verdict.CONDITIONAL) and data.get("judge_blocking_issues"):
        issues = prompt_parts.issue_lines(data["judge_blocking_issues"])
        parts.append(
            prompt_parts.fragment(root, "judge_issues", verdict=data["judge_verdict"], issues=issues)
        )
        if data.get("judge_suggestions"):
            suggestions = prompt_parts.bullets(data["judge_suggestions"])
            parts.append(prompt_parts.fragment(root, "judge_suggestions", suggestions=suggestions))
    stalls = [s for s in data.get("stalls", []) if s.get("role") == "implementer"]
    if stalls and stalls[-1].get("attempt") == run.contract["attempt"] - 1:
        last = stalls[-1]
        detail = last.get("detail", "")[:1500]
        parts.append(prompt_parts.fragment(root, "previous_stall", reason=last["reason"], detail=detail))
    notes = list(data.get("resume_notes", []))
    notes += [
        f"({n.get('type', 'note')}) {n.get('content', '')}"
        for n in notes_for_prompt(run.ctx.handoff, run.task_id)
    ]
    if notes:
        parts.append(prompt_parts.fragment(root, "notes", notes=prompt_parts.bullets(notes)))
    return ("\n" + "\n\n".join(parts) + "\n") if parts else ""
