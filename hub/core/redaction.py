"""No secret of the user's leaves in a prompt or a record (issue 28): the one place that decides what is
redacted, for every writer of prompts and records.

What a command prints goes into the reflection prompt (to a model server that may be remote), the task's
records in `_handoff/`, a halt and REVIEW_REQUEST.md. Before any of that, `Redactor.redact` replaces every
secret found with a marker naming its kind, `[REDACTED:<kind>]`:

- what detect-secrets (Yelp's maintained scanner: AWS, GitHub, GitLab, Slack, Stripe, OpenAI, PyPI,
  npm tokens, JWTs, basic-auth URLs, private keys, `password = ...` keywords) finds on each line;
- the values the hub knows are the user's (`user_secrets`): the values in the checkout's and the home
  folder's `.env` files, the values of environment variables whose names look like credentials, and the
  passwords in the URLs of the git configuration (a token in a remote URL);
- each known value also as code would encode it to slip past a plain match (issue 38): hex, base64 (at
  each of the three alignments it can take inside a longer encoded text), and pieces of a long value;
- whole PEM private-key blocks (detect-secrets flags the BEGIN line, not the key under it), and
  unquoted high-entropy tokens of letters and digits (detect-secrets measures entropy only in quotes)
  that are not names made of words (`SumOfMultiplesTest.test_multiples_of_3_or_5`, a pytest separator
  line's test: taking it away took the name of the failing test from the model).

Every text that goes to a model or into a record goes through `Redactor.redact`: command output, agent
tool results (file reads, searches, MCP answers), the judge's output.

A record (`hub.state.provenance`) is redacted by `redact_record`: the values under credential-named keys,
and in every string the token shapes of `TOKEN_SHAPES`, each replaced by `[REDACTED]`.

One mechanism: every redaction is `scrub(text, passes)`, a text run through passes in turn; what differs
between command output, the code in a prompt and a record is only which passes run. detect-secrets is
imported by its pass, the first time there is something to scan (~100 ms).

A list of names is never complete, so the sandbox hides the user's files first (hub.safety.sandbox); this
is the second wall, for what a command can still print.
"""

from __future__ import annotations

import functools
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hub.core.log import get_logger

if TYPE_CHECKING:
    from hub.core.config import Config

log = get_logger(__name__)

# An environment variable whose name says it holds a credential (the sandbox's own rule, wider).
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|_KEY$|_KEY_|^AWS_|API_?KEY|AUTH|_PAT$|DSN$)",
    re.IGNORECASE,
)
# Shorter values are too common to replace wherever they occur ("true", "admin", a port number).
MIN_KNOWN = 8
# The .env files the hub reads values from, in the checkout and the home folder; bounded.
ENV_FILE = re.compile(r"^\.env(\..+)?$|^.+\.env$")
ENV_FILE_BYTES = 256 * 1024
ENV_FILES = 50
PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.DOTALL
)
URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:([^@\s/]+)@")
# A run of token characters at least this long, with upper, lower and digits, above this entropy (bits
# per character): a random 32-character key scores ~4.6-5.0, English words and identifiers under 4.
TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.]{24,}")
ENTROPY = 4.2
# detect-secrets reads `key = value` without quotes in an .ini file, with quotes only elsewhere:
# command output is closer to the first.
AS_FILE = "command-output.ini"
# Lines longer than this are scanned in pieces: detect-secrets' regexes on a 1 MB line take seconds.
LINE_CHARS = 4000

# A record's keys that name a credential: the value under one goes whole, whatever it looks like.
SECRET_KEY = re.compile(r"(token|secret|key|password|passwd|authorization|credential)", re.IGNORECASE)
# Token counts and timings are numbers, not credentials: "token" in `first_token_seconds` is the
# first token of an answer. A number under such a key is kept; a string under it is still redacted.
NOT_SECRET = re.compile(
    r"^(prompt_tokens|completion_tokens|tokens_in|tokens_out|eval_count|max_tokens|num_tokens)$"
)
MEASURE = re.compile(r"tokens|_(seconds|ms|count|budget|timeout)$|^(num|max)_")
# Token shapes a record's strings never keep (OpenAI, GitHub, Slack, AWS keys, bearer tokens).
TOKEN_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|xox[abp]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|Bearer\s+[A-Za-z0-9._-]{12,})"
)
REDACTED = "[REDACTED]"

_lock = threading.Lock()

Pass = Callable[[str], str]


def scrub(text: str, passes: Sequence[Pass]) -> str:
    """`text` through each of `passes` in turn: the one way anything is redacted."""
    for redact_pass in passes:
        text = redact_pass(text)
    return text


