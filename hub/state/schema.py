"""The contract's JSON schema (derived from the TypedDicts of `hub.state.contract`, its one declaration),
a judge report's, and the check of a document against them. Reading and writing contracts is
`hub.state.store`; the only file read here is the contract's own source, to derive its schema.

`validate` is the schema plus the rules a schema cannot say (a path both allowed and forbidden, numbers
past what a timedelta holds, paths outside the repository). The validators come from modules
`scripts/gen_validators.py` generates from these schemas, or are compiled when those are stale.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hub.core.errors import ContractInvalid
from hub.state.contract import COMPLEXITIES, SCHEMA_VERSION, VERDICTS, parse_iso
from hub.state.machine import STATES

if TYPE_CHECKING:
    from hub.state.contract import Contract

_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_NUM = {"type": "number", "minimum": 0}
_INT = {"type": "integer", "minimum": 0}
_MINUTES = {"exclusiveMinimum": 0}
_AT_LEAST_0 = {"minimum": 0}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


# --- the contract: its shape is hub.state.contract's TypedDicts, these are what a type cannot say -------

# By path (hub.state.shape): `a.b` a key, `a[]` a list's items, `a.*` any key of a dict.
CONTRACT_REFINEMENTS: dict[str, dict[str, Any]] = {
    "schema_version": {"const": SCHEMA_VERSION},
    "task_id": {"pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$"},
    "project": {"minLength": 1},
    "complexity": {"enum": list(COMPLEXITIES)},
    "status": {"enum": [state.value for state in STATES]},
    "attempt": {"minimum": 1},
    "limits.max_rebuttals": _AT_LEAST_0,
    "limits.max_review_cycles": {"minimum": 1},
    "limits.timeout_minutes.implementer": _MINUTES,
    "limits.timeout_minutes.local_review": _MINUTES,
    "limits.timeout_minutes.judge": _MINUTES,
    "limits.token_budget": _AT_LEAST_0,
    "limits.cost_ceiling_usd": _AT_LEAST_0,
    "limits.max_changed_files": {"minimum": 1},
    "constraints.max_diff_lines": {"minimum": 1},
    "specification.requirements": {"minItems": 1},
    "specification.requirements[]": {"minLength": 1},
    "breaker.status": {"enum": ["closed", "tripped"]},
    "breaker.counters.*": _AT_LEAST_0,
    **{f"cost.*.{key}": _AT_LEAST_0 for key in ("tokens_in", "tokens_out", "seconds", "usd", "calls")},
}

# Shapes that keep keys they do not declare. An issue: a judge's blocking issue is stored as the judge
# wrote it, and JUDGE_REPORT_SCHEMA leaves a report's issues open.
OPEN_SHAPES = frozenset({"Issue"})


def contract_schema() -> dict[str, Any]:
    """The contract's JSON schema, derived from the TypedDicts of hub/state/contract.py (their source)
    with CONTRACT_REFINEMENTS; every object they describe refuses keys they do not declare."""
    from hub.state.shape import Shapes

    shapes = Shapes(_contract_source(), CONTRACT_REFINEMENTS, set(OPEN_SHAPES))
    return shapes.schema("Contract")


def _contract_source() -> str:
    return Path(__file__).with_name("contract.py").read_text(encoding="utf-8")


SOURCES = ("contract.py", "schema.py", "shape.py")


def sources_stamp() -> int:
    """A checksum of what the contract's schema is made from (the TypedDicts, the refinements, the
    derivation): the
    generated validator records it, and one made from other sources is never used."""
    import zlib

    here = Path(__file__)
    return zlib.crc32(b"".join(here.with_name(name).read_bytes() for name in SOURCES))


def __getattr__(name: str) -> Any:
    # `SCHEMA` is derived on first use: reading contract.py costs start-up nothing it does not need.
    if name == "SCHEMA":
        return _cached_contract_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _cached_contract_schema() -> dict[str, Any]:
    return contract_schema()


JUDGE_REPORT_SCHEMA: dict[str, Any] = _obj(
    ["verdict"],
    verdict={"enum": list(VERDICTS)},
    summary=_STR,
    blocking_issues={
        "type": "array",
        "items": _obj(
            ["description"],
            id=_STR,
            severity=_STR,
            file=_STR_OR_NULL,
            line={"type": ["integer", "null"]},
            description=_STR,
            fix_required=_STR_OR_NULL,
        ),
    },
    suggestions={"type": "array", "items": {"type": ["string", "object"]}},
    usage=_obj(
        [],
        prompt_tokens=_INT,
        completion_tokens=_INT,
        model=_STR,
        cost_usd=_NUM,
    ),
)


# --- validation -------------------------------------------------------------------------------------


def schema_json(schema: dict[str, Any]) -> str:
    """The schema as the generated validator records it (`SCHEMA_JSON`): compared whole, not hashed,
    since hashlib's import alone (OpenSSL) is a twentieth of `hub status`."""
    return json.dumps(schema, sort_keys=True)


@cache
def validator(which: str) -> Any:
    """The validator of the contract ("contract") or of a judge report ("judge"); raises ValueError."""
    # Validators generated by scripts/gen_validators.py cost ~1 ms to import; compiling the schema
    # at run time costs tens of milliseconds on every command. Stale ones are never used.
    try:
        generated = importlib.import_module(
            "hub.state._validate_contract" if which == "contract" else "hub.state._validate_judge"
        )
    except ImportError:
        generated = None
    if generated is not None and _current(generated, which):
        return generated.validate
    import fastjsonschema

    return fastjsonschema.compile(_cached_contract_schema() if which == "contract" else JUDGE_REPORT_SCHEMA)


