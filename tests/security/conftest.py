"""The ground the security suite stands on: a checkout outside /tmp and a home folder full of planted
secrets, as a real user's are.

The sandbox's /tmp is private, so a checkout or HOME under /tmp (pytest's tmp_path) is invisible inside
it whatever the sandbox's rules say: such a test looks safer than real use. Everything here lives under
`~/.cache/hub-security-tests/` of the account running the tests (HUB_SECURITY_ROOT overrides it; a HOME
under /tmp, as CI's fresh one is, moves it to /var/tmp), and is removed after each test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# One value per planted secret, each unique, so a leak names where it came from.
PLANTED = {
    ".gitconfig": '[url "https://x-access-token:ghp_Pl4nt3dGitc0nfigT0ken9x8Y7w6V5u4T3@github.com/"]\n'
    "\tinsteadOf = https://github.com/\n",
    ".config/pip/pip.conf": "[global]\nindex-url = https://user:PLANTED-pip-Qz81kLm2@pypi.example.com/simple\n",
    ".ollama/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nPLANTEDollamaKEYb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n",
    ".bash_history": "export DEPLOY_PASSWORD=PLANTED-history-Vx93nQ\nls\n",
    ".config/anthropic/api_key": "PLANTED-anthropic-sk-ant-api03-Rm4tQ8wZ\n",
    ".env.global": "GLOBAL_API_KEY=PLANTED-envglobal-Kj27Hs9d\n",
    ".ssh/id_rsa": "PLANTED-ssh-private-key\n",
    ".netrc": "machine example.com login me password PLANTED-netrc-Wq71\n",
    ".config/someapp/settings.json": '{"token": "PLANTED-someapp-Tk83"}\n',
}
CHECKOUT_ENV = (
    "SERVICE_API_KEY=PLANTED-dotenv-Jd82Lq0Zx\nDATABASE_URL=postgres://app:PLANTED-dbpass-77Qa@db/app\n"
)
ENV_SECRETS = {
    "MY_SERVICE_TOKEN": "PLANTED-envvar-Hq72Ls0Pw",
    "OPENAI_API_KEY": "sk-PLANTED-envvar-openai-4kR",
}
# What model code can still read, and so print: the git metadata the worktree needs (a remote URL with a
# token), and a tracked file holding the same values as the user's .env and environment.
REMOTE = "https://x-access-token:ghp_PLANTEDremote8sK2mQ9zX4vB7nR1tY5wE3@github.com/u/proj.git"
TRACKED = "service = PLANTED-dotenv-Jd82Lq0Zx\nfrom_env = PLANTED-envvar-Hq72Ls0Pw\n"
MARK = "PLANTED"


@dataclass(frozen=True)
class Ground:
    root: Path  # outside /tmp
    home: Path  # the planted home folder
    checkout: Path  # the user's checkout, a git repository in the home folder
    tool: Path  # a toolchain folder under the home folder, on PATH


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def folder_outside_tmp() -> Path:
    base = Path(os.environ.get("HUB_SECURITY_ROOT") or Path.home() / ".cache" / "hub-security-tests")
    if base.resolve().is_relative_to("/tmp"):
        # A HOME under /tmp (CI's fresh one): /var/tmp is as hidden from the sandbox as a home folder.
        base = Path("/var/tmp") / f"hub-security-tests-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="t-", dir=base)).resolve()
    assert not folder.is_relative_to("/tmp"), "the security suite must run outside /tmp"
    return folder


@pytest.fixture
def outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder outside /tmp whose `home/` (HOME for the test) holds the planted secrets; removed after."""
    root = folder_outside_tmp()
    home = root / "home"
    for name, text in PLANTED.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ground(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Ground:
    """A home folder with planted secrets (HOME points at it), a checkout in it with a git-ignored
    .env, a toolchain folder under it on PATH, and secret-looking environment variables."""
    root = outside_tmp
    home = root / "home"
    tool = home / ".local" / "bin"
    tool.mkdir(parents=True)
    (tool / "mytool").write_text("#!/bin/sh\necho TOOL-RAN\n", encoding="utf-8")
    (tool / "mytool").chmod(0o755)
    checkout = home / "src" / "proj"
    checkout.mkdir(parents=True)
    _git(checkout, "init", "-q", "-b", "main")
    with (checkout / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            "[user]\n\tname = Hub Test\n\temail = hub-test@example.invalid\n[commit]\n\tgpgsign = false\n"
        )
    (checkout / "src").mkdir()
    (checkout / "src" / "app.py").write_text(
        'def greet(name):\n    return "hello " + name\n', encoding="utf-8"
    )
    (checkout / ".gitignore").write_text(".env\n", encoding="utf-8")
    (checkout / ".env").write_text(CHECKOUT_ENV, encoding="utf-8")
    (checkout / "settings.cfg").write_text(TRACKED, encoding="utf-8")
    _git(checkout, "remote", "add", "origin", REMOTE)
    (checkout / ".git" / "info" / "exclude").write_text("/_handoff/\n", encoding="utf-8")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "initial")
    monkeypatch.setenv(
        "PATH", f"{tool}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    return Ground(root, home, checkout, tool)


def every_planted_value() -> list[str]:
    """The secret part of every planted value, as a leak would show it."""
    found = []
    for text in [*PLANTED.values(), CHECKOUT_ENV, *ENV_SECRETS.values(), REMOTE, TRACKED]:
        found += [word for word in _words(text) if MARK in word]
    return sorted(set(found))


def _words(text: str) -> list[str]:
    for sep in "\n\t =:@\"'{}/,[]":
        text = text.replace(sep, " ")
    return text.split()


@pytest.fixture
def leaks() -> Callable[[str], list[str]]:
    """The planted values found in a text."""
    planted = every_planted_value()
    return lambda text: [value for value in planted if value in text]
