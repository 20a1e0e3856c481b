"""The mirror in-process between two standalone brokers: recompressing, following new topics and
partitions, and stopping on a message the target refuses -- with the offsets before it
committed and none after."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from client import Admin, Consumer, Producer, TopicPartition
from client.group_admin import GroupAdmin
from protocol.compression import BatchCodec, Codec
from protocol.entry_scan import scan_entries
from protocol.messageset import CODEC_MASK
from tests.cluster.conftest import until
from tooling.mirror.naming import TopicSelection
from tooling.mirror.runner import Mirror, MirrorOptions
from tooling.mirror.stream import MirrorError, StreamConfig

pytestmark = pytest.mark.integration


@contextmanager
def running(options: MirrorOptions) -> Iterator[tuple[Mirror, list[BaseException]]]:
    """The mirror in a thread; stopped (and joined) on leaving."""
    mirror = Mirror(options, lambda line: None)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mirror.run(stop.is_set)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield mirror, errors
    finally:
        stop.set()
        thread.join(60)
        assert not thread.is_alive()


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while len(records) < expected:
            assert time.monotonic() < deadline, f"{len(records)} of {expected} on {topic}"
            records += consumer.poll(200)
        return records


def stored_codecs(bootstrap: str, topic: str, partition: int, end: int) -> set[BatchCodec]:
    """The codecs of the entries or record batches a partition stores up to ``end``."""
    with Consumer(bootstrap, message_sets=True, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, partition)])
        codecs: set[Codec] = set()
        position = 0
        deadline = time.monotonic() + 30
        while position < end:
            assert time.monotonic() < deadline
            for s in consumer.poll_sets(200):
                codecs |= {BatchCodec(a & CODEC_MASK) for a in scan_entries(s.data).attributes}
                position = s.next_offset
        return codecs


def options(source: str, target: str, group: str, **stream: Any) -> dict[str, Any]:
    return {"stream": StreamConfig(source, target, group=group, commit_interval=0.2, **stream),
            "progress_interval": 0, "sync_interval": 0.5}


def test_recompressing_keeps_messages_and_changes_the_codec(make_broker) -> None:
    source, target = make_broker("source"), make_broker("target")
    with Producer(source.bootstrap, compression="gzip", linger_ms=5) as producer:
        for i in range(600):
            producer.send("events", b"value-%d" % i, key=b"k%d" % (i % 7),
                          timestamp=1_700_000_000_000 + i)
    sent = read_all(source.bootstrap, "events", 1, 600)
    opts = MirrorOptions(selection=TopicSelection(names=frozenset({"events"})),
                         **options(source.bootstrap, target.bootstrap, "re", recompress=Codec.LZ4))
    with running(opts) as (mirror, errors):
        copied = read_all(target.bootstrap, "events", 1, 600)
        until(lambda: mirror.progress.acknowledged == 600, 30, "600 acknowledged")
    assert not errors
    assert [(r.key, r.value, r.timestamp) for r in copied] == [
        (r.key, r.value, r.timestamp) for r in sent]
    assert stored_codecs(target.bootstrap, "events", 0, 600) == {BatchCodec.LZ4}


def test_a_pattern_follows_new_topics_and_partitions(make_broker) -> None:
    source, target = make_broker("source"), make_broker("target")
    with Admin(source.bootstrap) as admin:
        admin.create_topic("metrics.cpu", 2)
    opts = MirrorOptions(selection=TopicSelection.of(r"metrics\..*", []),
                         **options(source.bootstrap, target.bootstrap, "follow",
                                   metadata_max_age_ms=500))
    with running(opts) as (_, errors), Producer(source.bootstrap, acks="all") as producer, \
            Admin(source.bootstrap) as source_admin, Admin(target.bootstrap) as target_admin:
        producer.send("metrics.cpu", b"a", partition=1).result(10)
        source_admin.create_topic("metrics.disk", 3)
        source_admin.create_partitions("metrics.cpu", 4)
        with Producer(source.bootstrap, acks="all") as later:  # one that knows the growth
            later.send("metrics.cpu", b"b", partition=3).result(10)
            later.send("metrics.disk", b"c", partition=2).result(10)

        def partitions(name: str) -> int:
            return {t.name: len(t.partitions) for t in target_admin.describe_topics()}.get(name, 0)

        until(lambda: partitions("metrics.cpu") == 4 and partitions("metrics.disk") == 3, 30,
              "the target's topics grown and created")
        cpu = read_all(target.bootstrap, "metrics.cpu", 4, 2)
        disk = read_all(target.bootstrap, "metrics.disk", 3, 1)
    assert not errors
    assert sorted((r.partition, r.value) for r in cpu) == [(1, b"a"), (3, b"b")]
    assert [(r.partition, r.value) for r in disk] == [(2, b"c")]


def test_a_refused_message_stops_the_mirror_with_the_offsets_before_it_committed(
        make_broker) -> None:
    source, target = make_broker("source"), make_broker("target")
    with Admin(target.bootstrap) as admin:
        admin.create_topic("blobs", 1, configs={"max_message_bytes": "2000"})
    tp = TopicPartition("blobs", 0)
    opts = MirrorOptions(selection=TopicSelection(names=frozenset({"blobs"})),
                         **options(source.bootstrap, target.bootstrap, "refused"))
    with running(opts) as (_, errors), Producer(source.bootstrap, acks="all") as producer, \
            GroupAdmin(source.bootstrap) as admin:
        for i in range(5):
            producer.send("blobs", b"x" * 100, key=b"%d" % i).result(10)
        until(lambda: admin.committed_offsets("refused").get(tp, (0,))[0] == 5, 30,
              "the first 5 committed")
        producer.send("blobs", b"y" * 5000).result(10)  # too large for the target
        producer.send("blobs", b"z" * 100).result(10)
        until(lambda: errors, 60, "the mirror's error")
        committed = admin.committed_offsets("refused")[tp].offset
    [error] = errors
    assert isinstance(error, MirrorError)
    assert "blobs-0" in str(error) and "target topic 'blobs'" in str(error)
    # neither the refused message nor the one after it counts as copied: a mirror started
    # again (with the target's limit raised) copies both
    assert committed == 5
    assert [r.value for r in read_all(target.bootstrap, "blobs", 1, 5)] == [b"x" * 100] * 5


def test_streams_of_one_process_share_the_partitions(make_broker) -> None:
    source, target = make_broker("source"), make_broker("target")
    with Admin(source.bootstrap) as admin:
        admin.create_topic("wide", 6)
    with Producer(source.bootstrap) as producer:
        for i in range(1_200):
            producer.send("wide", b"%d" % i, key=b"%d" % i)
    opts = MirrorOptions(selection=TopicSelection(names=frozenset({"wide"})), num_streams=2,
                         **options(source.bootstrap, target.bootstrap, "two"))
    with running(opts) as (_, errors), GroupAdmin(source.bootstrap) as admin:
        def two_owners() -> bool:
            if "two" not in {g.group_id for g in admin.list_groups()}:
                return False  # not joined yet
            group = admin.describe_group("two")
            owned = [len(m.assignment) for m in group.members]
            return group.state == "Steady" and len(owned) == 2 and min(owned) > 0

        until(two_owners, 30, "both streams owning partitions")
        copied = read_all(target.bootstrap, "wide", 6, 1_200)
    assert not errors
    assert sorted(int(r.value) for r in copied) == list(range(1_200))
