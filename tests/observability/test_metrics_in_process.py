"""Broker metrics in-process, on real topics, logs and coordinators: what one broker counts is
its own, even with two brokers in one process, and a deleted topic's series go with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.context import BrokerContext
from broker.group_driver import GroupDriver
from broker.identity import load_or_create
from broker.metrics import BrokerMetrics
from broker.purgatory import FetchPurgatory
from broker.security.policy import SecurityPolicy
from broker.security.store import FileSecurityStore
from broker.settings import BrokerSettings
from broker.topics import Topics
from protocol.messageset import encode_message_set

FLUSHES = "odradek_logflushstats_logflush_seconds_count"


class Broker:
    """The parts of one broker the metrics read, and its metrics."""

    def __init__(self, data_dir: Path) -> None:
        settings = BrokerSettings(data_dir=str(data_dir), offsets_topic_partitions=1)
        self.topics = Topics(settings)
        purgatory = FetchPurgatory()
        groups = GroupDriver(settings.coordinator_config(), self.topics, purgatory)
        ctx = BrokerContext(
            settings, load_or_create(settings.data_path, None), self.topics, purgatory, groups,
            security=SecurityPolicy(FileSecurityStore(settings.data_path),
                                    authorizer_enabled=False))
        self.metrics = BrokerMetrics(ctx, connection_count=lambda: 0)
        self.metrics.attach()

    def close(self) -> None:
        self.metrics.detach()
        self.topics.close()

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(self.metrics.exposition().decode())
            for s in family.samples
        }


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Broker, Broker]]:
    brokers = Broker(tmp_path / "a"), Broker(tmp_path / "b")
    yield brokers
    for broker in brokers:
        broker.close()


def test_each_broker_counts_only_its_own_log_flushes(
    two: tuple[Broker, Broker],
) -> None:
    a, b = two
    a.topics.create("t", 1, 1, {})
    plog = a.topics.log("t", 0)
    assert plog is not None
    plog.append(encode_message_set([(None, b"m", 0)]))
    plog.flush()
    plog.flush()
    assert a.samples()[(FLUSHES, ())] == 2
    assert b.samples()[(FLUSHES, ())] == 0


def test_a_deleted_topics_series_are_removed(two: tuple[Broker, Broker]) -> None:
    a, _ = two
    for name in ("gone", "kept"):
        a.topics.create(name, 2, 1, {})
        a.metrics.produced(name, 10, 1)
    a.topics.delete("gone")
    names = {labels for name, labels in a.samples() if name.startswith(
        "odradek_brokertopicmetrics_")}
    assert names == {(("topic", "kept"),)}
