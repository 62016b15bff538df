"""The files an edit-mode attempt finds itself, for a task that names none (issue 34): one cheap call shows
the model the repository map (hub.review.repomap) and asks for the paths it needs, one a line; the hub
takes only files the map was made from, never a guess, and from then on shows them whole as it shows a
task's named files. What they may write follows from the policy: the chosen files, less the forbidden
ones (the acceptance tests of `hub eval`), the files that change how git, CI or agents behave (a person
must name those) and the hub's control files (never on the map). No file is created this way: a task
that must create one names it (`--target FILE --new-file`). Here too: edit mode's map beside a task's
named files (`named_map`), and where the phases' maps keep their tags (`map_cache`)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from hub.core.errors import GitError
from hub.core.log import get_logger
from hub.core.redaction import user_secrets
from hub.core.relpaths import behaviour_file, first_match
from hub.edits.policy import control_file_refusal
from hub.phases import prompt_parts
from hub.phases.attempt_prompt import build_prompt, feedback_section, named_files, task_fields
from hub.phases.attempt_refind import Refind, pins, refind_from, told
from hub.phases.attempt_refind import words as refind_words
from hub.phases.stall import Failed, Stall, empty_answer
from hub.repo import gitops
from hub.safety.trust import control_paths
from hub.state.provenance import write_record
from hub.state.schema import path_problem
from hub.workers import budget
from hub.workers.bridge import request_for

if TYPE_CHECKING:
    from pathlib import Path

    from hub.phases.run import Run
    from hub.phases.workbench import Workbench
    from hub.state.contract import FoundFiles, StallRecord
    from hub.workers.base import Worker

# At most this many files are taken from an answer: a small model's prompt must still hold them whole.
MAX_FOUND_FILES = 4
# The map's share of the implementer's window (the rest of the prompt and the answer's room come off
# first). Aider's default map is 1,024 tokens of an 8k window; a quarter shows more of a small
# repository, and is what a real run should measure against an eighth.
MAP_SHARE = 0.25
PURPOSE = "find-files"
# The most of edit mode's map beside a task's named files (named_map), as agent mode's (aider's default).
MAP_MAX_TOKENS = 1024
# The map's tag cache, in the repository's common git folder (see map_cache).
MAP_CACHE = "hub-repomap"

# A list marker before a path: "- ", "* ", "1. ", "2) ".
_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")

log = get_logger(__name__)


def needs_files(bench: Workbench) -> bool:
    """The task named no file and none has been found for it yet."""
    spec = bench.contract["specification"]
    return bool(spec.get("find_files")) and not spec.get("source_files")


def find_files(bench: Workbench, worker: Worker, again: StallRecord | None = None) -> list[str]:
    """Ask the model for the files the task needs, from the repository map; record them on the contract
    (they become its source files, and those it may write its allowed paths) and in provenance. A
    `files_not_found` stall strike when the answer names none the hub can take. `again`: the stall of
    the attempt whose choice failed (attempt_refind.py): the model is told, the map ranked by it."""
    from hub.review.repomap import build_map, tracked_files  # tree-sitter: only when a map is made

    run, config = bench.run, bench.config
    root = config.trust_root
    control = control_paths(config)
    repository = [f for f in tracked_files(run.worktree) if control_file_refusal(f, control) is None]
    forbidden = bench.contract["constraints"]["forbidden_paths"]
    # Measured on tenacity's history with the 1.5B: with the task's (forbidden) test module on the map,
    # ranked first for the test names it shares with the requirement, the model chose it in 3 of 4
    # answers, and shown whole (80,000 characters) it pushed the prompt past the window. What the change
    # may not touch counts for the ranking, through what it uses, but is not offered.
    hidden = [f for f in repository if first_match(f, forbidden) is not None]
    refind = None
    if again is not None:
        found_before = bench.contract["handoff_data"].get("found_files")
        chosen_before = found_before["files"] if found_before else []
        refind = refind_from(again, chosen_before, repository, run.worktree)
    fields = _fields(bench, refind)
    base = prompt_parts.render(root, "find_files", **fields, map="")
    request = request_for(config, "implementer", base)
    fit = budget.plan(base, None, request.num_ctx, request.num_predict, scale=request.token_scale)
    room = min(int(fit.num_ctx * MAP_SHARE), fit.prompt_room - fit.prompt_tokens)
    words = _words(bench) + ("\n" + refind_words(refind) if refind else "")
    repo_map = build_map(
        run.worktree,
        repository,
        words=words,
        budget_tokens=max(room, 0),
        pinned=pins(refind) if refind else (),
        hidden=hidden,
        cache_dir=map_cache(run),
        count_tokens=lambda text: budget.estimate_tokens(text, request.token_scale),
    )
    # The map's signatures carry default values, and the retry's section quotes the failing output: the
    # user's own secrets in either are replaced, as in edit mode's prompt (build_prompt).
    known = user_secrets(config, run.worktree)
    prompt = known.redact_known(
        prompt_parts.render(root, "find_files", **fields, map=repo_map.text or "(empty)")
    )
    generation = bench.generate(worker, request_for(config, "implementer", prompt), PURPOSE, first=True)
    if not generation.text.strip():
        raise Failed(Stall("files_not_found", empty_answer(generation)))
    # A forbidden file named anyway is recognised, and refused below with the reason.
    chosen, refused = parse_files(generation.text, [*repo_map.ranked, *hidden], control)
    allowed = [f for f in chosen if first_match(f, forbidden) is None and behaviour_file(f) is None]
    refused += [
        f"{f}: may not be changed (forbidden, or a file a person must name)"
        for f in chosen
        if f not in allowed
    ]
    found: FoundFiles = {
        "attempt": run.contract["attempt"],
        "files": chosen,
        "refused": refused,
        "map_files": len(repo_map.files),
        "map_tokens": repo_map.tokens,
        "repository_files": len(repository),
    }
    write_record(
        run.ctx.handoff,
        run.task_id,
        "files-found",
        {
            **found,
            "map_budget_tokens": room,
            "outcome": "found" if allowed else "refused",
            **({"again_after": refind.reason, "pinned": pins(refind)} if refind else {}),
        },
        run.now,
    )
    log.debug(
        "implement.files_found", task=run.task_id, files=chosen, refused=refused, tokens=repo_map.tokens
    )
    if not allowed:
        raise Failed(Stall("files_not_found", _why_none(chosen, refused, len(repo_map.files))))
    run.task.set_found_files(found, allowed)
    run.save()
    return chosen


def named_map(bench: Workbench) -> str:
    """Edit mode's map for a task that names its files (`edit_map`, off by default until measured): the files linked to
    them (what they use, what uses them; `repomap.linked`), ranked for the task, the named files pinned
    but not shown (the prompt holds them whole), as agent mode's map is sized: an eighth of the window,
    at most MAP_MAX_TOKENS, and never more than the prompt leaves. "" when nothing is linked to them:
    an exercise's stub and its test gain nothing from a map, and a small model's prompt only grows
    (measured on hub eval's layout, docs/ARCHITECTURE.md)."""
    run, config = bench.run, bench.config
    named = named_files(bench.contract)
    if not config.edit_map or bench.contract["specification"].get("find_files") or not named:
        return ""
    from hub.review.repomap import build_map, tracked_files  # tree-sitter: only when a map is made

    control = control_paths(config)
    try:
        repository = [f for f in tracked_files(run.worktree) if control_file_refusal(f, control) is None]
    except GitError as exc:
        log.warning("implement.no_map", task=run.task_id, error=str(exc))
        return ""
    forbidden = bench.contract["constraints"]["forbidden_paths"]
    hidden = [*named, *(f for f in repository if first_match(f, forbidden) is not None)]
    system = prompt_parts.template(config.trust_root, "implementer_system").strip()
    request = request_for(config, "implementer", build_prompt(run), system)
    fit = budget.plan(request.prompt, system, request.num_ctx, request.num_predict, scale=request.token_scale)
    frame = budget.estimate_tokens(prompt_parts.fragment(config.trust_root, "implementer_map", map=""))
    room = min(fit.num_ctx // 8, MAP_MAX_TOKENS, fit.prompt_room - fit.prompt_tokens - frame)
    if room <= 0:
        return ""
    repo_map = build_map(
        run.worktree,
        repository,
        words=_words(bench),
        budget_tokens=room,
        pinned=named,
        hidden=hidden,
        linked_only=True,
        cache_dir=map_cache(run),
        count_tokens=lambda text: budget.estimate_tokens(text, request.token_scale),
    )
    log.info("implement.named_map", task=run.task_id, files=len(repo_map.files), tokens=repo_map.tokens)
    if not repo_map.files:
        return ""
    # Signatures carry default values: build_prompt replaces the user's own secrets in all of its text.
    return "\n\n" + prompt_parts.fragment(config.trust_root, "implementer_map", map=repo_map.text.rstrip())


def map_cache(run: Run) -> Path:
    """Where the phases keep the repository map's tag cache, shared by every task of the repository (a
    task's worktree is a fresh checkout: most of its files were parsed for an earlier one): the common
    git folder, which a sandboxed command never sees (an empty tmpfs there, hub.safety.git_view) and no
    agent tool lists, unlike the worktree the model's code writes."""
    return gitops.common_dir(run.user_repo) / MAP_CACHE


def parse_files(
    text: str, known: Collection[str], control: Sequence[str], limit: int = MAX_FOUND_FILES
) -> tuple[list[str], list[str]]:
    """The files an answer names, one a line (a list marker, backticks or a note after the path are
    allowed), taken only when `known` has them exactly, at most `limit`; and what else it named that
    looks like a path, each with why it was not taken. Prose lines are skipped."""
    chosen: list[str] = []
    refused: list[str] = []
    for line in text.splitlines():
        line = _MARKER.sub("", line).strip()
        if not line or line.startswith("```"):
            continue
        token = line.split()[0].strip("`'\"*:,;()[]")
        token = token.removeprefix("./")
        if token in known:
            if token in chosen:
                continue
            if len(chosen) < limit:
                chosen.append(token)
            else:
                refused.append(f"{token}: more than {limit} files named")
            continue
        if "/" in token or _SUFFIX.search(token):
            refused.append(f"{token}: {_why_not(token, known, control)}")
    return chosen, refused


def _why_not(token: str, known: Collection[str], control: Sequence[str]) -> str:
    problem = path_problem(token)
    if problem:
        return problem
    if control_file_refusal(token, control) is not None:
        return "the hub's control file, which no task may change"
    if any(f.startswith(token.rstrip("/") + "/") for f in known):
        return "a folder, not a file"
    return "not a file of the repository"


def _why_none(chosen: list[str], refused: list[str], shown: int) -> str:
    if chosen:
        return "none of the files the model chose may be changed: " + "; ".join(refused)
    named = ("; it named " + "; ".join(refused[:8])) if refused else ""
    return f"the answer named no file of the repository (the map showed {shown} files){named}"


def _words(bench: Workbench) -> str:
    """What the map is ranked for: the task's words, its commands (they name the tests to pass)."""
    contract = bench.contract
    spec = contract["specification"]
    parts = [contract.get("title", ""), *spec["requirements"], *spec.get("acceptance_criteria", [])]
    return "\n".join([*parts, *spec.get("acceptance_commands", [])])


def _fields(bench: Workbench, refind: Refind | None = None) -> dict[str, str]:
    feedback = told(bench.config.trust_root, refind) if refind else feedback_section(bench.run)
    fields = task_fields(bench.contract, feedback, "")
    return {
        "task_id": fields["task_id"],
        "title": fields["title"],
        "requirements": fields["requirements"],
        "acceptance_commands": fields["acceptance_commands"],
        "feedback": fields["feedback"],
        "max_files": str(MAX_FOUND_FILES),
    }