class Redactor:
    """Replaces secrets in text: known values (value -> its kind) and whatever the detectors find. Its
    repr names how many values it knows, never them."""

    __slots__ = ("known", "spelled")

    def __init__(self, known: Mapping[str, str]) -> None:
        self.known = known
        # The known values with their encodings and pieces: what is looked for.
        self.spelled = _with_encodings(known)

    def __repr__(self) -> str:
        return f"Redactor({len(self.known)} known values)"

    def redact(self, text: str) -> str:
        """Every secret found: for command output, where a false alarm costs nothing."""
        if not text:
            return text
        return scrub(text, (_pem_blocks, self._known_values, _detected, _high_entropy))

    def redact_known(self, text: str) -> str:
        """Only the user's own secrets (known values, private-key blocks): for the code shown in a
        prompt, where a detector's guess (a test's fake password) would change what the model sees."""
        if not text:
            return text
        return scrub(text, (_pem_blocks, self._known_values))

    def _known_values(self, text: str) -> str:
        return _replace_known(text, self.spelled)

    def known_in(self, text: str) -> list[str]:
        """The kinds of the user's own secrets found in `text` (never the values), each once."""
        kinds = (
            [self.spelled[m.group(0)] for m in _pattern(self.spelled).finditer(text)] if self.known else []
        )
        kinds += [f"{m.group(1).title()} block" for m in PEM.finditer(text)]
        return list(dict.fromkeys(kinds))


def redactor(env: Mapping[str, str] | None = None, folders: Iterable[Path] = ()) -> Redactor:
    """The redactor for this hub: the secret-looking variables of `env` (default os.environ), the values
    of the `.env` files directly in `folders` (the checkout, the home folder), and the passwords in URLs
    of their git configuration and credential files."""
    env = os.environ if env is None else env
    known: dict[str, str] = {}
    for name, value in env.items():
        if SECRET_NAME.search(name) and len(value.strip()) >= MIN_KNOWN:
            known[value.strip()] = f"environment variable {name}"
    folders = list(dict.fromkeys(folders))
    for path in _env_files(folders):
        for name, value in _env_values(path):
            known.setdefault(value, f"{path.name} value {name}")
    for path in _git_credential_files(folders):
        for value in _url_passwords(path):
            known.setdefault(value, f"credential in {path.name}")
    return Redactor(known)


def user_secrets(config: Config, work_root: Path | None = None) -> Redactor:
    """The redactor that knows the user's secrets: their checkout's (and the task's worktree's) and home
    folder's .env values and git credentials, and the credential-named environment variables."""
    return redactor(folders=[config.repo_root, *([work_root] if work_root else []), Path.home()])


