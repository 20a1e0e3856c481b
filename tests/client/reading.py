"""Reading a partition back with the native Consumer, for the client tests."""

from __future__ import annotations

import time

from client import Consumer, ConsumerRecord, TopicPartition


def read_records(bootstrap: str, tp: TopicPartition, n: int,
                 timeout: float = 20.0) -> list[ConsumerRecord]:
    """At least ``n`` records of ``tp`` from its earliest offset, within ``timeout`` s."""
    records: list[ConsumerRecord] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        deadline = time.monotonic() + timeout
        while len(records) < n:
            assert time.monotonic() < deadline, f"only {len(records)} of {n} records in time"
            records += consumer.poll(timeout_ms=200)
    return records
