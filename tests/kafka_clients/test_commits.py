"""Offsets are one namespace: what one client's group member commits, a member of another
client (and odradek's own Consumer) in the same group resumes from, exactly."""

from __future__ import annotations

import pytest

from client import Consumer
from protocol.errors import InconsistentGroupProtocolError
from tests.broker_process import BrokerProcess
from tests.kafka_clients.clients import CLIENTS, group_read
from tests.kafka_clients.conftest import native_produce, unique_topic


def test_commit_with_one_client_resume_with_the_next_and_native(
        kafka_broker: BrokerProcess, kafka_client: str) -> None:
    following = CLIENTS[(CLIENTS.index(kafka_client) + 1) % len(CLIENTS)]
    topic, group = unique_topic(f"resume-{kafka_client}"), unique_topic(f"g-{kafka_client}")
    native_produce(kafka_broker.bootstrap, topic, [(None, b"m%d" % i) for i in range(100)])
    kafka = kafka_broker.kafka_bootstrap
    assert group_read(kafka_client, kafka, group, topic, 40, commit=True) == list(range(40))
    assert group_read(following, kafka, group, topic, 30, commit=True) == list(range(40, 70))
    with Consumer(kafka_broker.bootstrap, group_id=group) as consumer:
        consumer.subscribe([topic])
        first = []
        for _ in range(200):
            first += consumer.poll(timeout_ms=200, max_records=5)
            if first:
                break
        assert first and first[0].offset == 70, first[:1]
        consumer.commit()
    assert group_read(kafka_client, kafka, group, topic, 1, commit=False) == [
        first[-1].offset + 1]


def test_a_native_member_cannot_join_a_group_of_kafka_members(
        kafka_broker: BrokerProcess) -> None:
    """Mixed membership is refused while the group has members (docs/kafka-compatibility.md):
    the native consumer is told INCONSISTENT_GROUP_PROTOCOL naming the group and both kinds."""
    from kafka import KafkaConsumer

    topic, group = unique_topic("mixed"), unique_topic("g-mixed")
    native_produce(kafka_broker.bootstrap, topic, [(None, b"m")])
    kafka_member = KafkaConsumer(topic, bootstrap_servers=kafka_broker.kafka_bootstrap,
                                 group_id=group, auto_offset_reset="earliest")
    try:
        got = []
        for _ in range(100):  # joined once it has the message
            got += kafka_member.poll(timeout_ms=200).values()
            if got:
                break
        assert got
        with Consumer(kafka_broker.bootstrap, group_id=group) as consumer:
            consumer.subscribe([topic])
            with pytest.raises(InconsistentGroupProtocolError, match=group) as refused:
                for _ in range(100):
                    consumer.poll(timeout_ms=200)
            assert "consumer" in str(refused.value)
    finally:
        kafka_member.close()
