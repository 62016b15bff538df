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
from hub.core.redaction import redactor
from hub.phases.context import Context
from hub.phases.implement import run_implementer
from hub.phases.judge_runner import run_judge
from hub.phases.local_review import run_local_review
from hub.phases.setup import create, setup_task
from hub.testing import FakeOllama

IMPL, REV = "impl-model", "rev-model"
HUB_YAML = f"""\
project: demo
roles:
  implementer:
    model: {IMPL}
    backend: ollama
    timeouts: {{first_token: 20, stall: 20, total: 60}}
  local_reviewer:
    model: {REV}
    backend: ollama
    timeouts: {{first_token: 20, stall: 20, total: 60}}
models:
  {IMPL}: {{num_ctx: 16384}}
  {REV}: {{num_ctx: 16384}}
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


# The model's code passes its test and hides what it read in the one file it may write.
SMUGGLING = """import subprocess


def greet(name):
    loot = subprocess.run(["git", "remote", "-v"], capture_output=True, text=True).stdout
    loot += open("settings.cfg").read()
    with open(__file__, "a") as me:
        me.write("\\n# " + loot.replace("\\n", "\\n# ") + "\\n")
    return "hello, " + name
"""


def reply(path: str, text: str) -> str:
    return f"{path}\n```python\n{text}```\n"


def start(ground: Any, fake: FakeOllama) -> Context:
    checkout = ground.checkout
    (checkout / "hub.yaml").write_text(HUB_YAML, encoding="utf-8")
    (checkout / "src" / "__init__.py").write_text("", encoding="utf-8")
    (checkout / "test_app.py").write_text(TEST, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "tests"], cwd=checkout, check=True)
    fake.add_model(IMPL)
    fake.add_model(REV)
    ctx = Context(load_config(checkout, env={**os.environ, "OLLAMA_HOST": fake.url}))
    fields = {
        "title": "Greet politely",
        "requirements": ["greet() says 'hello, NAME'"],
        "target_file": "src/app.py",
        "complexity": "minor",
        "acceptance_commands": ["python -m pytest -q -p no:cacheprovider test_app.py"],
    }
    create(ctx, fields)  # type: ignore[arg-type]
    setup_task(ctx)
    return ctx


def handoff_text(ground: Any) -> str:
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in (ground.checkout / "_handoff").rglob("*")
        if path.is_file()
    )


def test_no_planted_secret_reaches_the_model_server_or_the_handoff_folder(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    with FakeOllama() as fake:
        ctx = start(ground, fake)
        fake.script(IMPL, *[reply("src/app.py", HOSTILE)] * 3)

        run_implementer(ctx)

        prompts = "\n".join(str(body) for body in fake.chat_requests(IMPL))
    handoff = handoff_text(ground)
    # The attack ran and its output reached the prompt: redacted, not absent.
    # The attack ran and its output reached the prompt and the records: redacted, not absent.
    assert "[REDACTED:" in prompts and "[REDACTED:" in handoff, prompts[-3000:]
    # `git config --list` inside the sandbox no longer shows the remote at all: the sandbox's git config
    # holds core.* and extensions.* only (issue 38); the .gitconfig read from the home folder is redacted.
    assert "remote.origin.url=" not in prompts and "core.bare=false" in prompts
    assert "service = [REDACTED:" in prompts
    assert leaks(prompts) == [] and leaks(handoff) == []


def test_a_change_carrying_the_users_secrets_halts_before_any_prompt_or_review_request(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    with FakeOllama() as fake:
        ctx = start(ground, fake)
        fake.script(IMPL, reply("src/app.py", SMUGGLING))
        fake.script(REV, '{"passed": true, "critical": false, "issues": []}')
        run_implementer(ctx)

        outcome = run_local_review(ctx)

        reviewer_prompts = fake.chat_requests(REV)
    assert outcome.to_state == "erik_consultation"
    halt = ctx.handoff.halt_report.read_text(encoding="utf-8")
    assert (
        # No "credential in config": `git remote -v` in the sandbox shows no remote any more (issue 38).
        "secret_in_change" in halt and ".env value SERVICE_API_KEY" in halt
    )
    assert reviewer_prompts == [] and not ctx.handoff.review_request.exists()
    assert leaks(handoff_text(ground)) == []


def test_secrets_the_code_wrote_into_its_file_are_replaced_in_the_reflection_prompt(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    failing = SMUGGLING.replace('return "hello, " + name', 'return "hello " + name')
    with FakeOllama() as fake:
        ctx = start(ground, fake)
        fake.script(IMPL, *[reply("src/app.py", failing)] * 3)

        run_implementer(ctx)

        prompts = "\n".join(str(body) for body in fake.chat_requests(IMPL))
    assert len(fake.chat_requests(IMPL)) > 1  # reflections saw the file the code had written
    assert "# service = [REDACTED:.env value SERVICE_API_KEY]" in prompts
    assert leaks(prompts) == []


def test_what_the_judge_command_prints_is_redacted_in_its_record_and_halt(
    ground: Any, leaks: Callable[[str], list[str]]
) -> None:
    passing = 'def greet(name):\n    return "hello, " + name\n'
    with FakeOllama() as fake:
        ctx = start(ground, fake)
        fake.script(IMPL, reply("src/app.py", passing))
        fake.script(REV, '{"passed": true, "critical": false, "issues": []}')
        run_implementer(ctx)
        run_local_review(ctx)
        # The judge (the user's own command, unsandboxed) echoes a secret and gives no verdict.
        judged = load_config(ground.checkout, env={**os.environ, "OLLAMA_HOST": fake.url})
        judge = judged.judge._replace(
            command='echo "token $MY_SERVICE_TOKEN"; echo "oops $MY_SERVICE_TOKEN" >&2; exit 3'
        )
        ctx = ctx.replace(config=judged._replace(judge=judge))

        run_judge(ctx)

    record = handoff_text(ground)
    assert "token [REDACTED:environment variable MY_SERVICE_TOKEN]" in record
    assert leaks(record) == []


def token(n: int = 40) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_no_random_key_passes_for_a_name_made_of_words() -> None:
    from hub.core.redaction import _worded

    # A random key of letters and digits is never taken for a code name (once 5.4% of them were).
    assert not any(_worded(token()) for _ in range(5000))
    assert _worded("SumOfMultiplesTest.test_multiples_of_3_or_5")


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
