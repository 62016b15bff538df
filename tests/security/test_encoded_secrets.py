"""Issue 38, point 7: one redaction for every text to a model or into a record, which knows the user's
secrets in the spellings code can print them in (hex, base64 at any alignment, pieces), and which takes
nothing but secrets: a real pytest run's output, test names and all, comes through whole."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hub.core.redaction import redactor

REPO = Path(__file__).resolve().parents[2]
# An exercism-like suite whose test names are long, mixed-case and numbered, as the real run's were.
SUM_OF_MULTIPLES_TEST = """import unittest

from sum_of_multiples import sum_of_multiples


class SumOfMultiplesTest(unittest.TestCase):
    def test_no_multiples_within_limit(self):
        self.assertEqual(sum_of_multiples(1, [3, 5]), 0)

    def test_more_than_one_multiple_within_limit_3_or_5_up_to_10(self):
        self.assertEqual(sum_of_multiples(10, [3, 5]), 23)

    def test_the_factor_0_does_not_affect_the_sum_of_multiples_of_other_factors4x(self):
        self.assertEqual(sum_of_multiples(4, [3, 0]), 3)

    def test_solutions_using_include_exclude_must_extend_to_cardinality_greater_than_3(self):
        self.assertEqual(sum_of_multiples(10000, [2, 3, 5, 7, 11]), 39614537)
"""


def pytest_output(folder: Path) -> str:
    """Real pytest output: the repository's exercises and the suite above, each against a wrong solution."""
    for exercise in sorted((REPO / "evals" / "python").iterdir()):
        for test in exercise.glob("*_test.py"):
            shutil.copy(test, folder / test.name)
            # A wrong solution: every name the test imports returns 0.
            for module, names in re.findall(
                r"^from (\w+) import (.+)$", test.read_text(encoding="utf-8"), re.M
            ):
                stubs = [f"def {name.strip()}(*args):\n    return 0\n" for name in names.split(",")]
                (folder / f"{module}.py").write_text("\n".join(stubs), encoding="utf-8")
    (folder / "sum_of_multiples_test.py").write_text(SUM_OF_MULTIPLES_TEST, encoding="utf-8")
    (folder / "sum_of_multiples.py").write_text(
        "def sum_of_multiples(limit, factors):\n    return 1\n", encoding="utf-8"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        for options in ([], ["-q", "--tb=short"], ["-v", "--tb=line"])
    ]
    return "\n".join(runs)


def test_real_pytest_output_loses_nothing_to_the_redactor(tmp_path: Path) -> None:
    output = pytest_output(tmp_path)
    assert "SumOfMultiplesTest.test_more_than_one_multiple_within_limit_3_or_5_up_to_10" in output
    assert output.count("FAILED") >= 4

    redacted = redactor(env={}).redact(output)

    false = [(a, b) for a, b in zip(output.splitlines(), redacted.splitlines(), strict=True) if a != b]
    assert false == []


def test_random_tokens_are_still_caught_where_names_are_not() -> None:
    key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9q"
    text = f"aws_secret = {key}\n_ SumOfMultiplesTest.test_solutions_using_include_exclude_must_extend_to_cardinality_greater_than_3 _\n"

    redacted = redactor(env={}).redact(text)

    assert key not in redacted
    assert (
        "SumOfMultiplesTest.test_solutions_using_include_exclude_must_extend_to_cardinality_greater_than_3"
        in redacted
    )


def test_a_known_token_is_caught_in_hex_base64_and_pieces(ground: Any) -> None:
    token = "ghp_PLANTEDremote8sK2mQ9zX4vB7nR1tY5wE3"
    secrets = redactor(folders=[ground.checkout])
    raw = token.encode()
    spellings = {
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "base64": base64.b64encode(raw).decode(),
        "base64 inside a longer text, shifted by one": base64.b64encode(b"x" + raw + b"yz").decode(),
        "base64 inside a longer text, shifted by two": base64.b64encode(b"ab" + raw).decode(),
        "url-safe base64": base64.urlsafe_b64encode(b"x:" + raw).decode(),
        "two halves": f"{token[:19]}\n{token[19:]}",
        "three pieces": f"{token[:13]} {token[13:26]} {token[26:]}",
    }

    left = {how: text for how, text in spellings.items() if not _gone(token, text, secrets.redact(text))}

    assert left == {}
    assert all(secrets.known_in(text) for text in spellings.values())


def _gone(token: str, text: str, redacted: str) -> bool:
    """Whether nothing of the token that could be read back is left: no piece of 8 or more characters
    in its own spelling, and the redactor marked the text."""
    if "[REDACTED:" not in redacted:
        return False
    decoded = {redacted}
    for chunk in redacted.split():
        for decode in (base64.b64decode, base64.urlsafe_b64decode, bytes.fromhex):
            try:
                decoded.add(
                    decode(chunk + "==" if "b64" in decode.__name__ else chunk).decode(errors="replace")
                )
            except ValueError:
                continue
    return not any(token[i : i + 8] in d for d in decoded for i in range(len(token) - 7))
