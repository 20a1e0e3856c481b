"""librdkafka's own test scenarios (its ``tests/0NNN-*.c``), carried over as odradek's tests:
what librdkafka checks against a Kafka broker, checked against odradek's Kafka listener with
confluent-kafka (librdkafka) and, where it reads better from two sides, kafka-python.

| scenario | librdkafka | here |
|---|---|---|
| null and empty keys and values stay distinct | 0013, 0070 | test_null_and_empty_keys_and_values |
| longest topic name (249) works, one more is refused | 0028 | test_long_topic_names |
| ListOffsets by timestamp, each offset found | 0052, 0054, 0059 | test_offsets_for_times |
| committed offset metadata round trip, too large | 0099, 0140 | test_commit_metadata_round_trip |
| assign at explicit offsets, BEGINNING and END | 0029, 0031 | test_assign_at_offsets |
| auto.offset.reset earliest/latest/error | 0034 | test_auto_offset_reset_out_of_range |
| max.poll.interval.ms exceeded: member leaves | 0089 | test_max_poll_interval_exceeded |
| stopped member's session expires, it rejoins | 0106 | test_stopped_member_session_expires |
| partitions added to a subscribed topic | 0044, 0045, 0069 | test_added_partitions_are_picked_up |
| regex subscription picks up a new topic | 0033 | test_regex_subscription_new_topic |
| pause and resume a partition | 0026 | test_pause_and_resume |
| close commits the stored offsets | 0116, 0130 | test_close_commits_stored_offsets |
| messages larger than fetch.max.bytes | 0041, 0082 | test_message_larger_than_fetch_max_bytes |
| a message over the topic's max.message.bytes | 0003 | test_message_over_max_message_bytes |
| messages each under it, in one set | 0003, 0110 | test_batch_of_messages_under_max_message_bytes |
| invalid topic, unknown partition | 0002, 0057 | test_invalid_topic_and_unknown_partition |
| assigned partition that does not exist yet | 0112 | test_assign_partition_created_later |
| list and describe groups (ListGroups/DescribeGroups v0) | 0019 | test_list_and_describe_groups |
| cluster id and controller id in Metadata | 0063, 0121 | test_cluster_and_controller_ids |
| delivery reports, flush, acks 0, 1 and all | 0008, 0055, 0125 | test_flush_and_delivery_reports |

Incremental cooperative rebalancing (0113) is test_confluent_scenarios.py's
test_cooperative_sticky_rebalance. Not carried, needing what 0.10.2 does not have: idempotence
and transactions (0090, 0094, 0098, 0103, 0105, 0129, 0144), headers (0072, 0073, 0085), zstd
(0017's zstd cases), the admin APIs after CreateTopics and DeleteTopics -- DeleteRecords,
configs, ACLs, DeleteGroups, CreatePartitions (0081; partitions are added here with odradek's
own Admin) --, static membership (0102, JoinGroup v5), fetching from followers (0101, 0104),
KIP-848's consumer protocol (0147) and share groups (0155 onwards), telemetry (0150). Not
carried because they need librdkafka's mock cluster to inject broker errors: 0034's
offset_reset_errors, 0106's heartbeat errors, 0121's change of cluster id, 0117, 0138, 0139,
0143, 0145, 0146, 0148. SSL and SASL are tests/kafka_clients/test_security.py's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from client import Admin
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.kafka_clients.conftest import unique_topic
from tests.kafka_clients.scenario_support import (
    assigned,
    consume,
    consumer,
    create_topic,
    produce,
    wait_for,
)


def _values(messages: list[Message]) -> list[tuple[bytes | None, bytes | None]]:
    return [(m.key(), m.value()) for m in messages]


def test_null_and_empty_keys_and_values(kafka_broker: BrokerProcess) -> None:
    """0013, 0070: a null key or value and an empty one are different things, kept apart both
    ways, for librdkafka's and kafka-python's consumers alike."""
    from kafka import KafkaConsumer  # type: ignore[import-untyped]
    from kafka import TopicPartition as KafkaTopicPartition

    topic = unique_topic("null-empty")
    sent = [(None, None), (b"", b""), (None, b""), (b"", None), (b"key", b"value"),
            (b"key", None)]
    reports = produce(kafka_broker.kafka_bootstrap, topic, sent, partition=0)
    assert [(err, offset) for err, _, offset in reports] == [(None, i) for i in range(6)]

    reader = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-null"))
    try:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert _values(consume(reader, len(sent), "confluent-kafka")) == sent
    finally:
        reader.close()

    other = KafkaConsumer(bootstrap_servers=kafka_broker.kafka_bootstrap,
                          enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        other.assign([KafkaTopicPartition(topic, 0)])
        got: list[tuple[bytes | None, bytes | None]] = []

        def read_all() -> bool:
            for records in other.poll(timeout_ms=200).values():
                got.extend((r.key, r.value) for r in records)
            return len(got) >= len(sent)

        wait_for(read_all, "kafka-python reads the six messages")
        assert got == sent
    finally:
        other.close()


def test_long_topic_names(kafka_broker: BrokerProcess) -> None:
    """0028: a topic name of Kafka's longest length (249) is created, produced to and consumed
    by a group; a name one longer is refused with INVALID_TOPIC_EXCEPTION (17)."""
    prefix = unique_topic("long")
    name = prefix + "x" * (249 - len(prefix))
    create_topic(kafka_broker.kafka_bootstrap, name)
    messages = [(None, b"m%d" % i) for i in range(50)]
    assert all(err is None for err, _, _ in produce(kafka_broker.kafka_bootstrap, name,
                                                     messages))
    member = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-long"))
    try:
        member.subscribe([name])
        assert _values(consume(member, 50, "the 249-character topic")) == messages
    finally:
        member.close()

    with pytest.raises(KafkaException) as refused:
        create_topic(kafka_broker.kafka_bootstrap, name + "y")
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_offsets_for_times(kafka_broker: BrokerProcess) -> None:
    """0052, 0054, 0059: ListOffsets v1 by timestamp answers, for every timestamp, the first offset
    whose timestamp is at or after it (each message found, as 0059's binary search walks
    them), and the end (-1) after the last; messages keep their CreateTime."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    topic = unique_topic("times")
    base = int(time.time() * 1000) - 600_000
    stamps = [base + 1000 * i for i in range(20)]
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"t%d" % i) for i in range(20)],
            partition=0, timestamps=stamps)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-times"))
    try:
        for i, stamp in enumerate(stamps):
            for asked in (stamp - 500, stamp):
                found = client.offsets_for_times([TopicPartition(topic, 0, asked)], timeout=30)
                assert (found[0].offset, found[0].error) == (i, None), (i, asked, found)
        beyond = client.offsets_for_times([TopicPartition(topic, 0, stamps[-1] + 1)],
                                          timeout=30)
        assert beyond[0].offset == OFFSET_END
        client.assign([TopicPartition(topic, 0, 7)])
        assert [m.timestamp() for m in consume(client, 3, "from offset 7")] == [
            (TIMESTAMP_CREATE_TIME, s) for s in stamps[7:10]]
    finally:
        client.close()

    other = KafkaConsumer(bootstrap_servers=kafka_broker.kafka_bootstrap)
    try:
        tp = KafkaTopicPartition(topic, 0)
        found = other.offsets_for_times({tp: stamps[12] - 1})[tp]
        assert (found.offset, found.timestamp) == (12, stamps[12])
        assert other.offsets_for_times({tp: stamps[-1] + 1})[tp] is None
    finally:
        other.close()


