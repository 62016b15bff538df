"""Every reply shape in tests/agent/corpus/ reads as its case says: the calls with exact arguments, or a
problem the model can act on, and never a call that should not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.agent.text_calls import calls_in_text
from hub.testing.call_corpus import CallCase, Read, load_call_cases, matches, score

CASES = load_call_cases(Path(__file__).parent / "corpus")


def test_the_corpus_holds_every_reported_shape_with_its_source() -> None:
    assert len(CASES) >= 40
    assert all("https://" in case.source or "real Qwen2.5-Coder" in case.source for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_reply_shape_reads_as_its_case_expects(case: CallCase) -> None:
    read = calls_in_text(case.reply, case.tools)
    got = [Read(c.name, c.arguments, c.problem) for c in read.calls]
    assert matches(case, got), got
    assert score(case, got) != "wrong"
