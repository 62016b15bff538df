"""The edit corpus scored: what the hub makes of each reply in tests/edits/corpus/, now and before.

    python bench/bench_edits.py [--base REV] [--verbose]

Each case's reply goes through the implementer's path (hub.edits.answer: parse, plan, pre-write check, write)
in a fresh folder holding the case's original files; the files afterwards are scored accepted (exactly
the expected files), refused (nothing written), wrong or destroyed. "Before" runs the same corpus
through the edit code of REV (default: the commit issue 12 started from), extracted with `git archive`
into a temporary folder and run in its own process. The goal: zero wrong, zero destroyed, and no fewer
accepted than before.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "edits" / "corpus"
BASE = "a553119"  # main when issue 12 began: the "before" parser


def run_case(case: object, folder: Path) -> dict[str, str | None]:
    """Apply the case's reply with whatever edit code the hub on sys.path has; the case's files afterwards."""
    from hub.testing.corpus import Case
    from hub.workers.base import split_thinking

    assert isinstance(case, Case)
    for name, text in case.originals.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    try:  # the hub as packages
        edits = importlib.import_module("hub.edits.answer")
        Policy = importlib.import_module("hub.edits.policy").Policy
    except ImportError:  # an older hub: the edit code in one module, hub/edits.py
        edits = importlib.import_module("hub.edits")
        Policy = edits.Policy
    policy = Policy(repo_root=folder, allowed_paths=case.allowed)
    # What the providers hand the implementer: the reply with its thinking taken out.
    reply, _ = split_thinking(case.reply)
    answer = getattr(edits, "apply_answer", None)
    if answer is not None:
        answer(reply, policy, default_path=case.default_path, done_reason=case.done_reason)
    else:  # the older hub: parse, then apply whatever parsed
        parsed = edits.parse_edits(reply, default_path=case.default_path)
        edits.apply_edits(parsed.edits, policy)
    paths = set(case.originals) | set(case.expected or {})
    return {p: (folder / p).read_text(encoding="utf-8") if (folder / p).is_file() else None for p in paths}


def score_all() -> dict[str, str]:
    """Case name -> outcome, with the hub on sys.path."""
    import structlog

    from hub.testing.corpus import load_cases, score

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    outcomes = {}
    for case in load_cases(CORPUS):
        with tempfile.TemporaryDirectory() as tmp:
            outcomes[case.name] = score(case, run_case(case, Path(tmp)))
    return outcomes


def score_base(rev: str) -> dict[str, str]:
    """The same corpus through `rev`'s hub package, in a subprocess that imports it first."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "hub"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        # The corpus reader is newer than the base: it goes in beside the old code.
        shutil.copy(ROOT / "hub" / "testing" / "corpus.py", Path(tmp) / "hub" / "testing" / "corpus.py")
        code = (
            f"import sys, json; sys.path[:0] = [{tmp!r}, {str(ROOT / 'bench')!r}]; "
            "import bench_edits; print(json.dumps(bench_edits.score_all()))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"scoring {rev} failed:\n{done.stderr[-3000:]}")
        result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def summary(outcomes: dict[str, str]) -> dict[str, int]:
    from hub.testing.corpus import OUTCOMES

    return {kind: sum(1 for o in outcomes.values() if o == kind) for kind in OUTCOMES}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default=BASE, help="the revision whose edit code is 'before'")
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from hub.testing.corpus import load_cases

    cases = {c.name: c for c in load_cases(CORPUS)}
    now = score_all()
    before = score_base(args.base)
    refuse = sum(1 for c in cases.values() if c.expected is None)
    print(f"edit corpus: {len(cases)} cases ({len(cases) - refuse} to apply, {refuse} to refuse)")
    print(f"{'':8}" + "".join(f"{k:>11}" for k in summary(now)))
    for label, outcomes in (("before", before), ("now", now)):
        missed = sum(1 for n, o in outcomes.items() if o == "refused" and cases[n].expected is not None)
        print(
            f"{label:8}"
            + "".join(f"{v:>11}" for v in summary(outcomes).values())
            + f"   (refused but meant to apply: {missed})"
        )
    if args.verbose:
        for name in sorted(cases):
            want = "refuse" if cases[name].expected is None else "apply"
            print(f"  {name:48} want {want:6}  before {before.get(name, '?'):9}  now {now[name]}")


if __name__ == "__main__":
    main(sys.argv[1:])
