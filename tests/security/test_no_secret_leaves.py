"""Issue 28: no secret leaves in a prompt or a record. Hostile model code prints what it can still read
(the git metadata's remote URL with a token, a tracked file holding the user's .env and environment
values); the acceptance command fails, its output goes into the reflection prompt, the records in
_handoff/ and the stall report. None of the planted values may reach the model server or _handoff/."""

from __future__ import annotations

import os
import secrets
import string
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hub.core.config import load_config
from hub.phases.context import Context
from hub.phases.implement import run_implementer
from hub.phases.setup import create, setup_task
from hub.safety.secrets import redactor
from hub.testing import FakeOllama

IMPL = "impl-model"
HUB_YAML = f"""\
project: demo
roles:
  implementer:
    model: {IMPL}
    backend: ollama
    timeouts: {{first_token: 20, stall: 20, total: 60}}
models:
  {IMPL}: {{num_ctx: 16384}}
acceptance_timeout_seconds: 60
"""
# The model's code: at import it prints every secret it can reach, then the test fails.
# The model's code: it prints every secret it can reach, and the test fails (pytest shows what it printed).
HOSTILE = """import os, subprocess


def greet(name):
    print(subprocess.run(["git", "config", "--list"], capture_output=True, text=True).stdout)
    print(subprocess.run(["git", "remote", "-v"], capture_output=True, text=True).stdout)
    print(open("settings.cfg").read())
    for name in (".gitconfig", ".bash_history", ".env.global", ".netrc"):
        for base in (os.environ.get("HOME", ""), os.path.expanduser("~")):
            try:
                print(open(os.path.join(base, name)).read())
            except OSError as exc:
                print("no", name, exc.strerror)
    print(dict(os.environ))
    return "hello " + name
"""
TEST = 'from src.app import greet\n\n\ndef test_greet():\n    assert greet("bob") == "hello, bob"\n'


def reply(path: str, text: str) -> str:
    return f"{path}\n```python\n{text}```\n"


def test_no_planted_secret_reaches_the_model_server_or_the_handoff_folder(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    checkout = ground.checkout
    (checkout / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
    (checkout / "src" / "__init__.py").write_text("", encoding="utf-8")
    (checkout / "test_app.py").write_text(TEST, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "tests"], cwd=checkout, check=True)
    with FakeOllama() as fake:
        fake.add_model(IMPL)
        fake.script(IMPL, *[reply("src/app.py", HOSTILE)] * 3)
        ctx = Context(load_config(checkout, env={**os.environ, "OLLAMA_HOST": fake.url}))
        fields = {
            "title": "Greet politely",
            "requirements": ["greet() says 'hello, NAME'"],
            "target_file": "src/app.py",
            "complexity": "minor",
            "acceptance_commands": ["python -m pytest -q test_app.py"],
        }
        create(ctx, fields)  # type: ignore[arg-type]
        setup_task(ctx)

        run_implementer(ctx)

        prompts = "\n".join(str(body) for body in fake.chat_requests(IMPL))
    handoff = "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in (checkout / "_handoff").rglob("*")
        if path.is_file()
    )
    # The attack ran and its output reached the prompt: redacted, not absent.
    # The attack ran and its output reached the prompt and the records: redacted, not absent.
    assert "[REDACTED:" in prompts and "[REDACTED:" in handoff, prompts[-3000:]
    assert "remote.origin.url=" in prompts and "service = [REDACTED:" in prompts
    assert leaks(prompts) == [] and leaks(handoff) == []


def token(n: int = 40) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_each_kind_of_secret_becomes_a_marker_naming_its_kind(ground: Any) -> None:
    key = token()
    text = "\n".join(
        [
            "aws = AKIAIOSFODNN7EXAMPLE",
            "[url 'https://me:hunter2hunter2@example.com/']",
            "-----BEGIN RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA" + key,
            "-----END RSA PRIVATE KEY-----",
            f"bearer {key}",
            "service = PLANTED-dotenv-Jd82Lq0Zx",
            "env = PLANTED-envvar-Hq72Ls0Pw",
        ]
    )

    out = redactor(folders=[ground.checkout, ground.home]).redact(text)

    assert "[REDACTED:AWS Access Key]" in out
    assert "[REDACTED:Basic Auth Credentials]" in out
    assert "[REDACTED:Rsa Private Key]" in out and "MIIEow" not in out
    assert "[REDACTED:high-entropy string]" in out and key not in out
    assert "[REDACTED:.env value SERVICE_API_KEY]" in out
    assert "[REDACTED:environment variable MY_SERVICE_TOKEN]" in out


def test_ordinary_test_output_is_left_as_it_is(ground: Any) -> None:
    text = (
        "FAILED tests/test_app.py::test_greet_says_hello_with_a_comma - AssertionError: assert 'hello bob'\n"
        "E       AssertionError: assert add(1, 2) == 4\n"
        "commit 3f2a9c1e4b5d6a7f8e9d0c1b2a3f4e5d6c7b8a9f\n"
        "/home/me/src/proj/tests/test_app.py:12: in test_greet\n"
        "1 failed, 3 passed in 0.12s\n"
    )

    assert redactor(folders=[ground.checkout, ground.home]).redact(text) == text


def test_a_link_named_like_an_env_file_is_not_followed(ground: Any) -> None:
    (ground.checkout / ".env.local").symlink_to(ground.home / ".netrc")

    known = redactor(env={}, folders=[ground.checkout]).known

    assert not any("netrc" in kind for kind in known.values())
    assert Path(ground.checkout / ".env.local").is_symlink()
