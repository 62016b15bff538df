"""The forms a hub.yaml value may take (`Str`, `Num`, `Int`, `Bool`, `Command`, `Scalar`, `AnyOf`,
`Map`, `MapOf`, `ListOf`), each checking a value and naming what it expected, and each the declaration
of a key besides (`Spec.declared`: its default and meaning). The table of keys is `config_schema.SCHEMA`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Self

Path = tuple[str | int, ...]


class Problem(NamedTuple):
    """One thing wrong in hub.yaml: where (a key path), what, and the form that was expected."""

    path: Path
    problem: str
    expected: str = ""
    at_key: bool = False  # the key itself is wrong (unknown): point at the key, not its value


class Spec:
    """A value's expected form. `check` returns the problems of one value (never raises).

    A form in the table is also its key's declaration (`declared`): the value a key left out takes, and
    what the key means. config.py's defaults, `hub init`'s hub.yaml (config_template.py) and README's key
    reference take them from here."""

    expected = "a value"
    default: Any = None  # None: no default, or one config.py works out (`project`: the folder's name)
    help = ""

    def declared(self, default: Any = None, help: str = "") -> Self:
        """This form as one key's declaration: a twin of it carrying the key's default and meaning (a
        form like SECONDS serves several keys, each with a default of its own)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(vars(self))
        twin.default, twin.help = default, help
        return twin

    def check(self, value: Any, path: Path) -> list[Problem]:
        raise NotImplementedError

    def wrong(self, value: Any, path: Path) -> list[Problem]:
        return [Problem(path, f"got {describe(value)}", self.expected)]


class Str(Spec):
    """A string; `choices` limits it to a few words, `plain_name` to a file name without folders."""

    def __init__(
        self, choices: tuple[str, ...] = (), plain_name: bool = False, non_empty: bool = True
    ) -> None:
        self.choices, self.plain_name, self.non_empty = choices, plain_name, non_empty

    @property
    def expected(self) -> str:  # type: ignore[override]
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return "a file name without '/'" if self.plain_name else "a string (quote it if YAML reads a number)"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, str):
            return self.wrong(value, path)
        if self.choices and value not in self.choices:
            hint = did_you_mean(value, self.choices)
            return [Problem(path, f"'{value}' is not allowed{hint}", self.expected)]
        if self.non_empty and not value.strip():
            return [Problem(path, "is empty", self.expected)]
        if self.plain_name and ("/" in value or "\\" in value or value in (".", "..")):
            return [Problem(path, f"'{value}' is a path", self.expected)]
        return []


class Num(Spec):
    """A number (an integer when `integer`), within [minimum, maximum] (> minimum when `above`); `unit`
    says what it counts."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        integer: bool = False,
        unit: str = "",
        above: bool = False,
    ) -> None:
        self.minimum, self.maximum, self.unit = minimum, maximum, unit
        self.integer, self.above = integer, above

    @property
    def expected(self) -> str:  # type: ignore[override]
        kind = "an integer" if self.integer else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.above else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        text = " ".join([kind, *([" and ".join(bounds)] if bounds else [])])
        return f"{text} ({self.unit})" if self.unit else text

    def check(self, value: Any, path: Path) -> list[Problem]:
        ok_type = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type) or not math.isfinite(value):
            return self.wrong(value, path)
        low = self.minimum
        if low is not None and (value <= low if self.above else value < low):
            return [Problem(path, f"{value:g} is too small", self.expected)]
        if self.maximum is not None and value > self.maximum:
            return [Problem(path, f"{value:g} is too large", self.expected)]
        return []


def Int(minimum: float | None = None, maximum: float | None = None, unit: str = "") -> Num:
    return Num(minimum, maximum, integer=True, unit=unit)


class Command(Spec):
    """A command line: a string (split on spaces) or a list of strings."""

    expected = "a command: a string, or a list of strings like [python, -m, hub, worker, serve]"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if isinstance(value, str) and value.strip():
            return []
        if isinstance(value, list) and value and all(isinstance(p, str | int | float) for p in value):
            return []
        return self.wrong(value, path)


class Scalar(Spec):
    """A string, number or boolean (an environment variable's value)."""

    expected = "a string, number or boolean"

    def check(self, value: Any, path: Path) -> list[Problem]:
        return [] if isinstance(value, str | int | float | bool) else self.wrong(value, path)


class Bool(Spec):
    """true or false (YAML also reads yes/no/on/off as booleans)."""

    expected = "true or false"

    def check(self, value: Any, path: Path) -> list[Problem]:
        return [] if isinstance(value, bool) else self.wrong(value, path)


class AnyOf(Spec):
    """One of several forms (e.g. `sandbox: off` or a mapping): the first form whose type fits decides;
    when none fits, all are named."""

    def __init__(self, forms: tuple[Spec, ...]) -> None:
        self.forms = forms

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(form.expected for form in self.forms)

    def check(self, value: Any, path: Path) -> list[Problem]:
        results = [form.check(value, path) for form in self.forms]
        if any(not problems for problems in results):
            return []
        # A form whose type fits (its problems lie deeper, or are about the value, not its type).
        for problems in results:
            if not all(p.path == path and p.problem.startswith("got ") for p in problems):
                return problems
        return [Problem(path, f"got {describe(value)}", self.expected)]


class Map(Spec):
    """A mapping with known keys; `required` keys must be present."""

    def __init__(
        self, fields: Mapping[str, Spec], required: tuple[str, ...] = (), what: str = "a mapping"
    ) -> None:
        self.fields, self.required, self.what = fields, required, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"{self.what} with keys {', '.join(self.fields)}"

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for key, item in value.items():
            spec = self.fields.get(str(key))
            if spec is None:
                hint = did_you_mean(str(key), list(self.fields))
                known = ", ".join(self.fields)
                problems.append(
                    Problem((*path, str(key)), f"unknown key{hint}", f"one of {known}", at_key=True)
                )
            elif item is not None:
                problems += spec.check(item, (*path, str(key)))
        for key in self.required:
            if value.get(key) is None:
                problems.append(Problem((*path, key), "is missing", self.fields[key].expected))
        return problems


class MapOf(Spec):
    """A mapping from names the user chooses (model names, variable names) to values of one form."""

    def __init__(self, values: Spec, what: str = "a mapping") -> None:
        self.values, self.what = values, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for key, item in value.items():
            if item is not None:
                problems += self.values.check(item, (*path, str(key)))
        return problems


class ListOf(Spec):
    """A YAML list (`- item` lines) of values of one form."""

    def __init__(self, items: Spec, what: str = "a list") -> None:
        self.items, self.what = items, what

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Any, path: Path) -> list[Problem]:
        if not isinstance(value, list):
            return self.wrong(value, path)
        problems: list[Problem] = []
        for index, item in enumerate(value):
            if item is None:
                problems.append(Problem((*path, index), "is empty", self.items.expected))
            else:
                problems += self.items.check(item, (*path, index))
        return problems


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib  # here, not at the top: only a wrong hub.yaml asks

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def describe(value: Any) -> str:
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }
    shown = repr(value) if not isinstance(value, dict | list) or len(repr(value)) < 40 else ""
    return f"{kind.get(type(value), type(value).__name__)} {shown}".rstrip()