def test_commit_metadata_round_trip(kafka_broker: BrokerProcess) -> None:
    """0099, 0140: the metadata string committed with an offset comes back with it, to another
    consumer of the group and to kafka-python; metadata over offset_metadata_max_bytes (4096)
    is refused with OFFSET_METADATA_TOO_LARGE and the earlier commit stays."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    topic, group = unique_topic("meta"), unique_topic("g-meta")
    create_topic(kafka_broker.kafka_bootstrap, topic, 2)
    metadata = "processed by node-7; batch=\u00e9t\u00e9-42"
    first = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        first.commit(offsets=[TopicPartition(topic, 0, 11, metadata=metadata),
                              TopicPartition(topic, 1, 3, metadata="")], asynchronous=False)
        with pytest.raises(KafkaException) as refused:
            first.commit(offsets=[TopicPartition(topic, 0, 12, metadata="m" * 4097)],
                         asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
    finally:
        first.close()
    second = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        committed = second.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                     timeout=30)
        assert [(tp.offset, tp.metadata) for tp in committed] == [(11, metadata), (3, "")]
    finally:
        second.close()
    from kafka import OffsetAndMetadata

    other = KafkaConsumer(bootstrap_servers=kafka_broker.kafka_bootstrap, group_id=group,
                          enable_auto_commit=False)
    try:
        seen = other.committed(KafkaTopicPartition(topic, 0), metadata=True)
        # confluent-kafka sends the string's C terminator as its last byte (metadata_size is
        # strlen + 1) and strips it when reading; the broker keeps the bytes it was sent
        assert (seen.offset, seen.metadata) == (11, metadata + "\x00")
        other.commit({KafkaTopicPartition(topic, 1): OffsetAndMetadata(5, "kafka-python", -1)})
    finally:
        other.close()
    third = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        committed = third.committed([TopicPartition(topic, 1)], timeout=30)
        assert (committed[0].offset, committed[0].metadata) == (5, "kafka-python")
    finally:
        third.close()


def test_assign_at_offsets(kafka_broker: BrokerProcess) -> None:
    """0029, 0031: partitions assigned at OFFSET_BEGINNING, at an explicit offset and at
    OFFSET_END start exactly there; the one at the end gets only what is produced after; the
    watermarks are the log's start and end."""
    topic = unique_topic("assign")
    create_topic(kafka_broker.kafka_bootstrap, topic, 3)
    for partition in range(3):
        produce(kafka_broker.kafka_bootstrap, topic,
                [(None, b"p%d-%d" % (partition, i)) for i in range(10)], partition=partition)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-assign"),
                      settings={"enable.partition.eof": True})
    try:
        client.assign([TopicPartition(topic, 0, OFFSET_BEGINNING), TopicPartition(topic, 1, 4),
                       TopicPartition(topic, 2, OFFSET_END)])
        got: dict[int, list[int]] = {0: [], 1: [], 2: []}
        at_end: set[int] = set()

        def until_all_at_end() -> bool:
            message = client.poll(0.2)
            if message is None:
                return False
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition() or 0)
            else:
                got[message.partition() or 0].append(message.offset() or 0)
            return at_end == {0, 1, 2}

        wait_for(until_all_at_end, "every partition read to its end")
        assert got == {0: list(range(10)), 1: list(range(4, 10)), 2: []}
        assert client.get_watermark_offsets(TopicPartition(topic, 1), timeout=30) == (0, 10)
        produce(kafka_broker.kafka_bootstrap, topic, [(None, b"late")], partition=2)
        late = consume(client, 1, "the message produced after assigning at the end")
        assert (late[0].partition(), late[0].offset(), late[0].value()) == (2, 10, b"late")
    finally:
        client.close()


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_auto_offset_reset_out_of_range(kafka_broker: BrokerProcess, reset: str) -> None:
    """0034: a fetch past the log end is answered OFFSET_OUT_OF_RANGE and auto.offset.reset
    decides: earliest reads from 0, latest waits at the end for new messages, error reports
    _AUTO_OFFSET_RESET naming the broker's error."""
    topic = unique_topic(f"reset-{reset}")
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"old%d" % i) for i in range(5)],
            partition=0)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-reset"),
                      settings={"auto.offset.reset": reset, "enable.partition.eof": True})
    try:
        client.assign([TopicPartition(topic, 0, 1000)])
        first: list[Message] = []

        def first_event() -> bool:
            message = client.poll(0.2)
            if message is not None:
                first.append(message)
            return bool(first)

        wait_for(first_event, "the consumer's first message or error")
        error, message = first[0].error(), first[0]
        if reset == "earliest":
            assert error is None and (message.offset(), message.value()) == (0, b"old0")
        elif reset == "latest":
            assert error is not None and error.code() == KafkaError._PARTITION_EOF
            assert message.offset() == 5
            produce(kafka_broker.kafka_bootstrap, topic, [(None, b"new")], partition=0)
            assert _values(consume(client, 1, "after the reset to the end")) == [(None, b"new")]
        else:
            assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, error
            assert "Offset out of range" in error.str()
    finally:
        client.close()


