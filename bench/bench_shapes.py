"""Reply shapes, the hub against aider's parsers: the edit corpus and the real model's replies, per kind.

    python bench/bench_shapes.py [--aider-python PATH] [--real GLOB] [--verbose]

Two sets of replies go through the hub's implementer path (hub.edits.answer) and through aider's own
edit code (its Coder classes' `apply_updates`, as `aider --yes-always` runs them, in aider's venv):

- the edit corpus (tests/edits/corpus/: shapes from public issue threads, each with the files before
  and what a careful tool makes of them), scored ok (the expected files, or nothing written where
  nothing may be), miss (nothing written where the change was right), wrong, destroyed
  (`hub.testing.corpus.score`);
- the real model's replies: implementer calls recorded by earlier `hub eval` runs (model-call records;
  exercises a-o only), their files taken from the prompt. No one wrote down what they should become, so
  each tool's result is counted as written, wrong (a Python file that does not parse, or the start of a
  file from a reply that ends inside its block), unchanged (the reply repeats the file) or refused; and
  each reply is sorted into the classes of issue 20.

The kind of a reply is its shape (whole file, SEARCH/REPLACE, unified diff, tool call, patch envelope);
aider gets the edit format made for that kind (`whole`, `diff`, `udiff`, `patch`; a tool call, which
aider has no format for, goes to `whole`, the format aider uses for a small model it has no settings
for). A reply cut at the token limit (done_reason "length") writes nothing in aider (it stops on the
limit) and is refused whole by the hub. Needs aider: `pip install aider-chat==0.86.2` in a venv of its
own; --aider-python names that venv's python.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_edits import CORPUS, run_case  # noqa: E402

from hub.testing.corpus import Case, load_cases, score  # noqa: E402

AIDER_PYTHON = Path.home() / ".cache/agent-hub/aider-venv/bin/python"
REAL = str(Path.home() / "evalrun/**/_handoff/tasks/*/runs/*-model-call.json")
KINDS = ("whole file", "search/replace", "unified diff", "tool call", "patch envelope")
AIDER_FORMAT = {
    "whole file": "whole",
    "search/replace": "diff",
    "unified diff": "udiff",
    "tool call": "whole",
    "patch envelope": "patch",
}

# Run inside aider's venv: one JSON list of {files, reply, format, length_cut} on stdin, one JSON list of
# the files afterwards on stdout. Aider is called, never copied.
AIDER_DRIVER = r"""
import io, json, os, sys, tempfile, contextlib
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from aider.coders import Coder
from aider.io import InputOutput
from aider.models import Model
model = Model("gpt-4o")
out = []
for item in json.load(sys.stdin):
    folder = tempfile.mkdtemp(prefix="aider-shape-")
    for name, text in item["files"].items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w", encoding="utf-8").write(text)
    os.chdir(folder)
    if not item["length_cut"]:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            console = InputOutput(yes=True, pretty=False, fancy_input=False, chat_history_file=None,
                                  input_history_file=None)
            coder = Coder.create(main_model=model, edit_format=item["format"], io=console,
                                 fnames=[os.path.join(folder, n) for n in item["files"]], use_git=False,
                                 stream=False, suggest_shell_commands=False, auto_lint=False,
                                 auto_test=False)
            coder.partial_response_content = item["reply"]
            try:
                coder.apply_updates()
            except Exception as error:  # aider's own crash on a reply is a reply it did not apply
                print(repr(error), file=sys.stderr)
    after = {}
    for name in item["paths"]:
        path = os.path.join(folder, name)
        after[name] = open(path, encoding="utf-8").read() if os.path.isfile(path) else None
    out.append(after)
