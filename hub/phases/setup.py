"""`hub init`, `hub new` and `hub setup-task`: a handoff folder, a contract, a task branch."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hub import contract as contract_mod
from hub import gitops, handoff
from hub.config import CONFIG_FILE, default_yaml
from hub.contract import Contract
from hub.errors import ConfigError, ContractInvalid, GitError, WrongState
from hub.handoff import write_report
from hub.machine import MERGED, PENDING_IMPLEMENTER
from hub.phases.context import Context, Outcome, running

HANDOFF_README = """# _handoff

The active task's state, written by `hub`. Not committed: `hub init` lists this folder in .git/info/exclude.
See `hub status`. TASK_CONTRACT.json is the task; ERIK_HALT.md or STALL_REPORT.md, when present, need you.
"""


def init(ctx: Context) -> Outcome:
    """Create _handoff/, a default hub.yaml, and keep _handoff/ out of git."""
    repo = gitops.open_repo(ctx.repo_root)
    hand = ctx.handoff
    hand.ensure()
    created: list[str] = []
    readme = hand.dir / "README.md"
    if not readme.exists():
        write_report(readme, HANDOFF_README)
    config_path = ctx.repo_root / CONFIG_FILE
    if not config_path.exists():
        config_path.write_text(default_yaml(ctx.config.project), encoding="utf-8")
        created.append(CONFIG_FILE)
    try:
        rel = hand.dir.resolve().relative_to(Path(repo.working_tree_dir or ctx.repo_root).resolve())
    except ValueError:
        rel = None
    if rel is not None and gitops.exclude_path(repo, str(rel)):
        created.append(f".git/info/exclude: /{rel}/")
    hint = f"; commit {CONFIG_FILE} before `hub setup-task`" if CONFIG_FILE in created else ""
    return Outcome(
        "init", message=f"initialised {hand.dir}" + (f" ({', '.join(created)})" if created else "") + hint
    )


def task_fields(proposal: str | None = None, proposal_file: str = "proposal", **given: Any) -> dict[str, Any]:
    """A new task's fields, for both faces (`hub new`, the MCP `hub_create_task`): a markdown proposal's,
    then the ones given (empty ones ignored) on top; complexity defaults to minor."""
    fields: dict[str, Any] = contract_mod.proposal_fields(proposal, proposal_file) if proposal else {}
    fields.update({key: value for key, value in given.items() if value})
    fields.setdefault("complexity", "minor")
    return fields


def missing_task_field(fields: dict[str, Any]) -> str | None:
    """What a new task still lacks, as a sentence; None when it has a title and requirements."""
    if not fields.get("title"):
        return "a title is required (give one, or a proposal with a '# Title' heading)"
    if not fields.get("requirements"):
        return "at least one requirement is required (or a proposal with a '## Requirements' list)"
    return None


def check_task_paths(repo_root: Path, fields: Mapping[str, Any], create_target: bool = False) -> None:
    """Refuse a task whose target or a source lies outside the repository (even as a new file: the model
    could never write it, and a source would be read into the prompt), or is mistyped (a file that does
    not exist and is not meant to be created: the closest files the repository has are named), or
    that names no path the model may write at all (every edit would be refused). A missing source
    would otherwise reach the prompt as "does not exist yet: create it", and the model would write a
    file nobody asked for."""
    target = fields.get("target_file")
    if not target and not fields.get("allowed_paths") and not fields.get("source_files"):
        raise ConfigError(
            "the task names no file to change: give --target FILE (or --allowed-path PATH); "
            "without one the model may write nowhere and every edit would be refused"
        )
    # The contract's own path check, here too so that promotion blocks such a proposal (a ConfigError)
    # instead of failing on it at every `hub next`.
    for flag, path in [("--target", target), *(("--source", p) for p in fields.get("source_files") or [])]:
        problem = contract_mod.path_problem(str(path)) if path else None
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}")
    if target and not create_target and not _exists(repo_root, str(target)):
        hint = _close_files(repo_root, str(target))
        raise ConfigError(
            f"--target {target}: no such file in {repo_root}{hint} "
            "(pass --new-file, over MCP create_target, if the task creates it)"
        )
    for source in fields.get("source_files") or []:
        if not (create_target and source == target) and not _exists(repo_root, str(source)):
            hint = _close_files(repo_root, str(source))
            raise ConfigError(
                f"--source {source}: no such file in {repo_root}{hint} (a source is read, so it must exist)"
            )


def _exists(repo_root: Path, path: str) -> bool:
    root = repo_root.resolve()
    full = (root / path).resolve()
    return full.is_relative_to(root) and full.exists()


def _close_files(repo_root: Path, path: str) -> str:
    import difflib
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=repo_root, capture_output=True, text=True, timeout=30, check=False
        ).stdout.split("\0")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    files = [f for f in listed if f]
    by_name = [f for f in files if Path(f).name == Path(path).name]
    close = by_name[:3] or difflib.get_close_matches(path, files, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def create(
    ctx: Context, fields: dict[str, object], create_target: bool = False, check_paths: bool = True
) -> Outcome:
    """Write a fresh contract; refuse while an unfinished one is active, or when its files are mistyped
    (`check_paths`: False when the caller decided that already, as promotion does in why_blocked)."""
    hand = ctx.handoff
    hand.ensure()
    from hub.handoff import phase_lock

    with phase_lock(hand, "new", ctx.clock()):
        if hand.contract.exists():
            try:
                current = contract_mod.load(hand.contract)
            except ContractInvalid as exc:
                raise WrongState(
                    f"{hand.contract} exists and is not a valid contract ({exc}); move it aside first"
                ) from None
            if current["status"] != MERGED:
                raise WrongState(
                    f"task {current['task_id']} is still active ({current['status']}); "
                    "finish it or move TASK_CONTRACT.json to archive/ first"
                )
            # A finalize killed between recording `pass` and archiving: finish its archiving, so the
            # merged task's files are kept instead of overwritten.
            handoff.archive_task(hand, str(current["task_id"]))
        if check_paths:
            check_task_paths(ctx.repo_root, fields, create_target)
        roles = {name: ctx.config.role(name).model for name in ("implementer", "local_reviewer", "judge")}
        contract = contract_mod.new_contract(
            project=ctx.config.project,
            now=ctx.clock(),
            roles=roles,
            global_timeout_hours=ctx.config.global_timeout_hours,
            **fields,  # type: ignore[arg-type]
        )
        contract["limits"]["max_changed_files"] = ctx.config.max_changed_files
        contract_mod.save(hand.contract, contract, ctx.clock())
    warning = _budget_warning(ctx, contract)
    return Outcome(
        "new",
        contract["task_id"],
        None,
        contract["status"],
        f"created {hand.contract}" + (f"\nwarning: {warning}" if warning else ""),
        data={"task_id": contract["task_id"], **({"warning": warning} if warning else {})},
    )


def _budget_warning(ctx: Context, contract: Contract) -> str | None:
    """The context-budget warning for a task's files (see implement.budget_warning); a file that
    cannot be read or a bad config never stops `hub new` here: the phases report those."""
    from hub.errors import HubError
    from hub.phases.implement import budget_warning

    try:
        return budget_warning(ctx, contract)
    except (HubError, OSError):
        return None


def setup_task(ctx: Context, base_branch: str | None = None) -> Outcome:
    """Create task/<task_id> from the base branch on a clean work tree and record it."""
    with running(ctx, "setup-task", {PENDING_IMPLEMENTER}) as run:
        git = run.contract["git"]
        if git.get("task_branch"):
            raise WrongState(f"task {run.task_id} is set up already on {git['task_branch']}")
        repo = run.repo
        if not repo.head.is_valid():
            raise GitError(
                f"the repository {repo.working_tree_dir} has no commit yet: commit something (the base "
                "the task starts from), then run `hub setup-task`"
            )
        gitops.ensure_clean(repo)
        task_branch = f"task/{run.task_id}"
        if git.get("base_commit") and gitops.branch_exists(repo, task_branch):
            # A setup-task killed after creating the branch and before saving it: adopt the branch if
            # it is still exactly the base it recorded, or the task could never be set up again.
            base, base_commit = git["base_branch"], git["base_commit"]
            if gitops.commit_of(repo, task_branch) != base_commit:
                raise GitError(f"branch '{task_branch}' exists already and has moved; delete it first")
            gitops.checkout(repo, task_branch)
        else:
            base = base_branch or gitops.current_branch(repo)
            if base == "HEAD":
                raise WrongState("HEAD is detached: check out the base branch or pass --base")
            if not gitops.branch_exists(repo, base):
                raise GitError(f"base branch '{base}' does not exist")
            git.update({"base_branch": base, "base_commit": gitops.commit_of(repo, base)})
            run.save()
            base_commit = gitops.create_task_branch(repo, base, task_branch)
        git.update(
            {
                "repo_root": str(repo.working_tree_dir),
                "base_branch": base,
                "task_branch": task_branch,
                "base_commit": base_commit,
            }
        )
        run.save()
        warning = _budget_warning(ctx, run.contract)
        return Outcome(
            "setup-task",
            run.task_id,
            run.start_state,
            run.contract["status"],
            f"on {task_branch} from {base} at {base_commit[:12]}"
            + (f"\nwarning: {warning}" if warning else ""),
            data={"warning": warning} if warning else {},
        )
