"""Shared test configuration: hypothesis profiles (HYPOTHESIS_PROFILE=default|ci|deep), the
fixtures that start real broker processes, and the session's ZooKeeper for cluster tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.broker_process import BrokerProcess
from tooling.local.cluster import ZooKeeperServer, ZooKeeperUnavailableError

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.register_profile("deep", parent=settings.get_profile("default"), max_examples=20_000)
# CI runs derandomized (the same examples every run): a red build is one a developer can rerun
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)


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


# ------------------------------------------------------------------------------- ZooKeeper

@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper for the whole session on a free 127.0.0.1 port (never 2181),
    started when a test first asks for it and stopped by PID at the end. Tests share it, so
    use ``zk_connect`` for a chroot of your own; a test that kills or restarts ZooKeeper
    starts its own ``ZooKeeperServer`` instead. Not installed: the test fails saying how to
    install it (CI installs it; scripts/check does)."""
    try:
        server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    except ZooKeeperUnavailableError as exc:
        pytest.fail(f"cluster tests need ZooKeeper: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """``127.0.0.1:PORT/t-<uuid>``: the session's ZooKeeper under a chroot of this test's own,
    so tests do not see each other's brokers, controller or topics. The chroot node is not
    created here: brokers create it, as Kafka's do (``odradek cluster up`` relies on that)."""
    return f"{zookeeper.connect}/t-{uuid.uuid4().hex}"
