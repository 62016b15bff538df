"""`hub init`, `hub new` and `hub setup-task`: a handoff folder, a contract, a task branch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from hub.core.config import CONFIG_FILE, default_yaml
from hub.core.errors import GitError, HubError, NotInitialised, WrongState
from hub.phases.context import Context
from hub.phases.implement import budget_warning
from hub.phases.outcome import Outcome
from hub.phases.run import worktree_path
from hub.phases.session import running
from hub.phases.status_md import write_status
from hub.phases.task_paths import check_task_paths
from hub.repo import gitops
from hub.state import new_task, store
from hub.state.contract import Contract, TaskFields
from hub.state.handoff import write_report
from hub.state.machine import PENDING_IMPLEMENTER
from hub.state.task import Task

if TYPE_CHECKING:
    from git import Repo

HANDOFF_README = """# _handoff

Every task's state, written by `hub`. Not committed: `hub init` lists this folder in .git/info/exclude.
Read STATUS.md first (or `hub status`). Each task has a folder tasks/<task_id>/: TASK_CONTRACT.json is the
task; ERIK_HALT.md or STALL_REPORT.md there, when present, need you.
"""


def init(ctx: Context) -> Outcome:
    """Create _handoff/, a default hub.yaml, and keep _handoff/ out of git."""
    repo = gitops.open_repo(ctx.repo_root)
    if repo.bare or repo.working_tree_dir is None:
        # Nothing written: in a bare repository `_handoff/` and hub.yaml would land in the git folder.
        raise NotInitialised(
            f"{ctx.repo_root} is a bare git repository (no work tree): the hub works in a checkout",
            hint="clone it (`git clone <bare> proj`) and run `hub init` in the clone",
        )
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
    # hub.yaml is read from the user's checkout, committed or not (hub/safety/trust.py): nothing waits on a commit.
    hint = ""
    return Outcome(
        "init", message=f"initialised {hand.dir}" + (f" ({', '.join(created)})" if created else "") + hint
    )


def task_fields(
    proposal: str | None = None,
    proposal_file: str = "proposal",
    *,
    title: str | None = None,
    requirements: list[str] | None = None,
    target_file: str | None = None,
    source_files: list[str] | None = None,
    acceptance_commands: list[str] | None = None,
    acceptance_criteria: list[str] | None = None,
    allowed_paths: list[str] | None = None,
    forbidden_paths: list[str] | None = None,
    complexity: str | None = None,
    max_diff_lines: int | None = None,
) -> TaskFields:
    """A new task's fields, for both faces (`hub new`, the MCP `hub_create_task`): a markdown proposal's,
    then the ones given (empty ones ignored) on top; complexity defaults to minor."""
    fields: TaskFields = new_task.proposal_fields(proposal, proposal_file) if proposal else {}
    given = {
        "title": title,
        "requirements": requirements,
        "target_file": target_file,
        "source_files": source_files,
        "acceptance_commands": acceptance_commands,
        "acceptance_criteria": acceptance_criteria,
        "allowed_paths": allowed_paths,
        "forbidden_paths": forbidden_paths,
        "complexity": complexity,
        "max_diff_lines": max_diff_lines,
    }
    # The keys are TaskFields' own (the parameters above); only the empty values are left out.
    fields.update(cast(TaskFields, {key: value for key, value in given.items() if value}))
    fields.setdefault("complexity", "minor")
    return fields


def missing_task_field(fields: TaskFields) -> str | None:
    """What a new task still lacks, as a sentence; None when it has a title and requirements."""
    if not fields.get("title"):
        return "a title is required (give one, or a proposal with a '# Title' heading)"
    if not fields.get("requirements"):
        return "at least one requirement is required (or a proposal with a '## Requirements' list)"
    return None


def create(
    ctx: Context, fields: TaskFields, create_target: bool = False, check_paths: bool = True
) -> Outcome:
    """Write a fresh contract in a folder of its own, tasks/<task_id>/ (other tasks may be active);
    refuse when its files are mistyped (`check_paths`: False when the caller decided that already, as
    promotion does in why_blocked)."""
    if check_paths:
        require_commit(ctx.repo_root)
        check_task_paths(ctx.repo_root, fields, create_target)
    roles = {name: ctx.config.role(name).model for name in ("implementer", "local_reviewer", "judge")}
    contract = new_task.new_contract(
        project=ctx.config.project,
        now=ctx.clock(),
        roles=roles,
        global_timeout_hours=ctx.config.global_timeout_hours,
        **fields,
    )
    task = Task(contract)
    chosen = ctx.config.task_limits
    task.set_limits(
        ctx.config.max_changed_files,
        chosen.get("timeout_minutes"),
        None if chosen.get("max_rebuttals") is None else int(chosen["max_rebuttals"]),
    )
    root = ctx.handoff_root
    root.tasks_dir.mkdir(parents=True, exist_ok=True)
    base_id = contract["task_id"]
    for n in range(1, 100):
        # Claim the folder first: two `hub new` of the same title in the same second get two ids.
        task_id = base_id if n == 1 else f"{base_id}-{n}"
        try:
            root.for_task(task_id).task_dir.mkdir()
        except FileExistsError:
            continue
        break
    else:
        raise WrongState(f"task folders {base_id}-* are all taken in {root.tasks_dir}")
    task.claim_id(task_id)
    hand = root.for_task(task_id)
    # The lock file exists from the start: a command refused before doing anything leaves no new file.
    hand.lock_file.touch()
    store.save(hand.contract, contract, ctx.clock())
    write_status(ctx)
    message = f"created task {task_id} ({hand.contract})"
    unseen = uncommitted_task_files(ctx, contract)
    if unseen:
        message += (
            f"; note: {', '.join(unseen)} has uncommitted changes in your checkout, which the task will not "
            "see (it works on the committed base in a worktree of its own)"
        )
    warning = _budget_warning(ctx, contract)
    if warning:
        message += f"\nwarning: {warning}"
    return Outcome(
        "new",
        contract["task_id"],
        None,
        contract["status"],
        message,
        data={
            "task_id": contract["task_id"],
            "uncommitted": unseen,
            **({"warning": warning} if warning else {}),
        },
    )


def _budget_warning(ctx: Context, contract: Contract) -> str | None:
    """The context-budget warning for a task's files (see implement.budget_warning); a file that
    cannot be read or a bad config never stops `hub new` here: the phases report those."""
    try:
        return budget_warning(ctx, contract)
    except (HubError, OSError):
        return None


def uncommitted_task_files(ctx: Context, contract: Contract) -> list[str]:
    """The task's target and source files that have uncommitted changes in the user's checkout."""
    spec = contract["specification"]
    named = {p for p in [spec.get("target_file"), *spec.get("source_files", [])] if p}
    if not named:
        return []
    try:
        dirty = set(gitops.dirty_files(gitops.open_repo(ctx.repo_root)))
    except GitError:
        return []
    return sorted(named & dirty)


_NO_COMMIT = "the repository {root} has no commit yet"
_NO_COMMIT_FIX = (
    "commit your files first (the base the task starts from), e.g. `git add -A && git commit -m initial`, "
    "then run `hub setup-task`"
)


def _current_base(user: Repo) -> str:
    """The current branch, the default base; a clear GitError when it has no commit to start from."""
    unborn = gitops.unborn_branch(user)
    if unborn is None:
        return gitops.current_branch(user)
    known = gitops.branches(user)
    if not known:
        raise GitError(_NO_COMMIT.format(root=user.working_tree_dir), hint=_NO_COMMIT_FIX)
    raise GitError(
        f"the current branch '{unborn}' has no commit yet",
        hint=f"pass --base with a branch that has one ({', '.join(known)}), or commit on '{unborn}' first",
    )


def require_commit(repo_root: Path) -> None:
    """Refuse a new task in a repository without any commit: a task works on a committed base, so it
    could never be set up (and the files it names would look uncommitted)."""
    if not gitops.branches(gitops.open_repo(repo_root)):
        raise GitError(
            _NO_COMMIT.format(root=repo_root), hint=_NO_COMMIT_FIX.replace("hub setup-task", "hub new")
        )


def setup_task(ctx: Context, base_branch: str | None = None) -> Outcome:
    """Create task/<task_id> from the base branch in a worktree of its own, and record it.

    The user's checkout is only read (its current branch is the default base): uncommitted work in it
    blocks nothing, and the task will not see it."""
    with running(ctx, "setup-task", {PENDING_IMPLEMENTER}) as run:
        git = run.contract["git"]
        if git.get("task_branch"):
            raise WrongState(f"task {run.task_id} is set up already on {git['task_branch']}")
        user = run.user_repo
        task_branch = f"task/{run.task_id}"
        path = worktree_path(ctx, user, run.task_id)
        if git.get("base_commit") and gitops.branch_exists(user, task_branch):
            # A setup-task killed after creating the branch and before saving it: adopt the branch if
            # it is still exactly the base it recorded, or the task could never be set up again.
            base, base_commit = git["base_branch"], git["base_commit"]
            if gitops.commit_of(user, task_branch) != base_commit:
                raise GitError(f"branch '{task_branch}' exists already and has moved", hint="delete it first")
            gitops.ensure_worktree(user, path, task_branch)
        else:
            base = base_branch or _current_base(user)
            if base == "HEAD":
                raise WrongState("HEAD is detached", hint="check out the base branch or pass --base")
            if not gitops.branch_exists(user, base):
                known = gitops.branches(user)
                if known:
                    raise GitError(
                        f"base branch '{base}' does not exist in {user.working_tree_dir} (its branches: "
                        f"{', '.join(known)})",
                        hint=f"pass --base with one of them, or create it (`git branch {base} <commit>`), then "
                        "run `hub setup-task` again",
                    )
                raise GitError(
                    f"base branch '{base}' does not exist: {_NO_COMMIT.format(root=user.working_tree_dir)}",
                    hint=_NO_COMMIT_FIX,
                )
            if gitops.branch_exists(user, task_branch):
                raise GitError(f"branch '{task_branch}' exists already", hint="delete it or start a new task")
            base_commit = gitops.commit_of(user, base)
            run.task.set_base(base, base_commit)
            run.save()
            gitops.ensure_worktree(user, path, task_branch, start=base_commit)
        run.task.set_up(str(user.working_tree_dir), base, task_branch, base_commit, str(path))
        run.save()
        warning = _budget_warning(ctx, run.contract)
        return Outcome(
            "setup-task",
            run.task_id,
            run.start_state,
            run.contract["status"],
            f"on {task_branch} from {base} at {base_commit[:12]}, in {path}"
            + (f"\nwarning: {warning}" if warning else ""),
            data={"warning": warning} if warning else {},
        )