def test_max_poll_interval_exceeded(kafka_broker: BrokerProcess) -> None:
    """0089: a member that stops calling poll for longer than max.poll.interval.ms leaves the
    group, the other member is given every partition, and the idle one's next poll reports
    _MAX_POLL_EXCEEDED."""
    topic, group = unique_topic("maxpoll"), unique_topic("g-maxpoll")
    create_topic(kafka_broker.kafka_bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    idle = consumer(kafka_broker.kafka_bootstrap, group, settings={"max.poll.interval.ms": 6000})
    busy = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        idle.subscribe([topic])
        busy.subscribe([topic])
        wait_for(lambda: (assigned(idle) | assigned(busy)) == everything
                 and idle.assignment() and busy.assignment(),
                 "the two members sharing the four partitions")
        wait_for(lambda: assigned(busy) == everything,
                 "the busy member given every partition after the idle one left")
        reported = wait_for(lambda: idle.poll(0.2), "the idle member's next poll")
        error = reported.error()
        assert error is not None and error.code() == KafkaError._MAX_POLL_EXCEEDED, error
    finally:
        idle.close()
        busy.close()


def test_stopped_member_session_expires(kafka_broker: BrokerProcess) -> None:
    """0106: a member that stops heartbeating (its process SIGSTOPped) is removed when its
    session (6 s) expires and the other is given its partitions; once continued, it is told
    its membership is gone, rejoins, and the partitions are shared again."""
    topic, group = unique_topic("session"), unique_topic("g-session")
    create_topic(kafka_broker.kafka_bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    member = subprocess.Popen(
        [sys.executable, "-m", "tests.kafka_clients.members", "confluent-kafka",
         kafka_broker.kafka_bootstrap, group, topic],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    local = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        local.subscribe([topic])
        wait_for(lambda: set() < assigned(local) < everything, "the two members sharing")
        os.kill(member.pid, signal.SIGSTOP)
        wait_for(lambda: assigned(local) == everything,
                 "the stopped member's partitions given to the other")
        os.kill(member.pid, signal.SIGCONT)
        wait_for(lambda: set() < assigned(local) < everything,
                 "the continued member back in the group")
    finally:
        local.close()
        if member.poll() is None:
            os.kill(member.pid, signal.SIGCONT)
            member.terminate()
            try:
                member.wait(timeout=20)
            except subprocess.TimeoutExpired:
                member.kill()
                member.wait(timeout=10)


def test_added_partitions_are_picked_up(kafka_broker: BrokerProcess) -> None:
    """0044, 0045, 0069: partitions added to a subscribed topic (odradek's CreatePartitions, not in
    0.10.2's table) are seen in the next metadata refresh: the group rebalances onto them and
    a producer writes to them."""
    topic = unique_topic("grow")
    create_topic(kafka_broker.kafka_bootstrap, topic, 1)
    member = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-grow"),
                      settings={"topic.metadata.refresh.interval.ms": 500})
    try:
        member.subscribe([topic])
        wait_for(lambda: assigned(member) == {(topic, 0)}, "partition 0 assigned")
        with Admin(kafka_broker.bootstrap) as admin:
            admin.create_partitions(topic, 3)
        wait_for(lambda: assigned(member) == {(topic, p) for p in range(3)},
                 "the added partitions assigned")
        reports = produce(kafka_broker.kafka_bootstrap, topic, [(None, b"to-2")], partition=2)
        assert reports == [(None, 2, 0)]
        got = consume(member, 1, "the message in an added partition")
        assert (got[0].partition(), got[0].value()) == (2, b"to-2")
    finally:
        member.close()


def test_regex_subscription_new_topic(kafka_broker: BrokerProcess) -> None:
    """0033: a ``^``-pattern subscription takes in a matching topic created after it, and
    leaves out one that does not match."""
    prefix = unique_topic("rx")
    first, later, unrelated = f"{prefix}-a", f"{prefix}-b", f"other-{prefix}"
    create_topic(kafka_broker.kafka_bootstrap, first)
    member = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-rx"),
                      settings={"topic.metadata.refresh.interval.ms": 500})
    try:
        member.subscribe([f"^{prefix}-.*"])
        wait_for(lambda: assigned(member) == {(first, 0)}, "the matching topic assigned")
        create_topic(kafka_broker.kafka_bootstrap, later)
        create_topic(kafka_broker.kafka_bootstrap, unrelated)
        wait_for(lambda: assigned(member) == {(first, 0), (later, 0)},
                 "the topic created later assigned")
        for topic in (unrelated, first, later):
            produce(kafka_broker.kafka_bootstrap, topic, [(None, topic.encode())])
        got = consume(member, 2, "one message of each matching topic")
        assert sorted(m.value() or b"" for m in got) == [first.encode(), later.encode()]
        assert {m.topic() for m in got} == {first, later}
    finally:
        member.close()


def test_pause_and_resume(kafka_broker: BrokerProcess) -> None:
    """0026: a paused partition delivers nothing while the others go on, and everything it
    holds once resumed."""
    topic = unique_topic("pause")
    create_topic(kafka_broker.kafka_bootstrap, topic, 2)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-pause"))
    try:
        client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        client.pause([TopicPartition(topic, 0)])
        # the paused partition's messages are written first, so they were there to fetch
        produce(kafka_broker.kafka_bootstrap, topic, [(None, b"paused%d" % i) for i in range(5)],
                partition=0)
        produce(kafka_broker.kafka_bootstrap, topic, [(None, b"live%d" % i) for i in range(5)],
                partition=1)
        running = consume(client, 5, "the partition not paused")
        assert [(m.partition(), m.offset()) for m in running] == [(1, i) for i in range(5)]
        client.resume([TopicPartition(topic, 0)])
        resumed = consume(client, 5, "the resumed partition")
        assert [(m.partition(), m.value()) for m in resumed] == [
            (0, b"paused%d" % i) for i in range(5)]
    finally:
        client.close()


def test_close_commits_stored_offsets(kafka_broker: BrokerProcess) -> None:
    """0116, 0130: with auto commit on and offsets stored by hand, close() commits the stored
    offset (and nothing past it); storing an offset of a partition not assigned is refused."""
    topic, group = unique_topic("store"), unique_topic("g-store")
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"s%d" % i) for i in range(10)],
            partition=0)
    member = consumer(kafka_broker.kafka_bootstrap, group, settings={
        "enable.auto.commit": True, "enable.auto.offset.store": False,
        "auto.commit.interval.ms": 600_000})
    try:
        member.subscribe([topic])
        got = consume(member, 10, "the ten messages")
        member.store_offsets(message=got[5])
        with pytest.raises(KafkaException) as refused:
            member.store_offsets(offsets=[TopicPartition(topic, 7, 1)])
        assert refused.value.args[0].code() == KafkaError._STATE
    finally:
        member.close()
    reader = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        committed = reader.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed[0].offset == 6
    finally:
        reader.close()


