"""Issue 35: a full disk at the judge's fresh checkout, on a real full file system (a small tmpfs in a
mount namespace of the hub's own, where the judge's checkout is made). `hub next` waits (exit 75, the
task untouched) naming the folder it could not write and the space it needs, and the judge runs once
there is space."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hub.state.contract import iso

from .conftest import GREET_FIXED, IMPL, PASS_REVIEW, REV, Pipeline, whole_file

JUDGE_PASS = json.dumps({"verdict": "PASS", "summary": "ok", "blocking_issues": []})
BIG = "x = 1  # padding\n" * 20_000  # ~340 KB: more than the small file system holds


def hub_env(pipe: Pipeline) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    environment.update(OLLAMA_HOST=pipe.fake.url, HUB_LOG_FORMAT="json")
    return environment


def hub_next_with_a_full_disk_at(
    pipe: Pipeline, folder: Path, keep: Path
) -> subprocess.CompletedProcess[str]:
    """`hub next` as a real process in a mount namespace where `folder` is a 64 KB tmpfs, `keep` (the
    task's own worktree inside it) still the real folder."""
    script = "; ".join(
        [
            "set -e",
            f"mkdir -p /tmp/hub-real-{keep.name}",
            f"mount --bind {shlex.quote(str(folder))} /tmp/hub-real-{keep.name}",
            f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(folder))}",
            f"mkdir {shlex.quote(str(keep))}",
            f"mount --bind /tmp/hub-real-{keep.name}/{keep.name} {shlex.quote(str(keep))}",
            f"exec {shlex.quote(sys.executable)} -m hub next",
        ]
    )
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=pipe.repo,
        env=hub_env(pipe),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_full_disk_at_the_judges_checkout_waits_and_the_judge_runs_once_there_is_space(
    pipe: Pipeline,
) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to make a real full file system")
    pipe.commit("a big file", {"data/big.py": BIG})
    pipe.configure(extra_yaml=f"judge:\n  command: {json.dumps('echo ' + repr(JUDGE_PASS))}\n")
    pipe.fake.script(IMPL, whole_file("src/app.py", GREET_FIXED))
    pipe.fake.script(REV, PASS_REVIEW)
    task_id = pipe.start()
    pipe.implement()
    pipe.review()
    assert pipe.contract()["status"] == "pending_judge_review"
    worktree = pipe.worktree

    full = hub_next_with_a_full_disk_at(pipe, worktree.parent, worktree)

    assert full.returncode == 75, full.stderr[-2000:]
    said = full.stderr.strip().splitlines()[-1]
    assert f".judge-{task_id}" in said and "unable to write file data/big.py" in said
    assert "it needs about 0.3 MB" in said and "MB free on the file system holding" in said
    contract = pipe.contract()
    assert contract["status"] == "pending_judge_review"  # the review is not claimed: nothing changed
    assert "judge_started_at" not in contract["handoff_data"]
    assert not (worktree.parent / f".judge-{task_id}").exists()
    assert (
        f".judge-{task_id}"
        not in subprocess.run(
            ["git", "worktree", "list"], cwd=pipe.repo, capture_output=True, text=True, check=True
        ).stdout
    )

    # Space again: the judge runs.
    before = iso(pipe.ctx.clock())
    done = subprocess.run(
        [sys.executable, "-m", "hub", "next"],
        cwd=pipe.repo,
        env=hub_env(pipe),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    contract = pipe.contract()
    assert contract["handoff_data"]["judge_verdict"] == "PASS"
    assert contract["handoff_data"]["judge_started_at"] >= before
