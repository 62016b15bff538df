"""What a sandboxed command sees of git: only what the worktree's own commands need (issue 38).

A task's worktree is a linked worktree: its `.git` file names `<common>/worktrees/<name>`, and git reads
objects, refs and config from the common folder, the user's own `.git`. Shown whole, that folder gave the
model's code a token in a remote URL or an `http.extraheader` (`config`), the user's stash (`refs/stash`
and its reflog, and its objects), every other task's worktree (`hub-worktrees/`, `worktrees/`) and every
branch and tag. Redacting what leaks afterwards cannot be the defence (the code can encode it), so the
command never sees it. The common folder is an empty tmpfs in the sandbox, and only this comes back,
read-only, most of it from the hub's own part of it (`hub-sandbox/<name>/`, removed with the worktree):

- `objects/`: the worktree's own store (`hub.safety.git_objects`: HEAD's tree as of the task's base,
  the commits made since, the staged blobs), never the user's, which a raw walk (`git cat-file
  --batch-all-objects`, the pack files) reads whole: stashes, other branches, dangling blobs; with it
  the `shallow` file naming the store's base commit;
- `HEAD` and, of `info/`, the exclude, attributes and sparse-checkout files;
- a sanitized `config` (the `core.*` settings git needs to read the repository and `extensions.*`;
  never a remote, a credential helper, an extra header, an include or an alias);
- the worktree's own folder (`worktrees/<name>`: its HEAD and index, without its reflog);
- the one ref the worktree's HEAD names, loose or as the only line of a sanitized `packed-refs`.

Every other worktree of the repository is hidden wherever the command could otherwise see it.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hub.core.atomic import write_atomic
from hub.core.log import get_logger
from hub.repo.sandbox_views import SANDBOX_VIEWS
from hub.safety.git_objects import task_objects

log = get_logger(__name__)

# The config keys git needs to read the repository as it is; anything else stays out of the sandbox.
KEPT_CONFIG = (
    r"^(core\.(repositoryformatversion|filemode|bare|ignorecase|precomposeunicode|symlinks|autocrlf|eol"
    r"|safecrlf|quotepath|longpaths|checkstat|trustctime)|extensions\..*)$"
)
SHOWN_INFO = ("exclude", "attributes", "sparse-checkout")  # not `info/refs`: every ref's name
# The sanitized files and the object store, one folder per worktree, in the hub's part of the common folder.
SANITIZED = SANDBOX_VIEWS
GIT_TIMEOUT = 10.0


@dataclass(frozen=True)
class GitView:
    """The git folders of a linked worktree, and the bwrap arguments that show the sandbox only what
    its commands need of them."""

    common: Path
    gitdir: Path
    args: tuple[str, ...]
    shown: tuple[Path, ...]  # the real folders and files bound back (for the socket scan)
    worktrees: tuple[Path, ...]  # every other worktree of the repository, to hide wherever it is seen


def git_folders(root: Path) -> tuple[Path, Path] | None:
    """(the worktree's own git folder, the common folder) of a linked worktree at `root`, else None."""
    dot_git = root / ".git"
    try:
        text = dot_git.read_text(encoding="utf-8") if dot_git.is_file() and not dot_git.is_symlink() else ""
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return None
    return gitdir, common


def git_view(root: Path, tmp_size: Sequence[str] = ()) -> GitView | None:
    """The view of the git metadata for the worktree at `root`; None when it is not a linked worktree
    (then the caller shows nothing of git). Writes the sanitized config and packed-refs first."""
    folders = git_folders(root)
    if folders is None:
        return None
    gitdir, common = folders
    if not (common / "objects").is_dir():
        return None
    own = common / SANITIZED / gitdir.name
    own.mkdir(parents=True, exist_ok=True)
    config = own / "config"
    _write_changed(config, sanitized_config(common / "config"))
    branch = _head_ref(gitdir)
    packed = own / "packed-refs"
    _write_changed(packed, _packed_refs(common / "packed-refs", branch))
    objects, shallow = task_objects(root, common, gitdir, own)
    args: list[str] = [*tmp_size, "--tmpfs", str(common), "--ro-bind", str(objects), str(common / "objects")]
    shown: list[Path] = [objects]
    # Bound even while empty: a store whose first build failed here may be built by a later command.
    args += ["--ro-bind-try", str(shallow), str(common / "shallow")]
    for name in ("HEAD", *(f"info/{part}" for part in SHOWN_INFO)):
        if (common / name).is_file():
            args += ["--ro-bind", str(common / name), str(common / name)]
    args += ["--ro-bind", str(config), str(common / "config")]
    args += ["--ro-bind", str(packed), str(common / "packed-refs")]
    for part in ("refs", "refs/heads", "refs/tags"):
        args += ["--dir", str(common / part)]
    if branch and _clean_ref(branch) and (common / branch).is_file():
        args += ["--ro-bind", str(common / branch), str(common / branch)]
    args += ["--ro-bind", str(gitdir), str(gitdir)]
    shown.append(gitdir)
    for private in ("logs", "config.worktree"):
        path = gitdir / private
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.is_file():
            args += ["--ro-bind", "/dev/null", str(path)]
    others = tuple(w for w in _worktrees(common) if w != root)
    return GitView(common, gitdir, tuple(args), tuple(shown), others)


def objects_updater(root: Path) -> Callable[[], object] | None:
    """What brings the object store of the worktree at `root` up to date with its HEAD (a jail is
    prepared once a phase, HEAD moves at each checkpoint); None when it is not a linked worktree."""
    folders = git_folders(root)
    if folders is None:
        return None
    gitdir, common = folders
    return functools.partial(task_objects, root, common, gitdir, common / SANITIZED / gitdir.name)


def sanitized_config(path: Path) -> str:
    """The repository config with only KEPT_CONFIG's keys, as git writes a config file."""
    try:
        done = subprocess.run(
            ["git", "config", "--file", str(path), "-z", "--get-regexp", KEPT_CONFIG],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("sandbox.git_config_unread", path=str(path), error=str(exc))
        return "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    sections: dict[str, list[str]] = {}
    for entry in done.stdout.split("\0"):
        key, _, value = entry.partition("\n")
        section, _, name = key.rpartition(".")
        if not section or "." in section or not name.replace("-", "").isalnum():
            continue
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        sections.setdefault(section, []).append(f'\t{name} = "{quoted}"\n')
    sections.setdefault("core", [])
    if not any(line.startswith("\tbare ") for line in sections["core"]):
        sections["core"].append('\tbare = "false"\n')
    return "".join(f"[{section}]\n" + "".join(lines) for section, lines in sections.items())


def _write_changed(path: Path, text: str) -> None:
    """Write `text` unless the file holds it already: every phase prepares a sandbox, and an atomic
    write's fsync costs more than the comparison."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.read_text(encoding="utf-8") == text:
            return
    write_atomic(path, text)


def _head_ref(gitdir: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref:"):
            return head.removeprefix("ref:").strip()
    return None


def _clean_ref(ref: str) -> bool:
    parts = ref.split("/")
    return parts[0] == "refs" and all(p and p not in {".", ".."} for p in parts)


def _packed_refs(path: Path, branch: str | None) -> str:
    """packed-refs with the header and the one line for `branch`, if packed there."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    header = [line for line in lines[:1] if line.startswith("#")]
    kept = [
        line for line in lines if branch and line.split(" ", 1)[-1] == branch and not line.startswith("#")
    ]
    return "".join(f"{line}\n" for line in [*header, *kept[:1]])


def _worktrees(common: Path) -> list[Path]:
    """Every linked worktree's folder the repository records (`worktrees/*/gitdir` names its `.git`)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in (common / "worktrees").iterdir():
            with contextlib.suppress(OSError, UnicodeDecodeError):
                dot_git = Path((entry / "gitdir").read_text(encoding="utf-8").strip())
                found.append(dot_git.parent.resolve())
    return found
