"""What the client-suite scenarios (test_librdkafka_scenarios.py, test_confluent_scenarios.py)
share: waiting for a condition with a deadline, creating topics and producing through
confluent-kafka, and reading a consumer's messages and assignment.

Every wait polls the clients it waits on (librdkafka serves rebalances and errors in poll), so
a wait is the clients' own progress, never a sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

DEADLINE_S = 45.0
T = TypeVar("T")
#: one delivery report: its error (None when acknowledged), partition and offset
Delivery = tuple[KafkaError | None, int | None, int | None]


def wait_for(condition: Callable[[], T | None], what: str, *,
             timeout_s: float = DEADLINE_S) -> T:
    """The first truthy answer of ``condition``, asked until the deadline; fails naming
    ``what``. ``condition`` polls whatever it waits on, which paces the loop."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = condition()
        if answer:
            return answer
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s:.0f} s: {what}")


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                      operation_timeout=30).values():
        future.result(timeout=DEADLINE_S)


def produce(bootstrap: str, topic: str, messages: Iterable[tuple[bytes | None, bytes | None]],
            *, partition: int = -1, timestamps: Iterable[int] | None = None,
            settings: dict[str, Any] | None = None) -> list[Delivery]:
    """Produce and flush; the delivery report of each message, in the order produced.
    ``settings`` are the producer's, over a linger.ms of 5."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": False, **(settings or {})})
    reports: dict[int, Delivery] = {}
    stamps = list(timestamps) if timestamps is not None else None
    for i, (key, value) in enumerate(messages):
        def report(err: KafkaError | None, msg: Message, i: int = i) -> None:
            reports[i] = (err, msg.partition(), msg.offset())
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=report,
                         timestamp=stamps[i] if stamps else 0)
    left = producer.flush(DEADLINE_S)
    assert left == 0, f"{left} messages neither delivered nor failed"
    return [reports[i] for i in sorted(reports)]


def consumer(bootstrap: str, group: str, settings: dict[str, Any] | None = None) -> Consumer:
    """A consumer of ``group`` reading from the earliest offset, committing only when told,
    with the broker's shortest session (group_min_session_timeout_ms, 6 s); ``settings`` go
    over these."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     **(settings or {})})


def consume(client: Consumer, count: int, what: str) -> list[Message]:
    """The next ``count`` messages; an error the consumer reports fails the test."""
    out: list[Message] = []

    def more() -> bool:
        message = client.poll(0.2)
        if message is not None:
            assert message.error() is None, f"{what}: {message.error()}"
            out.append(message)
        return len(out) >= count

    wait_for(more, f"{what}: {count} messages (had {len(out)})")
    return out


def assigned(client: Consumer, timeout_s: float = 0.2) -> set[tuple[str, int]]:
    """The consumer's assignment after one poll (which serves a pending rebalance); a message
    the poll returns is dropped, so use it where only the assignment counts."""
    message = client.poll(timeout_s)
    error = message.error() if message is not None else None
    assert error is None or error.code() == KafkaError._PARTITION_EOF, error
    return {(tp.topic, tp.partition) for tp in client.assignment()}
