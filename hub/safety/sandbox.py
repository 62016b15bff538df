"""The sandbox model-written code runs in: bubblewrap (`bwrap`) on Linux, no daemon.

What a sandboxed command sees (issue 11; issue 28 made it hide by default, stricter than Codex CLI's
whole-disk read-only view and sandbox-runtime's deny-list):

- the system's programs and libraries (`/usr`, `/bin`, `/lib*`, `/etc` without its password hashes and
  host keys, of `/sys` only the CPUs), read-only;
- the *writable root* (the task's worktree), the one writable place besides `sandbox.writable_paths`;
- read-only, what its commands need to run: each `PATH` entry with the prefix it belongs to (a venv and
  its base interpreter, `~/.pyenv`, `~/.nvm/versions/node/v20`, `~/.cargo`), the hub's own interpreter,
  the part of the git metadata the worktree's commands need (`hub.safety.git_view`: the task's own
  objects and ref, a config without remotes or credentials; no stash, no other worktree), and
  `sandbox.read_paths`. Nothing else of the home folder or of the user's checkout is there: not
  `~/.gitconfig`, `~/.bash_history`, the checkout's `.env`. A relative `PATH` entry (`.`, `bin`) is never
  a toolchain (it would name the hub's working folder, the checkout), nor is a folder inside the
  checkout or the worktree, but a virtual environment (its own folder alone);
- inside the writable root, the git metadata and the hub's control files (`_handoff/`, `hub.yaml`, the
  prompts folder, `sgconfig.yml` and its rule folders) read-only again: nothing the model's code does can
  forge a verdict, change the judge or the rules, or rewrite history;
- a private, empty `/tmp` and `/dev/shm` (`sandbox.limits.disk_mb` each), and `HOME` pointing into it;
  the well-known credential files (`~/.ssh`, `~/.aws`, `~/.netrc`...) covered should a read path or a
  toolchain folder hold them;
- no socket to connect to: `/run` is not there, and every socket file something listens on in a folder
  it sees is covered, found in the kernel's list (`/proc/net/unix`), not by a walk (a socket is reachable
  through a read-only mount and outside the network namespace);
- no network but its own loopback (`--unshare-net`), unless `sandbox.network: true`; the daemons'
  sockets (docker, podman, D-Bus, postgres, `/run/user`...) hidden with `/run`, as above;
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
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hub.core.errors import HubError
from hub.core.log import get_logger
from hub.core.redaction import Redactor
from hub.core.sandbox_config import SandboxLimits, SandboxMode, SandboxSettings
from hub.safety.cgroup import Delegation, take
from hub.safety.git_view import git_folders, git_view, objects_updater
from hub.safety.limits import prlimit_argv, rlimits

Which = Callable[[str], str | None]
log = get_logger(__name__)


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

SANDBOX_HOME = "/tmp/home"
# The private /tmp (HOME is in it) and /dev/shm are sized `sandbox.limits.disk_mb` each: a tmpfs is
# memory, by default half the host's RAM each, so an uncapped one let a command push the machine into
# the OOM killer.
MIB = 1024 * 1024
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
    # Sandboxed: the folders the command sees besides the system's (`hub doctor` prints them).
    seen: View | None = None
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # What replaces the secrets in the command's output (hub.phases.acceptance sets the user's .env values).
    redactor: Redactor | None = None
    # Sets the per-process limits in the child, where no `prlimit` is in the prefix to do it.
    preexec: Callable[[], None] | None = None
    # Where bwrap stands in `prefix` (after prlimit's arguments): its options follow it.
    bwrap_at: int = 0
    # Where each command gets a cgroup of its own (hub.safety.cgroup); None: memory and processes polled.
    cgroup: Path | None = None
    # Brings the worktree's git object store up to date (HEAD moves at each checkpoint): before each command.
    git_objects: Callable[[], object] | None = None

    def argv(
        self, command: str, cwd: Path, info_fd: int | None = None, args_fd: int | None = None
    ) -> list[str]:
        """The command line that runs `command` in `cwd`. With `args_fd` (a file `options` was written
        to), bwrap reads its options from there (`--args`): the sandbox's init is a fork of bwrap, and its
        /proc/1/cmdline showed the command every host path the mounts name (issue 38)."""
        if not self.sandboxed:
            return ["/bin/sh", "-c", command]
        info = ["--info-fd", str(info_fd)] if info_fd is not None else []
        run = ["--chdir", str(cwd), "--", "/bin/sh", "-c", command]
        if args_fd is not None:
            return [*self.prefix[: self.bwrap_at + 1], "--args", str(args_fd), *info, *run]
        return [*self.prefix, *info, *run]

    def options(self) -> bytes:
        """bwrap's mount and namespace options, NUL-separated, for `--args`."""
        return b"".join(os.fsencode(arg) + b"\0" for arg in self.prefix[self.bwrap_at + 1 :])


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
    """The socket files under `roots` something listens on, except inside a folder hidden already: the
    kernel's own list (`/proc/net/unix`, one read), not a walk of the folders. A walk before every command
    cost 170 ms under pyenv (20,003 entries) and, bounded, missed a socket deeper down (issue 38); a socket
    file nothing listens on cannot be connected to. The list holds this network namespace's sockets: one
    bound from another namespace (a container's) into a folder the sandbox shows is not in it."""
    tops = [os.path.realpath(r) for r in roots]
    skip = [os.path.realpath(h) for h in hidden]
    found = []
    for path in _listening():
        real = os.path.realpath(path)
        if any(_inside(real, top) for top in tops) and not any(_inside(real, s) for s in skip):
            found.append(real)
    return found


