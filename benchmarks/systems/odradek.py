"""odradek itself, driven the same way as the peers for the fixed-rate latency runs.

The sender is a ``Producer`` with ``acks=1`` and ``linger_ms=0`` (each due message goes at
once); the receiver a ``Consumer`` assigned the topic's one partition from its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks.pacing import PacedSchedule, intended_of, stamped_value, wait_until
from benchmarks.servers import start_odradek
from client import Admin, Consumer, Producer, TopicPartition
from client.batch import RecordFuture

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
    """Send each message when it is due. While a message awaits its answer the producer waits
    on its socket: its poll wakes when the answer comes, and with one request in flight per
    partition nothing could go before it anyway. Otherwise it waits on a timer (``wait_until``):
    ``Producer.poll`` returns at once with nothing in flight, and waiting in it alone spun a
    whole core, which the broker and the receiver share with the sender on a 2-core machine."""
    with Producer(address, acks=1, linger_ms=0) as producer:
        producer.partitions_for(target)
        last: RecordFuture | None = None
        schedule.start(time.monotonic_ns())
        while (next_ns := schedule.next_ns()) is not None:
            while last is not None and not last.done():
                left_ns = next_ns - time.monotonic_ns()
                if left_ns <= 0:
                    break
                producer.poll(left_ns / 1e9)
            wait_until(next_ns)
            for intended in schedule.take(time.monotonic_ns(), BATCH):
                last = producer.send(target, stamped_value(intended, value_bytes), partition=0)
        producer.flush()
