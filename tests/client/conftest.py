"""Fixtures for client tests: the in-memory fake broker, and a socket served by hand."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.client.fake_broker import FakeBroker


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket on 127.0.0.1 for a test to serve by hand (tests.client.served_by_hand)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    broker = FakeBroker({"t": 1, "three": 3})
    try:
        yield broker
    finally:
        broker.close()