def _listening() -> list[str]:
    """The paths of the Unix sockets bound in this network namespace (abstract ones, `@...`, left out)."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as listing:
            lines = listing.read().splitlines()[1:]
    except OSError as exc:
        log.warning("sandbox.sockets_unlisted", error=str(exc))
        return []
    return [
        fields[7] for line in lines if len(fields := line.split(None, 7)) == 8 and fields[7].startswith("/")
    ]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@functools.cache
def sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bwrap caps a tmpfs (`--size`, bubblewrap 0.8.0 and later)."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


@functools.cache
def refuses_userns(bwrap: str) -> bool:
    """Whether this bwrap can keep the command from making user namespaces (`--disable-userns`, 0.8.0)."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-user", "--disable-userns", "--", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


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
    hidden: Sequence[str] = (),
    tmp_size: int | None = None,
    cgroups: Delegation | None = None,
) -> Jail:
    """The jail commands in `writable_root` run in. `protected` are paths inside the writable root that
    stay read-only (git metadata and the hub's control files); `hidden`, paths covered besides the
    credentials and socket files; `cgroups`, where commands get cgroups (default: `cgroup.take()`).
    Raises SandboxUnavailable for `required`."""
    env = os.environ if env is None else env
    protected = tuple(protected)
    if settings.mode == SandboxMode.OFF:
        return Jail(
            False,
            "unsandboxed: sandbox: off in hub.yaml",
            env=dict(env),
            guarded=protected,
            limits=settings.limits,
        )
    bwrap, why = availability(which)
    if bwrap is None:
        if settings.mode == SandboxMode.REQUIRED:
            raise SandboxUnavailable(why)
        return Jail(
            False,
            f"unsandboxed (sandbox: auto): {why}",
            env=child_env(env, str(Path.home())),
            guarded=protected,
            limits=settings.limits,
        )
    root = writable_root.resolve()
    size = (tmp_size or settings.limits.disk_mb * MIB) if sizes_tmpfs(bwrap) else None
    # The per-process limits, set by prlimit before it execs bwrap (hub.safety.limits; without prlimit,
    # Jail.preexec sets them in the child).
    prlimit = which("prlimit")
    limited = prlimit_argv(prlimit, settings.limits) if prlimit else []
    seen = view(root, settings, env)
    prefix = [*limited, bwrap, *_mounts(root, protected, settings, env, hidden, size, seen)]
    prefix += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    # The root bwrap builds is a tmpfs of its own: writable, it held any amount of memory uncounted.
    prefix += ["--remount-ro", "/"]
    if refuses_userns(bwrap):
        # A user namespace nested inside would give its processes a PID namespace and mounts of their own,
        # out of the watch's sight (issue 38): the kernel refuses any.
        prefix += ["--unshare-user", "--disable-userns"]
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
        seen,
        settings.limits,
        preexec=None if prlimit else rlimits(settings.limits),
        bwrap_at=len(limited),
        cgroup=(cgroups or take()).base,
        git_objects=objects_updater(root),
    )


