"""confluent-kafka-python's integration scenarios (its ``tests/integration/``), carried over as
odradek's tests against its Kafka listener.

Each row: the original (under tests/integration/), what it checks, and the test here.

| original | scenario | here |
|---|---|---|
| consumer/test_consumer_error.py | EOF as ConsumeError | test_partition_eof_is_a_consume_error |
| consumer/test_consumer_error.py | session under the minimum | test_session_timeout_below_minimum |
| consumer/test_consumer_memberid.py | member id before, after, closed | test_member_id |
| consumer/test_incremental_assign.py | incremental (un)assign | test_incremental_assign |
| consumer/test_cooperative_rebalance_1.py, _2 | cooperative | test_cooperative_sticky_rebalance |
| consumer/test_consumer_topicpartition_metadata.py | commit metadata | (1) |
| admin/test_list_offsets.py | earliest, latest, by time | test_admin_list_offsets |
| admin/test_basic_operations.py | topics, group offsets | test_admin_topics_and_group_offsets |
| admin/test_describe_operations.py | cluster and topics | test_admin_describe_cluster_and_topics |

(1) test_librdkafka_scenarios.py's test_commit_metadata_round_trip.

Not carried, needing what 0.10.2 does not have: ListOffsets' max_timestamp (v7, KIP-734),
ACLs, DescribeConfigs/AlterConfigs and IncrementalAlterConfigs, CreatePartitions and
DeleteGroups through the client, DeleteRecords, SCRAM credentials (KIP-554), authorized
operations (Metadata v8+), transactions (producer/test_transactions.py), KIP-848's consumer
protocol (consumer/test_consumer_upgrade_downgrade.py); and Schema Registry, which is no part of
a broker. The wakeable poll and flush tests are the client's own signal handling, with nothing
asked of the broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    ConsumerGroupTopicPartitions,
    DeserializingConsumer,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from confluent_kafka.error import ConsumeError
from confluent_kafka.serialization import StringDeserializer

from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import KAFKA_SETTINGS, unique_topic
from tests.kafka_clients.scenario_support import (
    DEADLINE_S,
    assigned,
    consume,
    consumer,
    create_topic,
    produce,
    wait_for,
)


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """conftest's broker without auto-creation, so a deleted topic stays deleted: a consumer
    closed just before may have left a Metadata request naming the topic queued behind its
    Fetch, still waiting in the broker; served after DeleteTopics, it would create the topic
    again (Metadata has no allow_auto_topic_creation before v4). Every topic here is created
    explicitly, as the original suite creates its own."""
    data = tmp_path_factory.mktemp("confluent-scenarios") / "data"
    with BrokerProcess(data, settings={**KAFKA_SETTINGS,
                                       "auto_create_topics_enable": False}) as broker:
        yield broker


def test_partition_eof_is_a_consume_error(kafka_broker: BrokerProcess) -> None:
    """A consumer assigned at OFFSET_END with enable.partition.eof gets _PARTITION_EOF, which
    the DeserializingConsumer raises as ConsumeError."""
    topic = unique_topic("eof")
    create_topic(kafka_broker.kafka_bootstrap, topic)
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"a")], partition=0)
    client = DeserializingConsumer({
        "bootstrap.servers": kafka_broker.kafka_bootstrap, "group.id": unique_topic("g-eof"),
        "enable.partition.eof": True, "value.deserializer": StringDeserializer()})
    try:
        client.assign([TopicPartition(topic, 0, OFFSET_END)])
        raised: list[ConsumeError] = []

        def eof() -> bool:
            try:
                client.poll(0.2)
            except ConsumeError as error:
                raised.append(error)
            return bool(raised)

        wait_for(eof, "the end of the partition reported")
        assert raised[0].args[0].code() == KafkaError._PARTITION_EOF
    finally:
        client.close()


def test_session_timeout_below_minimum(kafka_broker: BrokerProcess) -> None:
    """A session.timeout.ms under group_min_session_timeout_ms (6000) is refused at JoinGroup
    with INVALID_SESSION_TIMEOUT (26), which poll reports; committing that error message is
    refused by the client."""
    topic = unique_topic("short-session")
    create_topic(kafka_broker.kafka_bootstrap, topic)
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"a")])
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-short"),
                      settings={"session.timeout.ms": 1000, "heartbeat.interval.ms": 100})
    try:
        client.subscribe([topic])
        message = wait_for(lambda: client.poll(0.2), "the consumer's first event")
        error = message.error()
        assert error is not None and error.code() == KafkaError.INVALID_SESSION_TIMEOUT, error
        with pytest.raises(KafkaException) as refused:
            client.commit(message=message, asynchronous=False)
        assert refused.value.args[0].code() == KafkaError._INVALID_ARG
    finally:
        client.close()


def test_member_id(kafka_broker: BrokerProcess) -> None:
    """memberid() is None before the consumer joins, the coordinator's id once it has, and
    asking a closed consumer raises."""
    topic = unique_topic("memberid")
    create_topic(kafka_broker.kafka_bootstrap, topic)
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"memberid")])
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-memberid"))
    assert client.memberid() is None
    client.subscribe([topic])
    assert [m.value() for m in consume(client, 1, "the seeded message")] == [b"memberid"]
    member_id = client.memberid()
    assert isinstance(member_id, str) and member_id
    client.close()
    with pytest.raises(RuntimeError, match="Consumer closed"):
        client.memberid()


def test_incremental_assign(kafka_broker: BrokerProcess) -> None:
    """incremental_assign adds partitions and incremental_unassign takes them away, each
    refusing what is already (or not) assigned; a partition assigned again without an offset
    resumes from the group's commit."""
    first, second = unique_topic("incr-a"), unique_topic("incr-b")
    create_topic(kafka_broker.kafka_bootstrap, first)
    create_topic(kafka_broker.kafka_bootstrap, second)
    produce(kafka_broker.kafka_bootstrap, first, [(None, b"a")], partition=0)
    produce(kafka_broker.kafka_bootstrap, second, [(None, b"b")], partition=0)
    client = consumer(kafka_broker.kafka_bootstrap, unique_topic("g-incr"),
                      settings={"auto.offset.reset": "error"})
    try:
        client.incremental_assign([TopicPartition(first, 0, OFFSET_BEGINNING)])
        [one] = consume(client, 1, "the first topic")
        assert (one.topic(), one.offset(), one.value()) == (first, 0, b"a")
        client.commit(message=one, asynchronous=False)
        with pytest.raises(KafkaException) as twice:
            client.incremental_assign([TopicPartition(first, 0, OFFSET_BEGINNING)])
        assert twice.value.args[0].code() == KafkaError._CONFLICT

        client.incremental_assign([TopicPartition(second, 0, OFFSET_BEGINNING)])
        [two] = consume(client, 1, "the second topic")
        assert (two.topic(), two.offset(), two.value()) == (second, 0, b"b")

        client.incremental_unassign([TopicPartition(first, 0)])
        # written first, so it would be fetched before the second topic's were it assigned
        produce(kafka_broker.kafka_bootstrap, first, [(None, b"aa")], partition=0)
        produce(kafka_broker.kafka_bootstrap, second, [(None, b"aaa")], partition=0)
        [three] = consume(client, 1, "only the topic still assigned")
        assert (three.topic(), three.offset(), three.value()) == (second, 1, b"aaa")

        client.incremental_assign([TopicPartition(first, 0)])
        [four] = consume(client, 1, "the first topic from its committed offset")
        assert (four.topic(), four.offset(), four.value()) == (first, 1, b"aa")
        client.incremental_unassign([TopicPartition(first, 0)])
        with pytest.raises(KafkaException) as not_assigned:
            client.incremental_unassign([TopicPartition(first, 0)])
        assert not_assigned.value.args[0].code() == KafkaError._INVALID_ARG
        client.unassign()
    finally:
        client.close()