print(json.dumps(out))
"""


def kind_of(reply: str) -> str:
    if re.search(r"^\s*\*\*\* Begin Patch", reply, re.M):
        return "patch envelope"
    if re.search(r'"(?:name|function)"\s*:', reply) and re.search(r'"(?:arguments|parameters)"', reply):
        return "tool call"
    if re.search(r"^\s*<(?:write_to_file|replace_in_file|apply_diff)>", reply, re.M):
        return "tool call"
    if re.search(r"^\s*(?:<{3,9}|-{3,9})\s*SEARCH", reply, re.M | re.I):
        return "search/replace"
    if re.search(r"^(?:--- |\+\+\+ |@@ )", reply, re.M):
        return "unified diff"
    return "whole file"


def aider_run(python: Path, items: list[dict[str, object]]) -> list[dict[str, str | None]]:
    done = subprocess.run(
        [str(python), "-c", AIDER_DRIVER],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"aider's driver failed:\n{done.stderr[-3000:]}")
    result: list[dict[str, str | None]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def corpus_label(case: Case, outcome: str) -> str:
    """ok / miss / wrong / destroyed: a refusal is ok where nothing may be written, a miss elsewhere."""
    if outcome == "accepted" or (outcome == "refused" and case.expected is None):
        return "ok"
    return "miss" if outcome == "refused" else outcome


# ----------------------------------------------------------------------------------- the real replies


def real_replies(pattern: str) -> list[Case]:
    """The implementer's recorded replies from the exercises a-o, as cases with no expected files."""
    cases = []
    for path in sorted(glob.glob(os.path.expanduser(pattern), recursive=True)):
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        task = re.search(r"exercise-([a-z0-9-]+)$", str(record.get("task_id", "")))
        if record.get("role") != "implementer" or not task or task[1][0] > "o":
            continue
        if "example-solution" in str(record.get("model")):
            continue  # a scripted stand-in, not a model
        prompt = str(record["prompt"])
        allowed = re.search(r"Work only in these files: (.+?)\.\n", prompt)
        files = prompt_files(prompt)
        if not allowed or not files:
            continue
        cases.append(
            Case(
                name=f"{Path(path).parts[-7] if 'eval' in Path(path).parts else Path(path).parts[3]}:"
                f"{task[1]}:{Path(path).stem}",
                source=path,
                reply=str(record["response"]),
                originals=files,
                expected=None,
                allowed=tuple(allowed[1].split(", ")),
                done_reason=str(record.get("done_reason") or ""),
            )
        )
    return cases


def prompt_files(prompt: str) -> dict[str, str]:
    """The files an implementer prompt shows: `### path`, an outline, then the file in a fence."""
    lines = prompt.split("\n")
    files = {}
    for n, line in enumerate(lines):
        header = re.match(r"^### (\S+)$", line)
        if not header:
            continue
        start = next((k for k in range(n + 1, min(n + 8, len(lines))) if re.match(r"^`{3,}", lines[k])), None)
        if start is None:
            continue
        fence = re.match(r"^`{3,}", lines[start])
        assert fence is not None
        end = next((k for k in range(start + 1, len(lines)) if lines[k] == fence[0]), None)
        if end is not None:
            files[header[1]] = "\n".join(lines[start + 1 : end]) + "\n"
    return files


def real_label(case: Case, after: dict[str, str | None]) -> str:
    """What a tool made of a real reply: written; wrong (a written Python file does not parse, or the
    reply ends inside its block, so what was written is the start of a file); unchanged (the reply
    repeats the file); or refused."""
    from hub.edits.parse import parse_edits

    changed = {p: t for p, t in after.items() if t != case.originals.get(p)}
    parsed = parse_edits(case.reply, default_path=case.default_path)
    if not changed:
        same = parsed.edits and all(
            (e.content or "").rstrip("\n") == (case.originals.get(e.path) or "").rstrip("\n")
            for e in parsed.edits
            if e.content is not None and not e.others
        )
        return "unchanged" if same else "refused"
    if parsed.truncated or case.done_reason == "length":
        return "wrong"
    for path, text in changed.items():
        if path.endswith(".py") and text is not None:
            try:
                ast.parse(text)
            except SyntaxError:
                return "wrong"
    return "written"