def _current(generated: Any, which: str) -> bool:
    if which != "contract":
        return getattr(generated, "SCHEMA_JSON", None) == schema_json(JUDGE_REPORT_SCHEMA)
    # A checksum of the sources, not the derived schema: deriving it reads and parses contract.py.
    try:
        return getattr(generated, "SOURCES_STAMP", None) == sources_stamp()
    except OSError:
        return True  # no sources beside the package (a frozen install): the generated one is all there is


def invalid(file: str, exc: Any) -> ContractInvalid:
    """A validator's error as ContractInvalid, naming the file and the JSON path of the bad field."""
    # fastjsonschema names fields "data.limits.max_rebuttals" / "data.history[2].event".
    name = str(exc.name or "data")
    path = "$" + name[len("data") :] if name.startswith("data") else name
    if getattr(exc, "rule", None) == "required" and isinstance(exc.value, dict):
        missing = [key for key in exc.definition.get("required", []) if key not in exc.value]
        if missing:
            return ContractInvalid(file, f"{path}.{missing[0]}", "required field is missing")
    return ContractInvalid(file, path, str(exc.message).replace(name, "value"))


def validate(contract: Any, file: str = "TASK_CONTRACT.json") -> Contract:
    """Check a contract against the schema and the rules a schema cannot say; return it unchanged."""
    if not isinstance(contract, dict):
        raise ContractInvalid(file, "$", "expected a JSON object")
    try:
        validator("contract")(contract)
    except ValueError as exc:  # fastjsonschema's JsonSchemaValueException, or the generated module's
        raise invalid(file, exc) from None
    constraints = contract["constraints"]
    allowed = set(constraints["allowed_paths"])
    for i, path in enumerate(constraints["forbidden_paths"]):
        if path in allowed:
            raise ContractInvalid(
                file,
                f"$.constraints.forbidden_paths[{i}]",
                f"'{path}' is listed as both allowed and forbidden",
            )
    _check_paths(contract, file)
    _check_numbers(contract, file)
    for key in ("created_at", "updated_at", "deadline_at"):
        value = contract["timestamps"].get(key)
        if value is not None:
            try:
                parse_iso(value)
            except ValueError:
                raise ContractInvalid(
                    file, f"$.timestamps.{key}", f"'{value}' is not an ISO 8601 time"
                ) from None
    return cast("Contract", contract)


# Upper bounds a schema minimum leaves open: 1e300 minutes overflowed a timedelta into a traceback.
NUMBER_BOUNDS: dict[tuple[str, ...], float] = {
    ("attempt",): 10_000,
    ("limits", "max_rebuttals"): 1_000,
    ("limits", "max_review_cycles"): 1_000,
    ("limits", "timeout_minutes", "implementer"): 7 * 24 * 60,
    ("limits", "timeout_minutes", "local_review"): 7 * 24 * 60,
    ("limits", "timeout_minutes", "judge"): 30 * 24 * 60,
    ("limits", "token_budget"): 10**12,
    ("limits", "cost_ceiling_usd"): 10**9,
    ("limits", "max_changed_files"): 100_000,
    ("constraints", "max_diff_lines"): 10**7,
}


# Counts: JSON Schema calls 2.0 an integer, Python does not (`range(2.0)`, an attempt shown as "2.0").
INTEGER_FIELDS = frozenset(
    {
        ("attempt",),
        ("limits", "max_rebuttals"),
        ("limits", "max_review_cycles"),
        ("limits", "token_budget"),
        ("limits", "max_changed_files"),
        ("constraints", "max_diff_lines"),
    }
)


def _check_numbers(contract: dict[str, Any], file: str) -> None:
    for keys, bound in NUMBER_BOUNDS.items():
        value: Any = contract
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, bool):
            continue
        if keys in INTEGER_FIELDS and isinstance(value, float):
            raise ContractInvalid(
                file, "$." + ".".join(keys), f"{value!r} is not a whole number", hint="write it without '.'"
            )
        if not math.isfinite(value) or value > bound:
            raise ContractInvalid(
                file, "$." + ".".join(keys), f"{value!r} is out of range (at most {bound:g})"
            )


def path_problem(path: str) -> str | None:
    """Why a contract path cannot name a file inside the repository, else None. Pure: the path's shape
    only; what a symlink on the way points to is checked where the file is opened."""
    clean = path.strip().replace("\\", "/")
    if not clean:
        return "is empty"
    if "\x00" in clean:
        return "contains a NUL byte"
    if clean.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", clean):
        return "is not inside the repository (give a path relative to its root)"
    if ".." in clean.split("/"):
        return "is not inside the repository ('..')"
    if any(len(part.encode("utf-8")) > 255 for part in clean.split("/")):
        return "has a path component longer than 255 bytes"
    return None


def _check_paths(contract: dict[str, Any], file: str) -> None:
    spec, constraints = contract["specification"], contract["constraints"]
    named: list[tuple[str, Any]] = [("$.specification.target_file", spec.get("target_file"))]
    named += [(f"$.specification.source_files[{i}]", p) for i, p in enumerate(spec.get("source_files") or [])]
    for key in ("allowed_paths", "forbidden_paths"):
        named += [(f"$.constraints.{key}[{i}]", p) for i, p in enumerate(constraints.get(key) or [])]
    for where, path in named:
        if path is None:
            continue
        problem = path_problem(path)
        if problem:
            raise ContractInvalid(file, where, f"'{path}' {problem}")