def test_cooperative_sticky_rebalance(kafka_broker: BrokerProcess) -> None:
    """cooperative-sticky (KIP-429, all on the client: ConsumerProtocol v1's owned partitions
    over the classic JoinGroup and SyncGroup) moves only what must move: a second member makes
    the first give up half its partitions and keep the rest, nothing is lost, and the two end
    with disjoint halves."""
    topic, group = unique_topic("coop"), unique_topic("g-coop")
    create_topic(kafka_broker.kafka_bootstrap, topic, 4)
    everything = {(topic, p) for p in range(4)}
    events: dict[str, list[tuple[str, set[tuple[str, int]]]]] = {"first": [], "second": []}

    def member(name: str) -> Consumer:
        client = consumer(kafka_broker.kafka_bootstrap, group,
                          settings={"partition.assignment.strategy": "cooperative-sticky"})

        def record(kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
            return lambda _c, parts: events[name].append(
                (kind, {(tp.topic, tp.partition) for tp in parts}))

        client.subscribe([topic], on_assign=record("assign"), on_revoke=record("revoke"),
                         on_lost=record("lost"))
        return client

    first = member("first")
    second: Consumer | None = None
    try:
        wait_for(lambda: assigned(first) == everything, "the first member owning all four")
        second = member("second")
        joined = second

        def shared() -> bool:
            mine, theirs = assigned(first), assigned(joined)
            return mine | theirs == everything and len(mine) == len(theirs) == 2

        wait_for(shared, "the two members owning two partitions each")
        kept = assigned(first)
        assert events["first"][0] == ("assign", everything)
        # a rebalance that moves nothing of a member's still calls its handlers, with no
        # partitions: only the calls that move partitions are compared
        revoked = [parts for kind, parts in events["first"] if kind == "revoke" and parts]
        assert revoked == [everything - kept], events["first"]
        assert [kind for kind, _ in events["first"]].count("lost") == 0
        assert [parts for kind, parts in events["second"] if kind == "assign" and parts] == [
            everything - kept], events["second"]
    finally:
        first.close()
        if second is not None:
            second.close()


def test_admin_list_offsets(kafka_broker: BrokerProcess) -> None:
    """AdminClient.list_offsets over ListOffsets v1: the earliest offset, the latest, and the
    first at or after a timestamp (timestamps out of order in the log, as the original
    writes them)."""
    topic = unique_topic("list-offsets")
    create_topic(kafka_broker.kafka_bootstrap, topic, 1)
    base = int(time.time() * 1000) - 600_000
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"1"), (None, b"2"), (None, b"3")],
            partition=0, timestamps=[base + 100, base + 400, base + 200])
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    tp = TopicPartition(topic, 0)
    earliest, latest = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
    for spec, expected in ((earliest, 0), (latest, 3),
                           (OffsetSpec.for_timestamp(base + 150), 1),
                           (OffsetSpec.for_timestamp(base + 300), 1)):
        result = admin.list_offsets({tp: spec}, request_timeout=30)[tp].result(
            timeout=DEADLINE_S)
        assert result.offset == expected, (spec, result.offset)


