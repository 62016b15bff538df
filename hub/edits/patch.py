"""Unified diffs from a model, applied in memory with `git apply`: cleanly, or with whitespace tolerance.

Models often answer with a diff although asked for whole files. `git apply` is the reference for
what a diff means, so the hunks are applied by it, to a copy of the one file in a scratch folder,
never to the repository: `--check` first, then the apply. `--recount` forgives wrong line counts in
`@@` headers (models rarely count right); `--whitespace=fix` and `--ignore-whitespace` are the second
and last tries. Each hunk's old lines must occur exactly once in the file, so git's search around the
stated line number never has a choice; a hunk of only '+' lines is refused unless the file is empty.
Anything else is refused with git's own words.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hub.core.errors import EditError

GIT_TIMEOUT_SECONDS = 20.0


def apply_patch(rel: str, text: str | None, hunks: str) -> str:
    """The file's text after the diff's hunks (`text` None: a new file), or `EditError` saying why not."""
    name = "target" + Path(rel).suffix  # one file, whatever the model's path; nothing else is reachable
    header = f"--- {'/dev/null' if text is None else 'a/' + name}\n+++ b/{name}\n"
    with tempfile.TemporaryDirectory(prefix="hub-patch-") as scratch:
        folder = Path(scratch)
        if text is not None:
            (folder / name).write_bytes(text.encode("utf-8"))
        (folder / "edit.diff").write_bytes((header + hunks).encode("utf-8"))
        where = _not_unique(text or "", hunks)
        if where:
            raise EditError(
                f"a hunk of the unified diff {where} in {rel}; add context lines copied from the file, "
                "or send SEARCH/REPLACE blocks"
            )
        errors = []
        # --unidiff-zero: a hunk without trailing context is not pinned to the end of the file; the check
        # above has made sure each hunk's lines are found once, so this cannot move a hunk elsewhere.
        tolerant = (["--whitespace=fix"], ["--ignore-whitespace"])  # trailing / inner whitespace differences
        for extra in ([], *tolerant):
            extra = ["--unidiff-zero", *extra]
            problem = _git_apply(folder, ["--check", *extra]) or _git_apply(folder, extra)
            if problem is None:
                return (folder / name).read_bytes().decode("utf-8")
            errors.append(problem)
    detail = errors[0].replace("target" + Path(rel).suffix, rel).replace("edit.diff", "the diff")
    raise EditError(
        f"the unified diff does not apply to {rel} ({detail}); copy the context and '-' lines exactly from "
        "the file, or send SEARCH/REPLACE blocks"
    )


def _not_unique(text: str, hunks: str) -> str | None:
    """Whether some hunk's old lines (context and '-') occur other than once in the file, compared
    without whitespace: git would otherwise pick the occurrence nearest the (often wrong) line number."""
    lines = ["".join(line.split()) for line in text.split("\n")]
    for n, hunk in enumerate(hunks.split("\n@@")):
        old = ["".join(line[1:].split()) for line in hunk.split("\n")[1:] if line[:1] in (" ", "-", "")]
        while old and not old[-1]:
            old.pop()
        if not old:
            if text.strip():
                # Only its line number would place it, and models rarely count right.
                return f"(hunk {n + 1}) has no context or '-' lines to find its place"
            continue
        found = sum(1 for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old)
        if found != 1:
            return f"(hunk {n + 1}) {'is not found' if not found else f'matches {found} places'}"
    return None


def _git_apply(folder: Path, options: list[str]) -> str | None:
    # The scratch folder is not a repository, and git must not find one above it.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent)}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    try:
        done = subprocess.run(
            ["git", "apply", "--recount", *options, "edit.diff"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"git apply could not run: {error}"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return "; ".join(lines[:3]) or f"git apply exited {done.returncode}"
