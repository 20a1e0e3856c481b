"""A broker with a Kafka-protocol listener beside its own, shared by a module's tests, and the
native client's side of each exchange."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from client import Consumer, Producer, TopicPartition
from tests.broker_process import BrokerProcess
from tests.kafka_clients.clients import CLIENTS, Message, available

KAFKA_SETTINGS = {
    "kafka_listeners": "PLAINTEXT://127.0.0.1:0",
    "group_initial_rebalance_delay_ms": 0,
}


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("kafka-broker") / "data"
    with BrokerProcess(data, settings=KAFKA_SETTINGS) as broker:
        yield broker


@pytest.fixture(params=CLIENTS)
def kafka_client(request: pytest.FixtureRequest) -> str:
    """Each of Kafka's clients in turn; a missing one fails the test, naming how to install it
    (scripts/check installs them all)."""
    client: str = request.param
    missing = available(client)
    if missing:
        pytest.fail(missing)
    return client


def native_read(bootstrap: str, topic: str, count: int, *, partition: int = 0,
                timeout_s: float = 30.0) -> list[Message]:
    """The partition's first ``count`` messages through odradek's own Consumer."""
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            out += [(r.key, r.value) for r in consumer.poll(timeout_ms=500)]
        return out


def native_produce(bootstrap: str, topic: str, messages: list[Message], *,
                   partition: int = 0) -> None:
    with Producer(bootstrap, acks="all") as producer:
        futures = [producer.send(topic, v, key=k, partition=partition) for k, v in messages]
        for future in futures:
            future.result(timeout=30)


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"