def test_admin_topics_and_group_offsets(kafka_broker: BrokerProcess) -> None:
    """A topic created through AdminClient is in the metadata with its partitions; a group's
    commits are listed by list_consumer_group_offsets (OffsetFetch) and, the group empty,
    changed by alter_consumer_group_offsets (OffsetCommit), which a new member resumes from;
    the deleted topic is gone from the metadata."""
    topic, group = unique_topic("admin-ops"), unique_topic("g-admin-ops")
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    create_topic(kafka_broker.kafka_bootstrap, topic, 2)
    listed = admin.list_topics(topic=topic, timeout=30).topics[topic]
    assert listed.error is None and sorted(listed.partitions) == [0, 1]
    produce(kafka_broker.kafka_bootstrap, topic, [(None, b"m%d" % i) for i in range(6)],
            partition=0)

    member = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        member.subscribe([topic])
        got = consume(member, 4, "four messages")
        member.commit(message=got[-1], asynchronous=False)
    finally:
        member.close()

    def group_offsets() -> list[tuple[int, int]]:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
        answer = admin.list_consumer_group_offsets(request)[group].result(timeout=DEADLINE_S)
        return [(tp.partition, tp.offset) for tp in answer.topic_partitions]

    assert group_offsets() == [(0, 4)]
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])])[group].result(
        timeout=DEADLINE_S)
    assert [(tp.offset, tp.error) for tp in altered.topic_partitions] == [(1, None)]
    assert group_offsets() == [(0, 1)]
    resumed = consumer(kafka_broker.kafka_bootstrap, group)
    try:
        resumed.subscribe([topic])
        assert [m.offset() for m in consume(resumed, 1, "from the altered offset")] == [1]
    finally:
        resumed.close()

    for future in admin.delete_topics([topic], operation_timeout=30).values():
        assert future.result(timeout=DEADLINE_S) is None
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics,
             "the deleted topic gone from the metadata")


def test_admin_describe_cluster_and_topics(kafka_broker: BrokerProcess) -> None:
    """describe_cluster and describe_topics, both answered from Metadata: the cluster id, the
    controller and the one node at its Kafka address; each partition's leader and replicas."""
    topic = unique_topic("described")
    create_topic(kafka_broker.kafka_bootstrap, topic, 3)
    admin = AdminClient({"bootstrap.servers": kafka_broker.kafka_bootstrap})
    cluster = admin.describe_cluster(request_timeout=30).result(timeout=DEADLINE_S)
    assert cluster.cluster_id == admin.list_topics(timeout=30).cluster_id
    assert cluster.controller.id == kafka_broker.node_id
    assert [(n.id, f"{n.host}:{n.port}") for n in cluster.nodes] == [
        (kafka_broker.node_id, kafka_broker.kafka_bootstrap)]
    described = admin.describe_topics(TopicCollection([topic]), request_timeout=30)[
        topic].result(timeout=DEADLINE_S)
    assert described.name == topic
    assert [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in described.partitions] == [
        (p, kafka_broker.node_id, [kafka_broker.node_id], [kafka_broker.node_id])
        for p in range(3)]