def issue_classes(case: Case) -> list[str]:
    """Which of issue 20's classes a reply falls into, as the hub sees it."""
    from hub.edits.answer import apply_answer
    from hub.edits.match import _blankless, _exact, _lines_of, _loose
    from hub.edits.parse import parse_edits
    from hub.edits.policy import Policy

    found = []
    default = case.default_path
    parsed = parse_edits(case.reply, default_path=default)
    if parsed.truncated and case.done_reason != "length":
        found.append("3 cut without a length signal")
    if case.done_reason == "length":
        found.append("3 cut at the token limit")
    for edit in parsed.edits:
        text = case.originals.get(edit.path)
        for block in edit.blocks:
            if text is None:
                continue
            lines, search = _lines_of(text), _lines_of(block.search)
            if not _exact(lines, search)[0] and not _loose(lines, search)[0] and _blankless(lines, search)[0]:
                found.append("4 blank lines differ")
        if edit.others:
            found.append("5 a file given twice")
    shapes = {
        "5 tool call in text": r'"(?:name|function)"\s*:.*"(?:arguments|parameters)"',
        "5 codex patch": r"^\s*\*\*\* Begin Patch",
        "5 roo start_line": r"^:start_line:",
        "5 numbered lines": r"^\s*\d+ \| ",
        "5 cline markers": r"^-{3,9} SEARCH|^\+{3,9} REPLACE",
    }
    found += [name for name, pattern in shapes.items() if re.search(pattern, case.reply, re.M | re.S)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, body in case.originals.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(body, encoding="utf-8")
        _, result = apply_answer(
            case.reply,
            Policy(repo_root=folder, allowed_paths=case.allowed),
            default_path=default,
            done_reason=case.done_reason,
        )
    reasons = [f.reason for f in result.failed_blocks] + [r.reason for r in result.refused]
    if any("spaces inside its lines" in r for r in reasons):
        found.append("1 spaces inside a line")
    if any(re.search(r"not valid (?:YAML|JSON|TOML)|Makefile|Markdown ends|HTML's tags", r) for r in reasons):
        found.append("2 broken non-code file")
    if reasons or (parsed.problems and not result.changed_files):
        found.append("6 refused, fed back")
    return found


# ------------------------------------------------------------------------------------------- the run


def run(
    cases: list[Case], python: Path
) -> tuple[dict[str, dict[str, str | None]], list[dict[str, str | None]] | None]:
    """Each case's files afterwards, by the hub and by aider (None: aider is not installed)."""
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    hub = {}
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            hub[case.name] = run_case(case, Path(tmp))
    items: list[dict[str, object]] = [
        {
            "files": case.originals,
            "paths": sorted(set(case.originals) | set(case.expected or {})),
            "reply": case.reply,
            "format": AIDER_FORMAT[kind_of(case.reply)],
            "length_cut": case.done_reason == "length",
        }
        for case in cases
    ]
    return hub, aider_run(python, items) if python.exists() else None


def table(title: str, rows: dict[str, Counter[str]], columns: tuple[str, ...]) -> str:
    lines = [f"{title}", f"{'':34}" + "".join(f"{c:>17}" for c in columns)]
    for label, counts in rows.items():
        lines.append(f"{label:34}" + "".join(f"{counts.get(c, 0):>17}" for c in columns))
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--aider-python", type=Path, default=AIDER_PYTHON)
    parser.add_argument("--real", default=REAL, help="the model-call records to read (a glob)")
    parser.add_argument("--verbose", action="store_true", help="one line per reply")
    args = parser.parse_args(argv)

    corpus = load_cases(CORPUS)
    hub, aider = run(corpus, args.aider_python)
    if aider is None:
        print(f"aider is not installed at {args.aider_python}: the hub's rows only")
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    columns = ("ok", "miss", "wrong", "destroyed")
    for n, case in enumerate(corpus):
        kind = kind_of(case.reply)
        mine = corpus_label(case, score(case, hub[case.name]))
        theirs = corpus_label(case, score(case, aider[n])) if aider is not None else "-"
        per_kind[f"{kind}: hub"][mine] += 1
        per_kind["all: hub"][mine] += 1
        if aider is not None:
            per_kind[f"{kind}: aider"][theirs] += 1
            per_kind["all: aider"][theirs] += 1
        if args.verbose:
            print(f"  {case.name:48} {kind:15} hub {mine:10} aider {theirs}")
    ordered = {k: per_kind[k] for k in sorted(per_kind, key=lambda k: (k.startswith("all"), k))}
    print(table(f"edit corpus: {len(corpus)} replies from public threads", ordered, columns))

    real = real_replies(args.real)
    if not real:
        print(f"\nno real replies found under {args.real}")
        return
    hub_real, aider_real = run(real, args.aider_python)
    outcome: dict[str, Counter[str]] = defaultdict(Counter)
    classes: Counter[str] = Counter()
    for n, case in enumerate(real):
        kind = kind_of(case.reply)
        mine = real_label(case, hub_real[case.name])
        theirs = real_label(case, aider_real[n]) if aider_real is not None else "-"
        outcome[f"{kind}: hub"][mine] += 1
        if aider_real is not None:
            outcome[f"{kind}: aider"][theirs] += 1
        found = issue_classes(case)
        classes.update(found or ["none of the classes"])
        if args.verbose:
            print(f"  {case.name:60} {kind:15} hub {mine:16} aider {theirs:16} {', '.join(found)}")
    print()
    print(
        table(
            f"real replies: {len(real)} implementer answers of Qwen2.5-Coder-1.5B (hub eval records, a-o)",
            outcome,
            ("written", "unchanged", "refused", "wrong"),
        )
    )
    print("\nissue 20's classes among the real replies (a reply may fall into several):")
    for name, count in sorted(classes.items()):
        print(f"  {name:34} {count}")


if __name__ == "__main__":
    main(sys.argv[1:])
