"""Shared test configuration: hypothesis profiles (HYPOTHESIS_PROFILE=default|ci|deep), and
the fixtures that start real broker processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.broker_process import BrokerProcess

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.register_profile("deep", parent=settings.get_profile("default"), max_examples=20_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# ------------------------------------------------------------------- real broker processes

@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers (``make_broker(settings={...}, env={...})``, each in its own data
    directory under tmp_path); every one is stopped by PID at the end and its log printed
    (pytest shows it when the test failed)."""
    started: list[BrokerProcess] = []

    def factory(name: str | None = None, **kwargs: Any) -> BrokerProcess:
        process = BrokerProcess(tmp_path / (name or f"broker-{len(started)}"), **kwargs)
        started.append(process)
        return process.start()

    yield factory
    for process in started:
        process.stop()
        print(f"===== broker log ({process.data_dir.name}) =====\n{process.log_text()}")


@pytest.fixture
def broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A started broker on 127.0.0.1 with default settings, stopped at the end of the test."""
    return make_broker()