def redact_record(value: Any, key: str = "") -> Any:
    """A copy of `value` with credential-looking keys' values and token-looking strings replaced."""
    if key and SECRET_KEY.search(key) and not _measure(key, value) and not isinstance(value, (dict, list)):
        return REDACTED if value not in (None, "") else value
    if isinstance(value, dict):
        return {k: redact_record(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_record(v) for v in value]
    if isinstance(value, str):
        return scrub(value, (_token_shapes,))
    return value


def _measure(key: str, value: Any) -> bool:
    """A token count or timing: a number (never a string) under a key that names a measure."""
    if NOT_SECRET.match(key):
        return True
    return isinstance(value, int | float) and bool(MEASURE.search(key.lower()))


def _git_credential_files(folders: Iterable[Path]) -> list[Path]:
    """Where git keeps credentials the hub can know: each folder's `.git/config` (a token in a remote
    URL is visible to model code through the worktree's git metadata), `.gitconfig`, `.git-credentials`."""
    found = []
    for folder in folders:
        found += [folder / ".git" / "config", folder / ".gitconfig", folder / ".git-credentials"]
        found.append(folder / ".config" / "git" / "credentials")
    return found


def _url_passwords(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            text = handle.read(ENV_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    return [m.group(1) for m in URL_PASSWORD.finditer(text) if len(m.group(1)) >= MIN_KNOWN]


def _env_files(folders: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in dict.fromkeys(folders):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            # A link is not followed: a .env pointing at a huge or special file is not the user's value.
            if ENV_FILE.match(entry.name) and entry.is_file(follow_symlinks=False):
                found.append(Path(entry.path))
            if len(found) >= ENV_FILES:
                return found
    return found


def _env_values(path: Path) -> list[tuple[str, str]]:
    """`NAME=value` pairs of a dotenv file (export prefix, quotes and comments as dotenv reads them)."""
    try:
        with path.open("rb") as handle:
            text = handle.read(ENV_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    pairs = []
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        name, eq, value = line.partition("=")
        if not eq or name.startswith("#"):
            continue
        value = value.strip()
        if value[:1] in {'"', "'"} and value.endswith(value[:1]) and len(value) > 1:
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        if len(value) >= MIN_KNOWN:
            pairs.append((name.strip(), value))
    return pairs


# --- the passes ---------------------------------------------------------------------------------------


def _pem_blocks(text: str) -> str:
    return PEM.sub(lambda m: f"[REDACTED:{m.group(1).title()}]", text)


def _token_shapes(text: str) -> str:
    return TOKEN_SHAPES.sub(REDACTED, text)


def _high_entropy(text: str) -> str:
    return TOKEN.sub(_entropy_marker, text)


def _replace_known(text: str, known: Mapping[str, str]) -> str:
    if not known:
        return text
    return _pattern(known).sub(lambda m: f"[REDACTED:{known[m.group(0)]}]", text)


def _pattern(known: Mapping[str, str]) -> re.Pattern[str]:
    return _alternation(tuple(sorted(known, key=len, reverse=True)))


@functools.lru_cache(maxsize=8)
def _alternation(values: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, values)))


def _detected(text: str) -> str:
    """The text with what detect-secrets finds on each line replaced."""
    from detect_secrets.core.scan import _process_line_based_plugins  # ~100 ms: only when there is output
    from detect_secrets.settings import default_settings

    lines = text.split("\n")
    pieces = [
        (number, line[start : start + LINE_CHARS])
        for number, line in enumerate(lines, 1)
        for start in range(0, max(len(line), 1), LINE_CHARS)
    ]
    found: dict[int, list[tuple[str, str, object]]] = {}
    # detect-secrets keeps its plugins in process-wide settings: one scan at a time.
    with _lock, default_settings():
        for secret in _process_line_based_plugins(pieces, AS_FILE):
            found.setdefault(secret.line_number, []).append(
                (secret.type, secret.secret_value or "", _plugin_for(secret.type))
            )
    for number, secrets in found.items():
        lines[number - 1] = _replace_found(lines[number - 1], secrets)
    if found:
        log.debug("secrets.redacted", lines=len(found))
    return "\n".join(lines)


def _plugin_for(kind: str) -> object:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return get_mapping_from_secret_type_to_class().get(kind)


def _replace_found(line: str, secrets: list[tuple[str, str, object]]) -> str:
    for kind, value, plugin in secrets:
        marker = f"[REDACTED:{kind}]"
        if len(value) >= MIN_KNOWN and value in line:
            line = line.replace(value, marker)
            continue
        # A detector that reports only part of its match (GitHub's reports the `ghp` prefix): the
        # whole match of its patterns goes.
        for pattern in getattr(plugin, "denylist", ()):
            line = pattern.sub(marker, line)
    return line


def _entropy_marker(match: re.Match[str]) -> str:
    token = match.group(0)
    if _worded(token):
        return token
    if not (
        any(c.isdigit() for c in token)
        and any(c.islower() for c in token)
        and any(c.isupper() for c in token)
    ):
        return token
    if "/" in token.strip("/") and token.count("/") > 2:  # a path, not a key
        return token
    return "[REDACTED:high-entropy string]" if _entropy(token) >= ENTROPY else token


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


# A name made of words: camelCase or snake_case parts of three letters or more hold most of it (a random
# key of the same length breaks into parts of one or two).
WORD_PART = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z]{3,}(?![a-z])")
WORDED = 0.7


def _worded(token: str) -> bool:
    # Joined by `_` or `.` as code names are: without that, 5.4% of random 40-character keys (letters and
    # digits) passed the share of word parts alone and went unredacted; with it, 0 of 20,000.
    if "_" not in token and "." not in token:
        return False
    letters = sum(len(m.group(0)) for m in WORD_PART.finditer(token) if len(m.group(0)) >= 3)
    return letters >= WORDED * sum(c.isalpha() for c in token)


# A known value this long is also looked for in pieces (a token printed in two halves).
PIECES_FROM = 20


def _with_encodings(known: Mapping[str, str]) -> dict[str, str]:
    """`known` and, for each value, its hex and base64 spellings and (for a long value) its pieces, each
    naming the value's kind: the code may print a secret encoded, the value is what the hub knows."""
    import base64

    found = dict(known)
    for value, kind in known.items():
        raw = value.encode("utf-8")
        spelled = {raw.hex(): "hex", raw.hex().upper(): "hex"}
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            for shift in range(3):
                # Inside a longer text the value may start at any byte of a 3-byte group: the characters
                # that depend on its bytes alone are the same whatever surrounds it.
                text = encode(b"\0" * shift + raw).decode("ascii")
                start, end = -(-shift * 8 // 6), (shift + len(raw)) * 8 // 6
                spelled[text[start:end]] = "base64"
        if len(value) >= PIECES_FROM:
            width = max(MIN_KNOWN, min(12, len(value) // 2))
            # Every window, and the value's shorter ends (what is left of it beside a window's match).
            pieces = [value[at : at + width] for at in range(len(value) - width + 1)]
            ends = range(MIN_KNOWN, width)
            pieces += [value[:n] for n in ends] + [value[-n:] for n in ends]
            for piece in pieces:
                # Only pieces that look random: a URL's or a word's piece is in every other text.
                if sum(any(test(c) for c in piece) for test in (str.isdigit, str.islower, str.isupper)) >= 2:
                    spelled.setdefault(piece, "a piece")
        for text, how in spelled.items():
            if len(text) >= MIN_KNOWN:
                found.setdefault(text, f"{kind} ({how})")
    return found
