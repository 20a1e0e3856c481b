"""Client quotas reach Kafka's clients as Kafka's do: a producer over its produce quota is told
``throttle_time_ms`` in Produce v1+ answers (librdkafka reports it through ``throttle_cb``), and
a consumer over its fetch quota likewise in Fetch v1+ answers."""

from __future__ import annotations

import time
from typing import Any

from client import Admin
from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import native_produce, unique_topic

RATE = 20_000  # bytes/s


def _throttles(config: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    seen: list[Any] = []
    return {**config, "throttle_cb": seen.append, "statistics.interval.ms": 0}, seen


def test_a_producer_over_its_quota_is_told_to_back_off(kafka_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = unique_topic("quota-produce")
    with Admin(kafka_broker.bootstrap) as admin:
        admin.alter_client_quotas({"client-id": "greedy-producer"}, {"producer_byte_rate": RATE})
    config, throttles = _throttles({"bootstrap.servers": kafka_broker.kafka_bootstrap,
                                    "client.id": "greedy-producer", "linger.ms": 50})
    producer = Producer(config)
    deadline = time.monotonic() + 30
    while not throttles and time.monotonic() < deadline:
        for _ in range(20):
            producer.produce(topic, b"x" * 5_000)
        producer.flush(10)
        producer.poll(0.1)  # throttle events are served by poll
    assert throttles, "no throttle_time_ms reported for a producer over its quota"
    assert throttles[0].throttle_time > 0


def test_a_consumer_over_its_quota_is_told_to_back_off(kafka_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = unique_topic("quota-fetch")
    native_produce(kafka_broker.bootstrap, topic, [(None, b"y" * 10_000)] * 30)
    with Admin(kafka_broker.bootstrap) as admin:
        admin.alter_client_quotas({"client-id": "greedy-consumer"}, {"consumer_byte_rate": RATE})
    config, throttles = _throttles({"bootstrap.servers": kafka_broker.kafka_bootstrap,
                                    "client.id": "greedy-consumer", "group.id": "quota-readers",
                                    "enable.auto.commit": False})
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while not throttles and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert throttles, "no throttle_time_ms reported for a consumer over its quota"
        assert throttles[0].throttle_time > 0
    finally:
        consumer.close()
