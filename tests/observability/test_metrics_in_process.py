"""Broker metrics in-process, on real topics, logs and coordinators: what one broker counts is
its own, even with two brokers in one process; a deleted topic's series go with it; a scraper
that sends no request is let go at the read deadline (trio's autojump clock); docs/operations.md
lists every metric exported."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from broker.cluster.single import SingleBroker
from broker.context import BrokerContext
from broker.group_driver import GroupDriver
from broker.identity import load_or_create
from broker.metrics import HEAD_TIMEOUT_S, MAX_CONNECTIONS, BrokerMetrics, serve_metrics
from broker.purgatory import FetchPurgatory
from broker.security.policy import SecurityPolicy
from broker.security.store import FileSecurityStore
from broker.settings import BrokerSettings
from broker.topics import Topics
from protocol.messageset import encode_message_set

FLUSHES = "odradek_logflushstats_logflush_seconds_count"
OPERATIONS = Path(__file__).parents[2] / "docs" / "operations.md"


class Broker:
    """The parts of one broker the metrics read, and its metrics."""

    def __init__(self, data_dir: Path) -> None:
        settings = BrokerSettings(data_dir=str(data_dir), offsets_topic_partitions=1)
        self.topics = Topics(settings)
        purgatory = FetchPurgatory()
        groups = GroupDriver(settings.coordinator_config(), self.topics, purgatory)
        identity = load_or_create(settings.data_path, None)
        ctx = BrokerContext(
            settings, identity, self.topics, purgatory, groups,
            security=SecurityPolicy(FileSecurityStore(settings.data_path),
                                    authorizer_enabled=False),
            cluster=SingleBroker(settings, identity.broker_id, self.topics, purgatory, groups,
                                 listener_ports={}))
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


async def test_an_idle_scraper_is_closed_at_the_read_deadline(
    two: tuple[Broker, Broker], autojump_clock: trio.testing.MockClock,
) -> None:
    a, _ = two
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, a.metrics, "127.0.0.1:0")
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        started = trio.current_time()
        with trio.fail_after(2 * HEAD_TIMEOUT_S):
            assert await idle.receive_some() == b""  # closed, nothing answered
        assert trio.current_time() - started >= HEAD_TIMEOUT_S
        await idle.aclose()
        nursery.cancel_scope.cancel()


def test_the_operations_guide_lists_every_metric_exported(two: tuple[Broker, Broker]) -> None:
    a, _ = two
    exported = {
        (f"{family.name}_total" if family.type == "counter" else family.name, family.type)
        for family in text_string_to_metric_families(a.metrics.exposition().decode())
    }
    guide = OPERATIONS.read_text()
    documented = set(re.findall(r"^\| `(odradek_\w+)` \| (\w+) \|", guide, re.MULTILINE))
    assert documented == exported
    prose = " ".join(guide.split())
    assert f"at most {MAX_CONNECTIONS} connections" in prose
    assert f"within {HEAD_TIMEOUT_S:g} s" in prose
