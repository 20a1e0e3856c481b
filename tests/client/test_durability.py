"""Durability: an acks=all producer keeps sending while the broker is SIGKILLed and restarted.

Afterwards every acknowledged message is in the log exactly where its acknowledgement said,
in send order per partition, and once: the producer is idempotent (the default with acks=all),
so a retry after a lost acknowledgement is answered with the first write's offsets instead of
stored again -- the broker rebuilds each producer's sequences from its log after every kill.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from client import Admin, Consumer, Producer, TopicPartition
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 3
KILLS = 5
MIN_MESSAGES = 3_000


def kill_and_restart(
    broker: BrokerProcess, rng: random.Random, done: threading.Event, kills: list[float]
) -> None:
    """SIGKILL the broker at random moments and start it again on the same port."""
    while len(kills) < KILLS and not done.wait(rng.uniform(0.05, 0.4)):
        broker.kill()
        kills.append(time.monotonic())
        broker.start(port=broker.port)


def test_acknowledged_messages_survive_sigkill_exactly_once_in_order(
    tmp_path: Path, record_property
) -> None:
    rng = random.Random(20240604)
    broker = BrokerProcess(tmp_path / "data").start()
    kills: list[float] = []
    done = threading.Event()
    killer = threading.Thread(target=kill_and_restart, args=(broker, rng, done, kills))
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("durable", partitions=PARTITIONS)
        producer = Producer(
            broker.bootstrap,
            acks="all",
            linger_ms=1,
            batch_bytes=4096,  # many small batches, so kills land among requests in flight
            retry_backoff_ms=20,
            request_timeout_ms=5_000,
            delivery_timeout_ms=120_000,
        )
        futures = []
        killer.start()
        deadline = time.monotonic() + 60
        # Keep sending, a little at a time, until every kill has happened.
        while killer.is_alive() or len(futures) < MIN_MESSAGES:
            assert time.monotonic() < deadline, "the kills did not finish in time"
            for _ in range(20):
                i = len(futures)
                futures.append(producer.send("durable", b"%06d" % i, partition=i % PARTITIONS))
            producer.poll(0.002)
        producer.flush(120)
        producer.close()
        acked = {i: f.result() for i, f in enumerate(futures) if f.succeeded()}
        unacked = [i for i, f in enumerate(futures) if not f.succeeded()]
        stored = read_all(broker.bootstrap)
    finally:
        done.set()
        if killer.is_alive():
            killer.join(60)
        broker.stop()
        print(broker.log_text()[-20_000:])
    sent = len(futures)
    assert len(kills) == KILLS
    retried = sum(1 for f in futures if f.attempts > 1)
    assert retried, "no send was retried: the kills missed the producer"

    copies: dict[int, list[tuple[int, int]]] = defaultdict(list)  # number -> (partition, offset)
    for (partition, offset), number in stored.items():
        assert number % PARTITIONS == partition, f"{number} stored in partition {partition}"
        copies[number].append((partition, offset))
    assert set(copies) <= set(range(sent)), "the log holds messages nobody sent"

    for number, metadata in acked.items():
        where = (metadata.partition, metadata.offset)
        assert stored.get(where) == number, f"acknowledged {number} is not at {where}"
        earlier = [offset for _, offset in copies[number] if offset != metadata.offset]
        assert all(offset < metadata.offset for offset in earlier), (
            f"{number}: a copy after its acknowledged offset {metadata.offset}: {earlier}"
        )
    for partition in range(PARTITIONS):
        in_offset_order = sorted(
            (md.offset, n) for n, md in acked.items() if md.partition == partition
        )
        numbers = [n for _, n in in_offset_order]
        assert numbers == sorted(numbers), f"partition {partition} is out of send order"

    duplicates = sum(len(c) - 1 for c in copies.values())
    report = {
        "messages": sent,
        "kills": len(kills),
        "acknowledged": len(acked),
        "unacknowledged": len(unacked),
        "retried_sends": retried,
        "unacknowledged_stored": sum(1 for n in unacked if n in copies),
        "duplicate_copies": duplicates,
        "messages_with_duplicates": sum(1 for c in copies.values() if len(c) > 1),
    }
    print("durability:", json.dumps(report))
    for key, value in report.items():
        record_property(key, value)
    # With retries and a generous delivery timeout, every send is acknowledged in the end.
    assert not unacked, f"{len(unacked)} sends were never acknowledged"
    assert not duplicates, "the idempotent producer's retries stored copies"


def read_all(bootstrap: str) -> dict[tuple[int, int], int]:
    """Every stored message: (partition, offset) -> its number."""
    tps = [TopicPartition("durable", p) for p in range(PARTITIONS)]
    stored: dict[tuple[int, int], int] = {}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "could not read the log back in time"
            for record in consumer.poll(timeout_ms=200):
                stored[(record.partition, record.offset)] = int(record.value or b"-1")
    return stored
