"""The environment a repository's tests run in for `hub eval --history` (issue 34): one venv per eval,
made once from the package registry, then used offline by every test run.

The venv holds the repository's dependencies, its test extras and requirements files, and pytest. It is
made from the hub's own interpreter, so its base interpreter is the hub's, which the sandbox always
mounts; the venv itself sits beside the eval's repository (never inside it: the task's worktree is the
sandbox's one writable place) and goes to the sandbox as a read-only path (`sandbox.read_paths`, or its
`bin` on PATH, which the sandbox follows to the venv and its base: hub.safety.sandbox._toolchain).

The repository is installed as a wheel, not editable: an editable install points at the checkout it was
made from, never at the task's worktree. The installed copy gives the package's metadata (a
`version("pkg")` call works); the code the tests import is the worktree's, since `python -m pytest` puts
the worktree first on sys.path, and PYTHONPATH=src does so for a src layout.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from hub.core.errors import ConfigError
from hub.core.log import get_logger

log = get_logger(__name__)

INSTALL_TIMEOUT = 1800.0
# The extras and dependency groups that hold a project's test dependencies, by their usual names.
TEST_EXTRAS = ("test", "tests", "testing")
# requirements files worth installing for the tests: test and dev ones, not docs or lint ones.
REQUIREMENTS = re.compile(r"^(requirements[-_]?(test|tests|testing|dev)[\w-]*|test[-_]requirements)\.txt$")
READY = ".hub-env-ready"


def make_env(repo: Path, workdir: Path, python: str = sys.executable) -> Path:
    """The eval's venv, `workdir/venv`, with `repo` and its test dependencies installed (made once: a
    second call finds it ready). ConfigError, with pip's last words, when an install fails."""
    venv = workdir / "venv"
    if (venv / READY).exists():
        return venv
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "venv", "--clear", str(venv)], repo)
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, *install_args(repo)], repo)
    (venv / READY).write_text("", encoding="utf-8")
    log.debug("history.env", venv=str(venv), seconds=round(time.monotonic() - started, 1))
    return venv


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install_args(repo: Path) -> list[str]:
    """What pip installs for `repo`'s tests: the repository itself with its test extras, its test
    requirements files, its test dependency groups (PEP 735), and pytest."""
    args: list[str] = []
    pyproject = _pyproject(repo)
    project = pyproject.get("project")
    optional = project.get("optional-dependencies") if isinstance(project, dict) else None
    extras = [e for e in TEST_EXTRAS if isinstance(optional, dict) and e in optional]
    if pyproject or (repo / "setup.py").exists() or (repo / "setup.cfg").exists():
        args.append(f"{repo}[{','.join(extras)}]" if extras else str(repo))
    groups = pyproject.get("dependency-groups")
    for group in TEST_EXTRAS:
        if isinstance(groups, dict) and group in groups:
            args += ["--group", f"{repo / 'pyproject.toml'}:{group}"]
    for folder in (repo, repo / "requirements"):
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if REQUIREMENTS.match(path.name) or (folder.name == "requirements" and "test" in path.name):
                    args += ["-r", str(path)]
    return [*args, "pytest"]


def default_test_command(python: str, repo: Path) -> str:
    """pytest under `python`, at the repository root, writing no caches into it; PYTHONPATH=src for a
    src layout, so the tests import the worktree's code rather than the venv's copy."""
    src = repo / "src"
    layout = "PYTHONPATH=src " if src.is_dir() and any(src.glob("*/__init__.py")) else ""
    return f"PYTHONDONTWRITEBYTECODE=1 {layout}{shlex.quote(python)} -m pytest -q -p no:cacheprovider"


def _pyproject(repo: Path) -> dict[str, object]:
    try:
        return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _run(argv: list[str], cwd: Path) -> None:
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"`{shlex.join(argv[:6])}` took over {INSTALL_TIMEOUT:.0f} s") from None
    if done.returncode:
        raise ConfigError(f"`{shlex.join(argv[:6])}` failed: {done.stderr.strip()[-1500:]}")
