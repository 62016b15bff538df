"""The sandbox model-written code runs in: bubblewrap (`bwrap`) on Linux, no daemon.

What a sandboxed command sees (issue 11; the same policy as Codex CLI's Linux sandbox):

- the whole filesystem read-only, except the *writable root* (the repository today, the task's worktree
  once tasks have their own) and the extra writable paths of `sandbox.writable_paths`;
- inside the writable root, the git metadata and the hub's control files (`_handoff/`, `hub.yaml`, the
  prompts folder, `sgconfig.yml` and its rule folders) read-only again: nothing the model's code does can
  forge a verdict, change the judge or the rules, or rewrite history;
- a private, empty `/tmp`, and `HOME` pointing to a fresh folder in it; the real home stays readable
  (pyenv, nvm and `~/.local` hold the toolchains tests need) except its credentials (`~/.ssh`, `~/.aws`,
  `~/.config/gh`, `~/.netrc`, `~/.docker`, `~/.kube`, `~/.gnupg`...), which are hidden by empty mounts;
- no network but its own loopback (`--unshare-net`), unless `sandbox.network: true`; the well-known
  daemon sockets (docker, podman, containerd, libvirt, D-Bus, `/run/user`) and every socket file under
  `/run` (postgres, mysql, systemd...) hidden, since a socket file
  is reachable through a read-only mount and outside the network namespace;
- an environment cut to an allowlist (`PATH`, locale, `TERM`...; never anything that looks like a token);
- no capabilities, even when the hub runs as root (bwrap keeps root's unless told);
- its own PID namespace, killed with the hub (`--die-with-parent`), in a session of its own, so a timeout
  or the hub's death ends the whole tree: nothing escapes by `setsid` or double fork.

`sandbox: auto` (the default) sandboxes where bwrap works and says so in the phase log and `hub doctor`
when it cannot; `required` refuses to run a command unsandboxed (the task halts `sandbox_unavailable`);
`off` runs commands as before, with the user's rights. macOS has no bwrap: `auto` runs unsandboxed there
(`sandbox-exec` is deprecated and not used), and says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hub.core.config import SandboxMode, SandboxSettings
from hub.core.errors import HubError

Which = Callable[[str], str | None]


# Variables a command may see. Anything else (tokens, keys, cloud credentials, HUB_MCP_TOKEN) stays out.
ENV_ALLOW = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "NODE_PATH",
        "CI",
        "NO_COLOR",
        "FORCE_COLOR",
        "SOURCE_DATE_EPOCH",
    }
)
ENV_ALLOW_PREFIX = ("LC_",)
# Even an allowed name is dropped when it looks like a credential (belt and braces for PYTHONPATH-like
# names a user adds to ENV_ALLOW by accident).
ENV_SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$|^AWS_|API_KEY|AUTH)", re.IGNORECASE)

# Credential folders and files hidden, under the real HOME and under the writable root.
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gh",
    ".config/gcloud",
    ".config/hub",
    ".netrc",
    ".docker",
    ".kube",
    ".gnupg",
    ".password-store",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    # The tokens of the coding agents and model hubs a user of this tool is likely to have signed in to.
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".cache/huggingface/token",
    ".huggingface/token",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".pgpass",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".local/share/keyrings",
)

# Unix sockets outside HOME and /tmp through which a sandboxed command could act outside it: neither a
# read-only mount nor --unshare-net stops connect() on a socket file, and docker.sock is root.
HIDDEN_SOCKETS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman",
    "/run/containerd",
    "/var/run/libvirt",
    "/run/dbus",
    "/run/snapd.socket",
    "/run/user",
)

# Folders searched for any other socket file (postgres, mysql, systemd's private bus...) to hide the same
# way: a list of daemons is never complete.
SOCKET_ROOTS = ("/run", "/var/run")
SOCKETS_SCANNED = 20000  # entries at most, so a huge /run costs a bounded walk

SANDBOX_HOME = "/tmp/home"
# The size of the private /tmp (HOME is in it) and of /dev/shm: a tmpfs is memory, by default half the
# host's RAM each, so an uncapped one let a command push the machine into the OOM killer.
TMP_SIZE = 1024 * 1024 * 1024
FIX_INSTALL = (
    "install bubblewrap (Debian/Ubuntu: `sudo apt-get install -y bubblewrap`; Fedora: `sudo dnf install "
    "bubblewrap`), or set `sandbox: auto` or `sandbox: off` in hub.yaml to run acceptance commands "
    "unsandboxed"
)


@dataclass(frozen=True)
class Jail:
    """How commands will run: the argv prefix that sandboxes them (empty: unsandboxed), the environment,
    and a sentence for the phase log saying which."""

    sandboxed: bool
    why: str
    prefix: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # The control files in the writable root: one absent before a command must be absent after it.
    guarded: tuple[Path, ...] = ()

    def argv(self, command: str, cwd: Path, info_fd: int | None = None) -> list[str]:
        if not self.sandboxed:
            return ["/bin/sh", "-c", command]
        info = ["--info-fd", str(info_fd)] if info_fd is not None else []
        return [*self.prefix, *info, "--chdir", str(cwd), "--", "/bin/sh", "-c", command]


def child_env(env: Mapping[str, str], home: str) -> dict[str, str]:
    """The allowlisted part of `env`, with HOME and TMPDIR pointing into the sandbox's private space."""
    kept = {
        name: value
        for name, value in env.items()
        if (name in ENV_ALLOW or name.startswith(ENV_ALLOW_PREFIX)) and not ENV_SECRET.search(name)
    }
    kept.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    kept["HOME"] = home
    kept["TMPDIR"] = "/tmp"
    return kept