def test_message_larger_than_fetch_max_bytes(kafka_broker: BrokerProcess) -> None:
    """0041, 0082: messages larger than fetch.max.bytes and max.partition.fetch.bytes are still
    consumed, one whole message per fetch (Fetch v3, KIP-74), none cut."""
    topic = unique_topic("large")
    sent = [(None, bytes([65 + i]) * 300_000) for i in range(3)]
    assert [err for err, _, _ in produce(kafka_broker.kafka_bootstrap, topic, sent,
                                         partition=0)] == [None] * 3
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-large"), settings={
        "fetch.max.bytes": 100_000, "max.partition.fetch.bytes": 50_000,
        "message.max.bytes": 1000})
    try:
        client.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert _values(consume(client, 3, "three 300 kB messages")) == sent
    finally:
        client.close()


def test_message_over_max_message_bytes(kafka_broker: BrokerProcess) -> None:
    """0003: a message over its topic's max.message.bytes is refused with
    MSG_SIZE_TOO_LARGE (10) and not written; one under it is."""
    topic = unique_topic("maxbytes")
    create_topic(kafka_broker.kafka_bootstrap, topic, config={"max.message.bytes": "200000"})
    too_large = produce(kafka_broker.kafka_bootstrap, topic, [(None, b"x" * 250_000)],
                        partition=0)
    assert too_large[0][0] is not None
    assert too_large[0][0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    fits = produce(kafka_broker.kafka_bootstrap, topic, [(None, b"y" * 150_000)], partition=0)
    assert fits == [(None, 0, 0)]


def test_batch_of_messages_under_max_message_bytes(kafka_broker: BrokerProcess) -> None:
    """0003, 0110: several messages, each under the topic's max.message.bytes but together
    over it, produced in one request (librdkafka fills a request up to its own
    message.max.bytes). To a 0.11 broker librdkafka writes them as one record batch, and the
    batch is what max.message.bytes bounds, as in Kafka since 0.11: it is refused whole with
    MSG_SIZE_TOO_LARGE. (A v1 message set is held per message, as Kafka holds it:
    tests/log.)"""
    topic = unique_topic("maxbytes-batch")
    create_topic(kafka_broker.kafka_bootstrap, topic, config={"max.message.bytes": "200000"})
    sent = [(None, bytes([65 + i]) * 150_000) for i in range(3)]
    as_batch = produce(kafka_broker.kafka_bootstrap, topic, sent, partition=0,
                       settings={"linger.ms": 1000})
    assert [error and error.code() for error, _, _ in as_batch] == [
        KafkaError.MSG_SIZE_TOO_LARGE] * 3
    fits = produce(kafka_broker.kafka_bootstrap, topic, sent[:1], partition=0)
    assert fits == [(None, 0, 0)]  # nothing of the refused batch was written


def test_invalid_topic_and_unknown_partition(kafka_broker: BrokerProcess) -> None:
    """0002, 0057: a message for a topic whose name Kafka does not allow fails with the broker's
    TOPIC_EXCEPTION (17) at once, not by timing out, and a message for a partition the topic
    does not have with _UNKNOWN_PARTITION; the good messages beside them are delivered."""
    good = unique_topic("good")
    create_topic(kafka_broker.kafka_bootstrap, good, 1)
    bad = produce(kafka_broker.kafka_bootstrap, unique_topic("invalid$#!"), [(None, b"bad")],
                  settings={"message.timeout.ms": 300_000})
    assert bad[0][0] is not None and bad[0][0].code() == KafkaError.TOPIC_EXCEPTION, bad
    beside = produce(kafka_broker.kafka_bootstrap, good, [(None, b"good")], partition=0)
    assert beside == [(None, 0, 0)]
    unknown = produce(kafka_broker.kafka_bootstrap, good, [(None, b"p5")], partition=5,
                      settings={"message.timeout.ms": 300_000})
    assert unknown[0][0] is not None
    assert unknown[0][0].code() == KafkaError._UNKNOWN_PARTITION, unknown


def test_assign_partition_created_later(kafka_broker: BrokerProcess) -> None:
    """0112: a consumer assigned a partition the topic does not have yet reads the partition
    it has, and the other once it is created and written to."""
    topic = unique_topic("unknown-part")
    create_topic(kafka_broker.kafka_bootstrap, topic, 1)
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"in-0")], partition=0)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-unknown-part"),
                      settings={"topic.metadata.refresh.interval.ms": 500})
    try:
        client.assign([TopicPartition(topic, 0, OFFSET_BEGINNING),
                       TopicPartition(topic, 1, OFFSET_BEGINNING)])
        assert _values(consume(client, 1, "the existing partition")) == [(None, b"in-0")]
        with Admin(kafka_broker.bootstrap) as admin:
            admin.create_partitions(topic, 2)
        producer_reports = produce(kafka_broker.kafka_bootstrap, topic, [(None, b"in-1")],
                                   partition=1)
        assert producer_reports == [(None, 1, 0)]
        got = consume(client, 1, "the partition created after the assignment")
        assert (got[0].partition(), got[0].value()) == (1, b"in-1")
    finally:
        client.close()


