"""A judge's report: its shape, checked against `hub.state.schema.JUDGE_REPORT_SCHEMA`, from JSON or from
a markdown JUDGE_REPORT.md with a `Verdict:` line. Pure."""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from hub.core.errors import ContractInvalid
from hub.state.contract import VERDICTS
from hub.state.schema import invalid, validator

# For mypy only, like the contract's TypedDicts (hub.state.contract says why).
if TYPE_CHECKING:
    from hub.state.contract import Issue

    class JudgeUsage(TypedDict, total=False):
        prompt_tokens: int
        completion_tokens: int
        model: str
        cost_usd: float

    class JudgeReport(TypedDict):
        verdict: str
        summary: NotRequired[str]
        blocking_issues: NotRequired[list[Issue]]
        suggestions: NotRequired[list[str | dict[str, Any]]]
        usage: NotRequired[JudgeUsage]

else:
    JudgeUsage = dict
    JudgeReport = dict


def validate_judge_report(report: Any, file: str = "JUDGE_REPORT.json") -> JudgeReport:
    if not isinstance(report, dict):
        raise ContractInvalid(file, "$", "expected a JSON object")
    try:
        validator("judge")(report)
    except ValueError as exc:
        raise invalid(file, exc) from None
    if report["verdict"] == "FAIL" and not report.get("blocking_issues"):
        # Sent back with nothing to fix, the implementer would write the same change again, and its next
        # review would end the same way: a review cycle spent, then a halt that says nothing.
        raise ContractInvalid(
            file,
            "$.blocking_issues",
            "a FAIL verdict with no blocking issue: the implementer would have nothing to fix",
            hint="list what must change under blocking_issues (JUDGE_REPORT.md: bullets under a "
            "'## Blocking issues' heading), or give the verdict PASS or CONDITIONAL",
        )
    return cast("JudgeReport", report)


@cache
def _verdict_line() -> re.Pattern[str]:
    # Compiled on first use: this case-insensitive pattern takes ~4 ms to compile, which every command
    # paid at start-up (bench/bench_startup.py) though only a markdown judge report needs it.
    return re.compile(r"^\W*verdict\W*:?\W*([A-Za-z_]+)", re.IGNORECASE | re.MULTILINE)


def judge_report_from_markdown(text: str, file: str = "JUDGE_REPORT.md") -> JudgeReport:
    """A JUDGE_REPORT.md with a `Verdict: X` line; its bullets under 'Blocking' become blocking issues."""
    match = _verdict_line().search(text)
    if not match:
        raise ContractInvalid(file, "Verdict", "no 'Verdict: PASS|CONDITIONAL|FAIL|CRITICAL_HALT' line")
    verdict = match.group(1).upper()
    if verdict not in VERDICTS:
        raise ContractInvalid(
            file, "Verdict", f"unknown verdict '{match.group(1)}'; expected one of {', '.join(VERDICTS)}"
        )
    issues: list[Issue] = []
    in_blocking = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            in_blocking = "blocking" in stripped.lower()
        elif in_blocking and stripped[:2] in ("- ", "* "):
            issues.append(
                {"id": f"B{len(issues) + 1}", "severity": "major", "description": stripped[2:].strip()}
            )
    if verdict == "FAIL" and not issues:
        # A FAIL in prose, without a blocking heading: the prose is what the implementer must fix.
        verdict_line = text.count("\n", 0, match.start(1))
        prose = "\n".join(
            line
            for n, line in enumerate(text.splitlines())
            if n != verdict_line and line.strip() and not line.lstrip().startswith("#")
        ).strip()
        if prose:
            issues.append({"id": "B1", "severity": "major", "description": prose[:4000]})
    return validate_judge_report(
        {"verdict": verdict, "blocking_issues": issues, "summary": text.strip()}, file
    )
