"""A FakeOllama on loopback and an HTTP client of it, for the tests of the fake itself."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from hub.testing import FakeOllama


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def client(fake: FakeOllama) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=5) as c:
        yield c