def test_list_and_describe_groups(kafka_broker: BrokerProcess) -> None:
    """0019: AdminClient's list_consumer_groups and describe_consumer_groups fall back to
    ListGroups and DescribeGroups v0: the group is listed as a consumer group and described
    Stable, with the range assignor, the member's own id and its assignment."""
    topic, group = unique_topic("listed"), unique_topic("g-listed")
    create_topic(kafka_broker.kafka_bootstrap, topic, 2)
    member = consumer(kafka_broker.kafka_bootstrap, group, settings={"client.id": "scenario-0019"})
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    try:
        member.subscribe([topic])
        wait_for(lambda: assigned(member) == {(topic, 0), (topic, 1)}, "both partitions")
        listed = admin.list_consumer_groups(request_timeout=30).result(timeout=40)
        assert not listed.errors
        ours = [g for g in listed.valid if g.group_id == group]
        assert len(ours) == 1 and not ours[0].is_simple_consumer_group
        described = admin.describe_consumer_groups([group], request_timeout=30)[group].result(
            timeout=40)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert described.coordinator.id == kafka_broker.node_id
        [seen] = described.members
        assert seen.member_id == member.memberid()
        assert seen.client_id == "scenario-0019"
        assert sorted((tp.topic, tp.partition) for tp in seen.assignment.topic_partitions) == [
            (topic, 0), (topic, 1)]
    finally:
        member.close()
    described = admin.describe_consumer_groups([group], request_timeout=30)[group].result(
        timeout=40)
    assert described.state == ConsumerGroupState.EMPTY and not described.members


