"""Fixtures for client tests that run against the in-memory fake broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.fake_broker import FakeBroker


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    broker = FakeBroker({"t": 1, "three": 3})
    try:
        yield broker
    finally:
        broker.close()