# The system's programs and libraries: read-only, everything else of the disk absent (issue 28: a
# whole-disk read-only view showed the user's home, the checkout's ignored .env, their other projects).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Of /sys only the CPUs (the processor count programs read): the whole of it showed the host's network
# interfaces whatever the network namespace (issue 38).
SYS_SHOWN = ("/sys/devices/system/cpu",)
# What of the system folders holds secrets a root hub could read: the password hashes, host keys.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers.d")
SYSTEM_SECRET_GLOBS = ("/etc/ssh/ssh_host_*_key",)
# A PATH entry named so is a tool manager's shims folder: its root (pyenv's, rbenv's) comes whole.
SHIMS = "shims"
# The sub-folders of a toolchain prefix (`<prefix>/bin` on PATH) a program in it may load from.
PREFIX_PARTS = ("bin", "sbin", "lib", "lib64", "libexec", "include", "share")


@dataclass(frozen=True)
class View:
    """What a sandboxed command sees besides the system folders: read-only folders, writable folders."""

    read: tuple[Path, ...]
    write: tuple[Path, ...]


def view(root: Path, settings: SandboxSettings, env: Mapping[str, str]) -> View:
    """The folders a command in `root` gets: its toolchain (PATH entries, their prefixes, the venv, the
    hub's own interpreter), the git metadata the worktree needs, `sandbox.read_paths`, read-only; the
    root and `sandbox.writable_paths`, writable. Anything else of the home folder or the user's
    checkout is not there at all."""
    home = _home(env)
    wanted = [*_toolchain(env, home, _repositories(root)), Path(sys.prefix), Path(sys.base_prefix)]
    wanted += [p.expanduser() for p in settings.read_paths]
    write = [p.expanduser() for p in settings.writable_paths] + [root]
    return View(_outermost(wanted, skip=SYSTEM), _outermost(write, skip=()))


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or str(Path.home())).resolve()


def _repositories(root: Path) -> list[Path]:
    """The worktree and the user's checkout it belongs to (the common git folder's parent)."""
    folders = git_folders(root)
    return [root] if folders is None else [root, folders[1].parent]


def _toolchain(env: Mapping[str, str], home: Path, repositories: Sequence[Path] = ()) -> list[Path]:
    """The folders the command's programs come from: each PATH entry, with the prefix it belongs to
    (`~/.pyenv/versions/3.11/bin` -> `~/.pyenv/versions/3.11`: the interpreter's library), a venv's base
    interpreter (pyvenv.cfg `home`), a shims folder's manager root. Never the home folder itself, and of
    `~/.local` only its programs and libraries (its `share` holds applications' data). Never a relative
    entry, nor one inside (or above) one of `repositories` but a venv there, its own folder alone: `.` on
    PATH, or a VIRTUAL_ENV set to the checkout, mounted the whole checkout, `.env` included (issue 38)."""
    found: list[Path] = []
    entries = [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p and os.path.isabs(p)]
    if env.get("VIRTUAL_ENV") and os.path.isabs(env["VIRTUAL_ENV"]):
        entries.append(Path(env["VIRTUAL_ENV"]) / "bin")
    for entry in entries:
        try:
            entry = entry.resolve()
        except OSError:
            continue
        if not entry.is_dir():
            continue
        inside = [r for r in repositories if entry.is_relative_to(r) or r.is_relative_to(entry)]
        if inside:
            venv = entry.parent
            if entry.name == "bin" and venv not in inside and (venv / "pyvenv.cfg").is_file():
                base = _venv_base(venv)
                found += [venv, *([base] if base and not any(base.is_relative_to(r) for r in inside) else [])]
            continue
        found.append(entry)
        parent = entry.parent
        if entry.name == SHIMS and parent != home:
            found.append(parent)
            continue
        if entry.name not in {"bin", "sbin"} or parent in {home, Path("/")}:
            continue
        base = _venv_base(parent)
        if base is not None:
            found += [parent, base]
        elif parent.name == ".local" and parent.parent == home:
            found += [parent / "bin", parent / "lib"]
        else:
            found += [parent / part for part in PREFIX_PARTS]
    return found


def _venv_base(prefix: Path) -> Path | None:
    """A venv's base interpreter prefix (pyvenv.cfg `home = <prefix>/bin`), or None if not a venv."""
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home_bin = Path(value.strip())
            return home_bin.parent if home_bin.name == "bin" else home_bin
    return prefix