def test_cluster_and_controller_ids(kafka_broker: BrokerProcess) -> None:
    """0063, 0121: Metadata v2 names the cluster and its controller; librdkafka and kafka-python
    read the same cluster id, the controller is the one broker, named at its Kafka address."""
    from kafka import KafkaAdminClient

    metadata = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap}).list_topics(
        timeout=30)
    cluster_id: object = metadata.cluster_id  # the stubs declare it None
    assert isinstance(cluster_id, str) and cluster_id
    assert metadata.controller_id == kafka_broker.node_id
    assert {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
        kafka_broker.node_id: kafka_broker.kafka_bootstrap}
    other = KafkaAdminClient(bootstrap_servers=kafka_broker.kafka_bootstrap)
    try:
        cluster = other.describe_cluster()
        assert (cluster["cluster_id"], cluster["controller_id"]) == (
            cluster_id, kafka_broker.node_id)
    finally:
        other.close()


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_flush_and_delivery_reports(kafka_broker: BrokerProcess, acks: str) -> None:
    """0008, 0055, 0125: flush() sends at once whatever linger.ms says and returns with every
    delivery report in; acks 1 and all report each message's offset, acks 0 none (nothing is
    answered); every message is written either way."""
    topic = unique_topic(f"acks-{acks}")
    sent = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
    reports = produce(kafka_broker.kafka_bootstrap, topic, sent, partition=0,
                      settings={"acks": acks, "linger.ms": 120_000})
    assert [err for err, _, _ in reports] == [None] * 20
    if acks == "0":
        assert {offset for _, _, offset in reports} == {None}  # OFFSET_INVALID
    else:
        assert [offset for _, _, offset in reports] == list(range(20))
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-acks"))
    try:
        client.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert _values(consume(client, 20, "the flushed messages")) == sent
    finally:
        client.close()
