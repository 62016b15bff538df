"""What the benchmarks share: a git repository for the hub to run in."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """Run git in `repo`; its stdout. A failure aborts the benchmark."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path) -> Path:
    """An empty repository on `main` with an identity of its own and no commit signing."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    with (path / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write("[user]\n\tname = Bench\n\temail = bench@example.invalid\n[commit]\n\tgpgsign = false\n")
    return path


def commit_repo(path: Path, files: Mapping[str, str]) -> Path:
    """A repository holding `files` (hub.yaml among them) in one commit on `main`, with `_handoff/`
    kept out of git the way `hub init` does it."""
    init_repo(path)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (path / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


# A hub on FakeOllama whose every verdict passes: the models' names, their answers, and a judge command.
IMPL = "impl-model"
REV = "rev-model"
PASS_REVIEW = '{"passed": true, "critical": false, "issues": []}'
JUDGE_PASS = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})


def passing_hub_yaml(project: str) -> str:
    """hub.yaml for IMPL and REV on Ollama (FakeOllama), a judge command that prints PASS, two tasks at once."""
    judge = json.dumps(f"echo {shlex.quote(JUDGE_PASS)}")
    return (
        f"project: {project}\n"
        "roles:\n"
        f"  implementer: {{model: {IMPL}, backend: ollama}}\n"
        f"  local_reviewer: {{model: {REV}, backend: ollama}}\n"
        "models:\n"
        f"  {IMPL}: {{num_ctx: 8192}}\n"
        "judge:\n"
        f"  command: {judge}\n"
        "limits:\n"
        "  parallel_tasks: 2\n"
    )