def _outermost(paths: Iterable[Path], skip: Sequence[str]) -> tuple[Path, ...]:
    """The existing folders (resolved) of `paths` not inside another of them nor inside a system folder,
    outermost first, each once."""
    systems = [os.path.realpath(s) for s in skip]
    found: set[str] = set()
    for path in paths:
        resolved = os.path.realpath(path)
        # Strings, not Path.is_relative_to: pairs of folders, before each command.
        if os.path.exists(resolved) and resolved != "/" and not any(_inside(resolved, s) for s in systems):
            found.add(resolved)
    outer = [Path(p) for p in found if not any(p != q and _inside(p, q) for q in found)]
    return tuple(sorted(outer, key=lambda p: (len(p.parts), str(p))))


def _mounts(
    root: Path,
    protected: Iterable[Path],
    settings: SandboxSettings,
    env: Mapping[str, str],
    hidden: Sequence[str],
    tmp_size: int | None = None,
    seen: View | None = None,
) -> list[str]:
    sized = ["--size", str(tmp_size)] if tmp_size else []
    args: list[str] = []
    for name in SYSTEM:
        path = Path(name)
        if path.is_symlink():  # /bin -> usr/bin on a merged-/usr system
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    args += [arg for name in SYS_SHOWN if os.path.isdir(name) for arg in ("--ro-bind", name, name)]
    args += ["--dev", "/dev", "--proc", "/proc", *sized, "--tmpfs", "/tmp"]
    # /dev is a tmpfs of its own, writable by the command: read-only but for a capped /dev/shm.
    args += [*sized, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    seen = seen or view(root, settings, env)
    for path in seen.read:
        args += ["--ro-bind", str(path), str(path)]
    git = git_view(root, sized)
    if git is not None:
        args += git.args
    if settings.network:
        # DNS: /etc/resolv.conf is often a link into /run, which the command does not see otherwise.
        with contextlib.suppress(OSError):
            resolv = Path("/etc/resolv.conf").resolve()
            if resolv.is_file() and not resolv.is_relative_to("/etc"):
                args += ["--ro-bind", str(resolv), str(resolv)]
    # The command's own HOME is a fresh folder in its private /tmp.
    args += ["--dir", SANDBOX_HOME]
    for path in seen.write:
        if path != root:
            args += ["--bind", str(path), str(path)]
    args += ["--bind", str(root), str(root)]
    read_only = _read_only_inside(root, protected)
    # A mount point cannot be renamed or removed (EBUSY), but its parent folder can: `mv tools x` then a
    # fresh `tools/rules` swapped a nested rule folder. Each folder between the root and a read-only
    # path is made a (writable) mount point of its own, parents first, so none of them can move.
    pinned = _parents_inside(root, read_only)
    for path in sorted([*pinned, *read_only], key=lambda p: len(p.parts)):
        args += ["--bind" if path in pinned else "--ro-bind", str(path), str(path)]
    shown = tuple(str(p) for p in (*seen.read, *seen.write, *SYSTEM))
    # No socket file anywhere the command sees: neither a read-only mount nor --unshare-net stops
    # connect() on one, and a user daemon's socket may sit in a toolchain folder or the checkout.
    gits: tuple[Path, ...] = git.shown if git is not None else ()
    sockets = _sockets_under([str(p) for p in (*seen.write, *seen.read, *gits)], ())
    # Another task's worktree is hidden wherever the command would see it (inside .git, a tmpfs does).
    others = [str(w) for w in git.worktrees] if git is not None else []
    secrets = [*SYSTEM_SECRETS, *(str(p) for g in SYSTEM_SECRET_GLOBS for p in Path("/").glob(g.lstrip("/")))]
    for name in (*hidden, *secrets, *sockets, *others):
        args += _hide(Path(name), shown)
    # The account's own home too, should HOME point elsewhere.
    owner = Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()
    bases = {_home(env), root, owner}
    for name in CREDENTIALS:
        for base in bases:
            args += _hide(base / name, shown)
    return args


def _hide(path: Path, shown: Sequence[str]) -> list[str]:
    """The arguments that cover `path`, when it exists inside something the command sees."""
    # Strings, not Path.is_relative_to: ~80 paths against every folder shown, before each command.
    text = str(path)
    if not any(_inside(text, folder) for folder in shown):
        return []
    if path.is_dir() and not path.is_symlink():
        return ["--tmpfs", str(path)]
    if os.path.lexists(path) and not path.is_symlink():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


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
