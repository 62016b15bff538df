"""A suite of coding exercises in exercism's practice layout, read into `Exercise` values.

One folder per exercise:

    <name>/.meta/config.json      {"files": {"solution": [...], "test": [...], "example": [...]}}
    <name>/.docs/introduction.md  (optional) instructions.md, instructions.append.md (optional)
    <name>/<solution files>       the stub the model completes
    <name>/<test files>           the acceptance tests, never shown to the model up front

so a checkout of exercism/python's `exercises/practice/` is a suite as it is.

A suite is downloaded code, read by the hub outside any sandbox: nothing in it is read through a link (a
linked instructions file put a home-folder secret into the prompt, a linked helper was copied into the
eval repository; issue 38), and every file is read within a bound (a `.meta/config.json` that is
`/dev/zero` was read until memory ran out). Either is a SuiteInvalid naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hub.core.atomic import write_bytes_atomic
from hub.core.errors import SuiteInvalid
from hub.core.files import read_capped

DOCS = ("introduction.md", "instructions.md", "instructions.append.md")
# An instructions file larger than this is not an exercise's text (a mistaken folder, a binary).
MAX_DOC_BYTES = 64_000
MAX_CONFIG_BYTES = 256_000
# A stub, a test or a helper larger than this is not an exercise's file.
MAX_FILE_BYTES = 4_000_000


@dataclass(frozen=True)
class Exercise:
    """One exercise: its folder, the files the model writes, the tests that judge them."""

    name: str
    folder: Path
    solution: tuple[str, ...]  # relative to folder
    tests: tuple[str, ...]
    example: tuple[str, ...]  # a known-good solution (exercism's .meta/example.py), when there is one
    instructions: str


def load_suite(root: Path, names: Sequence[str] = (), letters: str | None = None) -> list[Exercise]:
    """Every exercise under `root` (sorted by name), or the ones named, or those whose names start
    with a letter in `letters` (a range such as "a-o"); SuiteInvalid naming what is wrong and where when
    the folder is no suite or a named exercise is missing or broken."""
    if not root.is_dir():
        raise SuiteInvalid(f"{root}: not a folder (a suite is a folder of exercises in exercism's layout)")
    found = {p.parent.parent.name: p.parent.parent for p in root.glob("*/.meta/config.json")}
    if not found and (root / ".meta" / "config.json").is_file():
        # One exercise's own folder, given where its suite was meant (`hub eval exercises/practice/bob`).
        raise SuiteInvalid(
            f"{root}: one exercise, not a suite of them",
            hint=f"give its suite and name it: `hub eval {root.resolve().parent} --only {root.resolve().name}`",
        )
    if not found:
        raise SuiteInvalid(
            f"{root}: no exercise in it (each needs <name>/.meta/config.json naming its solution and test files)"
        )
    wanted = list(dict.fromkeys(names)) or sorted(found)
    unknown = [n for n in wanted if n not in found]
    if unknown:
        raise SuiteInvalid(
            f"{root}: no exercise named {', '.join(unknown)} (known: {', '.join(sorted(found))})"
        )
    if letters:
        first, _, last = letters.lower().partition("-")
        if not (len(first) == 1 and len(last) == 1 and first <= last):
            raise SuiteInvalid(f"--letters {letters}: expected a range of two letters such as a-o")
        wanted = [n for n in wanted if first <= n[:1].lower() <= last]
        if not wanted:
            raise SuiteInvalid(f"{root}: no exercise starts with a letter in {letters}")
    return [load_exercise(found[name]) for name in wanted]


def load_exercise(folder: Path) -> Exercise:
    config_path = folder / ".meta" / "config.json"
    _no_links(folder)
    try:
        config = json.loads(_read(folder, ".meta/config.json", MAX_CONFIG_BYTES))
        files = config["files"]
        solution, tests = _names(files, "solution"), _names(files, "test")
        example = _names(files, "example") if "example" in files else ()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SuiteInvalid(f"{config_path}: {_why(exc)}") from None
    if not solution or not tests:
        raise SuiteInvalid(f"{config_path}: files.solution and files.test must each name at least one file")
    for rel in (*solution, *tests, *example):
        path = (folder / rel).resolve()
        if not path.is_relative_to(folder.resolve()) or not path.is_file():
            raise SuiteInvalid(f"{config_path}: '{rel}' is not a file inside {folder}")
    docs = [f".docs/{name}" for name in DOCS if os.path.lexists(folder / ".docs" / name)]
    parts = [_read(folder, rel, MAX_DOC_BYTES).strip() for rel in docs]
    if not parts:
        raise SuiteInvalid(f"{folder}/.docs: no instructions.md (or introduction.md) to give the model")
    return Exercise(folder.name, folder, solution, tests, example, "\n\n".join(parts))


def _names(files: dict[str, object], key: str) -> tuple[str, ...]:
    value = files[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"files.{key} must be a list of file names")
    return tuple(value)


def _no_links(folder: Path) -> None:
    """SuiteInvalid naming the first link in the exercise's folder (or the folder itself a link)."""
    if folder.is_symlink():
        raise SuiteInvalid(f"{folder}: a symbolic link; a suite's files are never read through links")
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted([*dirs, *files]):
            if (Path(top) / name).is_symlink():
                raise SuiteInvalid(
                    f"{Path(top) / name}: a symbolic link in the suite; a suite's files are never read "
                    "through links",
                    hint="replace the link by the file itself",
                )


def _read(folder: Path, rel: str, limit: int) -> str:
    """The text of `rel` in the exercise's folder: a regular file, reached through no link, at most
    `limit` bytes; SuiteInvalid otherwise."""
    found = read_capped(folder / rel, limit, root=folder)
    if found is None:
        raise SuiteInvalid(f"{folder / rel}: not a regular file, or reached through a link")
    data, more = found
    if more:
        raise SuiteInvalid(f"{folder / rel}: larger than {limit:,} bytes; not an exercise's file")
    return data.decode("utf-8", errors="replace")


def copy_inside(folder: Path, rel: str, dest: Path) -> None:
    """Copy the exercise's file `rel` to `dest`, reached through no link and within MAX_FILE_BYTES."""
    found = read_capped(folder / rel, MAX_FILE_BYTES, root=folder)
    if found is None or found[1]:
        raise SuiteInvalid(f"{folder / rel}: not a regular file within {MAX_FILE_BYTES:,} bytes, or a link")
    write_bytes_atomic(dest, found[0])


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON ({exc.msg}, line {exc.lineno})"
    return str(exc)
