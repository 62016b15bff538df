"""Where trust comes from: the hub's control files, and the two roots.

The *trust root* is where the hub reads what decides how work is checked: `hub.yaml` (the judge command
among it), `prompts/`, `sgconfig.yml` and its rule folders. It is the user's checkout. The *work root*
is where a task's files are edited and its acceptance commands run: the task's own git worktree
(`Run.worktree`; the control files' names are the same relative paths there). Nothing a model writes may reach the first: its control
files are refused as edit targets whatever `allowed_paths` says (`hub.edits.policy`), are read-only inside the
sandbox (`hub.safety.sandbox`), and are never committed by a task's checkpoint (`hub.repo.gitops.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hub.core.config import CONFIG_FILE, Config
from hub.core.errors import RuleError

# Repo-relative names that are control files in every repository, whatever its configuration says.
CONTROL_FILES = ("_handoff", CONFIG_FILE, "prompts", "sgconfig.yml", "sgconfig.yaml", ".git")


def control_paths(config: Config, rule_dirs: Sequence[Path] | None = None) -> tuple[str, ...]:
    """The control files of the work root, repo-relative: the fixed names, the handoff folder where
    it lies inside, and the rule and util folders sgconfig.yml names (read from the trust root)."""
    root = config.repo_root.resolve()
    found = list(CONTROL_FILES)
    if rule_dirs is None:
        # Here, not at the top: hub.review.rules loads yaml, and `hub next` and `hub watch` import this
        # module on their way to deciding there is nothing to do.
        from hub.review.rules import project_rules, project_util_dirs

        try:
            rule_dirs = [*project_rules(config.trust_root), *project_util_dirs(config.trust_root)]
        except RuleError:
            rule_dirs = []
    trust = config.trust_root.resolve()
    for path in (config.handoff_dir, *rule_dirs):
        resolved = Path(path).resolve()
        for base in (root, trust):
            if resolved.is_relative_to(base) and resolved != base:
                found.append(resolved.relative_to(base).as_posix())
                break
    return tuple(dict.fromkeys(found))
