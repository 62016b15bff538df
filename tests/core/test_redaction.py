"""hub.core.redaction: one mechanism for command output, the code in a prompt and the records, each with
its own passes, and detect-secrets loaded only when there is something to scan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hub.core.config import load_config
from hub.core.redaction import REDACTED, Redactor, redact_record, redactor, scrub, user_secrets

AWS = "AKIAIOSFODNN7EXAMPLE"
PASSWORD_LINE = 'password = "correct-horse-battery"'


def test_scrub_runs_the_passes_in_order() -> None:
    assert scrub("a", (lambda t: t + "b", lambda t: t + "c")) == "abc"
    assert scrub("a", ()) == "a"


def test_a_record_loses_its_token_shapes_but_not_what_only_the_scanner_would_guess() -> None:
    # Records were never scanned by detect-secrets: a password-looking line in a prompt stays as it is.
    record = redact_record({"prompt": f"{PASSWORD_LINE} {AWS}", "api_key": "x", "prompt_tokens": 12})
    assert record == {"prompt": f"{PASSWORD_LINE} {REDACTED}", "api_key": REDACTED, "prompt_tokens": 12}


def test_command_output_loses_what_the_scanner_finds_and_the_known_values() -> None:
    secrets = Redactor({"s3cret-value-42": "environment variable MY_TOKEN"})
    out = secrets.redact(f"{PASSWORD_LINE}\nkey {AWS}\nsaw s3cret-value-42\n")
    assert "correct-horse-battery" not in out and AWS not in out
    assert "[REDACTED:environment variable MY_TOKEN]" in out


def test_the_code_in_a_prompt_loses_only_the_users_own_secrets() -> None:
    secrets = Redactor({"s3cret-value-42": "environment variable MY_TOKEN"})
    assert secrets.redact_known(f"{PASSWORD_LINE} s3cret-value-42") == (
        f"{PASSWORD_LINE} [REDACTED:environment variable MY_TOKEN]"
    )


def test_a_redactor_names_no_secret_in_its_repr() -> None:
    assert "s3cret-value-42" not in repr(Redactor({"s3cret-value-42": "a .env value"}))


def test_the_users_secrets_include_the_task_worktrees_env_values(tmp_path: Path) -> None:
    repo, worktree = tmp_path / "repo", tmp_path / "worktree"
    repo.mkdir()
    worktree.mkdir()
    (repo / ".env").write_text("REPO_KEY=from-the-checkout\n", encoding="utf-8")
    (worktree / ".env").write_text("TASK_KEY=from-the-worktree\n", encoding="utf-8")
    known = user_secrets(load_config(repo), worktree).known
    assert known["from-the-checkout"] == ".env value REPO_KEY"
    assert known["from-the-worktree"] == ".env value TASK_KEY"
    assert redactor(env={}, folders=[repo]).known == {"from-the-checkout": ".env value REPO_KEY"}


def test_detect_secrets_is_imported_only_when_there_is_text_to_scan() -> None:
    probe = (
        "import sys\n"
        "from hub.core.redaction import Redactor\n"
        "assert 'detect_secrets' not in sys.modules\n"
        "Redactor({}).redact('')\n"
        "assert 'detect_secrets' not in sys.modules\n"
        "Redactor({}).redact('hello')\n"
        "assert 'detect_secrets' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