def find_bwrap(which: Which = shutil.which) -> str | None:
    return which("bwrap")


@functools.cache
def _works(bwrap: str) -> str | None:
    """None when bwrap can build a sandbox here, else why not (no user namespaces in a container...)."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "true"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not be started: {exc}"
    if done.returncode != 0:
        return f"{bwrap} cannot create a sandbox here: {done.stderr.strip() or f'exit {done.returncode}'}"
    return None


def _sockets_under(roots: Sequence[str], hidden: Sequence[str]) -> list[str]:
    """Socket files under `roots` (links not followed), except inside a folder hidden already."""
    skip = {os.path.realpath(h) for h in hidden}
    found: list[str] = []
    seen = 0
    for top in dict.fromkeys(os.path.realpath(r) for r in roots):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skip]
            seen += len(dirs) + len(files)
            for name in files:
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    if stat.S_ISSOCK(os.lstat(path).st_mode) and path not in skip:
                        found.append(path)
            if seen > SOCKETS_SCANNED:
                return found
    return found


@functools.cache
def _sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bwrap caps a tmpfs (`--size`, bubblewrap 0.8.0 and later)."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


def availability(which: Which = shutil.which) -> tuple[str | None, str]:
    """(bwrap's path, "") when sandboxing works on this machine, else (None, why not)."""
    if not sys.platform.startswith("linux"):
        return None, f"no bubblewrap on {sys.platform}: acceptance commands run unsandboxed there"
    bwrap = find_bwrap(which)
    if bwrap is None:
        return None, "bwrap (bubblewrap) is not on PATH"
    problem = _works(bwrap)
    return (None, problem) if problem else (bwrap, "")


class SandboxUnavailable(HubError):
    """`sandbox: required`, and no sandbox can be built here."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(f"sandbox: required, but {why}", hint=FIX_INSTALL)


def prepare(
    settings: SandboxSettings,
    writable_root: Path,
    protected: Iterable[Path] = (),
    env: Mapping[str, str] | None = None,
    which: Which = shutil.which,
    hidden: Sequence[str] = HIDDEN_SOCKETS,
    tmp_size: int = TMP_SIZE,
    socket_roots: Sequence[str] = SOCKET_ROOTS,
) -> Jail:
    """The jail commands in `writable_root` run in. `protected` are paths inside the writable root that
    stay read-only (git metadata and the hub's control files). Raises SandboxUnavailable for `required`."""
    env = os.environ if env is None else env
    protected = tuple(protected)
    if settings.mode == SandboxMode.OFF:
        return Jail(False, "unsandboxed: sandbox: off in hub.yaml", env=dict(env), guarded=protected)
    bwrap, why = availability(which)
    if bwrap is None:
        if settings.mode == SandboxMode.REQUIRED:
            raise SandboxUnavailable(why)
        return Jail(
            False,
            f"unsandboxed (sandbox: auto): {why}",
            env=child_env(env, str(Path.home())),
            guarded=protected,
        )
    root = writable_root.resolve()
    size = tmp_size if _sizes_tmpfs(bwrap) else None
    hidden = (*hidden, *_sockets_under(socket_roots, hidden))
    prefix = [bwrap, *_mounts(root, protected, settings, env, hidden, size)]
    prefix += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    # Run by root, bwrap keeps root's capabilities unless told: the command could umount the read-only
    # binds (and forge the judge's report), mknod the host's disk or load a kernel module.
    prefix += ["--cap-drop", "ALL"]
    if not settings.network:
        prefix.append("--unshare-net")
    where = "network on" if settings.network else "no network"
    return Jail(
        True,
        f"sandboxed (bwrap): writable {root} only, {where}",
        tuple(prefix),
        child_env(env, SANDBOX_HOME),
        protected,
    )


def _mounts(
    root: Path,
    protected: Iterable[Path],
    settings: SandboxSettings,
    env: Mapping[str, str],
    hidden: Sequence[str],
    tmp_size: int | None = None,
) -> list[str]:
    sized = ["--size", str(tmp_size)] if tmp_size else []
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *sized, "--tmpfs", "/tmp"]
    # /dev is a tmpfs of its own, writable by the command: read-only but for a capped /dev/shm.
    args += [*sized, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    # What the command needs that the private /tmp would hide (a clone, its .venv, or a repository
    # under /tmp: CI and pytest's tmp_path put them there) is shown again, read-only.
    for path in _needed_under_tmp(root, env):
        args += ["--ro-bind", str(path), str(path)]
    # The real HOME stays readable (pyenv, nvm, ~/.local hold the toolchain the tests need), minus every
    # credential folder in it; the command's own HOME is a fresh folder in its private /tmp.
    home = Path(env.get("HOME") or str(Path.home())).resolve()
    args += ["--dir", SANDBOX_HOME]
    for extra in settings.writable_paths:
        path = extra.expanduser().resolve()
        if path.exists():
            args += ["--bind", str(path), str(path)]
    args += ["--bind", str(root), str(root)]
    read_only = _read_only_inside(root, protected)
    # A mount point cannot be renamed or removed (EBUSY), but its parent folder can: `mv tools x` then a
    # fresh `tools/rules` swapped a nested rule folder. Each folder between the root and a read-only
    # path is made a (writable) mount point of its own, parents first, so none of them can move.
    pinned = _parents_inside(root, read_only)
    for path in sorted([*pinned, *read_only], key=lambda p: len(p.parts)):
        args += ["--bind" if path in pinned else "--ro-bind", str(path), str(path)]
    for name in hidden:
        path = Path(name)
        if path.is_dir() and not path.is_symlink():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    # The account's own home too, should HOME point elsewhere.
    owner = Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()
    for name in CREDENTIALS:
        for base in {home, root, owner}:
            secret = base / name
            if secret.is_dir():
                args += ["--tmpfs", str(secret)]
            elif secret.exists():
                args += ["--ro-bind", "/dev/null", str(secret)]
    return args


def _needed_under_tmp(root: Path, env: Mapping[str, str]) -> list[Path]:
    """The folders under /tmp a command needs to run at all: its PATH, the hub's own interpreter (tests
    run `sys.executable`), and the git metadata of the writable root (a worktree's `.git` file points
    into the repository's git folder). Outermost first, each once; none of them becomes writable."""
    wanted = [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
    wanted += [Path(sys.prefix), Path(sys.base_prefix)]
    wanted += _git_dirs(root)
    tmp = Path("/tmp").resolve()
    found: set[Path] = set()
    for path in wanted:
        with contextlib.suppress(OSError):
            resolved = path.resolve()
            if resolved.is_relative_to(tmp) and resolved != tmp and resolved.is_dir():
                found.add(resolved)
    outermost = [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]
    return sorted(outermost, key=lambda p: len(p.parts))


def _git_dirs(root: Path) -> list[Path]:
    """The git folder a worktree's `.git` file names, and the repository's common git folder."""
    dot_git = root / ".git"
    try:
        text = dot_git.read_text(encoding="utf-8") if dot_git.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return []
    if not text.startswith("gitdir:"):
        return []
    gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
    found = [gitdir]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        found.append((gitdir / common).resolve())
    return found


def absent(paths: Iterable[Path]) -> list[Path]:
    return [p for p in paths if not os.path.lexists(p)]


def remove_created(were_absent: Iterable[Path]) -> list[Path]:
    """Remove the control files a command created where none was (a read-only mount needs something to
    cover, so a missing `prompts/` or `sgconfig.yml` could be made, and the hub reads a repository's
    own first). Links are removed, never followed. Returns what was removed."""
    removed = []
    for path in were_absent:
        if not os.path.lexists(path):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        removed.append(path)
    return removed


def _parents_inside(root: Path, read_only: Sequence[Path]) -> set[Path]:
    """The folders strictly between `root` and each read-only path that are not read-only themselves."""
    return {
        parent
        for path in read_only
        for parent in path.parents
        if parent.is_relative_to(root)
        and parent != root
        and not any(parent.is_relative_to(other) for other in read_only)
    }


def _read_only_inside(root: Path, protected: Iterable[Path]) -> list[Path]:
    """The protected paths that exist and lie in the writable root, resolved (a symlink to outside is
    read-only already), each once, parents before children."""
    found: set[Path] = set()
    for path in protected:
        try:
            resolved = path.resolve()
        except OSError:
            continue
        if resolved.exists() and resolved.is_relative_to(root) and resolved != root:
            found.add(resolved)
    return sorted(found, key=lambda p: len(p.parts))
