"""odradek itself, driven the same way as the peers for the fixed-rate latency runs.

The sender is a ``Producer`` with ``acks=1`` and ``linger_ms=0`` (each due message goes at
once); the receiver a ``Consumer`` assigned the topic's one partition from its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks.pacing import PacedSchedule, intended_of, stamped_value
from benchmarks.servers import start_odradek
from client import Admin, Consumer, Producer, TopicPartition

LABEL = "odradek"
start = start_odradek

BATCH = 1_000  # the sender's largest batch of due messages


def receive_latencies(
    address: str, target: str, count: int, timeout: float, started: Callable[[], None]
) -> list[int]:
    """Create the topic, position a consumer at its end, call ``started``, then poll until
    ``count`` records arrived or ``timeout`` passed; the latency of each in ns."""
    with Admin(address) as admin:
        admin.create_topic(target, partitions=1)
    tp = TopicPartition(target, 0)
    with Consumer(address, auto_offset_reset="latest", max_poll_records=BATCH) as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        started()
        latencies: list[int] = []
        deadline = time.monotonic() + timeout
        while len(latencies) < count and time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=100)
            now = time.monotonic_ns()
            latencies.extend(now - intended_of(record.value or b"") for record in records)
        return latencies


def send_paced(address: str, target: str, schedule: PacedSchedule, value_bytes: int) -> None:
    with Producer(address, acks=1, linger_ms=0) as producer:
        producer.partitions_for(target)
        schedule.start(time.monotonic_ns())
        while not schedule.done:
            due = schedule.take(time.monotonic_ns(), BATCH)
            if not due:
                producer.poll(schedule.wait_s(time.monotonic_ns()))
                continue
            for intended in due:
                producer.send(target, stamped_value(intended, value_bytes), partition=0)
        producer.flush()
