"""Kafka's own client against odradek's Kafka listener, beside odradek's client on the same
broker and Redis Streams in the same run: ``python -m benchmarks.kafka_clients [--quick]
[--messages N]``.

Prints one JSON line per case, 100-byte values to a one-partition topic:

- ``producer`` with ``client`` ``confluent-kafka`` (librdkafka through the Kafka listener) and
  ``odradek`` (odradek's ``Producer`` through the native listener), compression none and lz4,
  acks 1 and all; the librdkafka line's ``ratio_to_native`` is its msgs/s over the native
  line's for the same bytes -- how much of the broker's own path the Kafka front door keeps;
- ``consumer`` with the same two clients, reading the whole topic from its start (librdkafka
  fetching 10 MB a partition and queueing up to 1,000,000 messages, as tuned for throughput);
- ``producer`` and ``consumer`` of Redis Streams (``system`` redis), as in the ``peers`` area.

librdkafka runs as its users run it for throughput: ``linger.ms`` 5, batches up to 1 MB,
delivery reports for failures only, no idempotence (the 0.10.2 table has none). The broker is
started here with one PLAINTEXT Kafka listener.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import systems
from benchmarks.codec import emit
from benchmarks.servers import start_odradek
from benchmarks.throughput import consume, fill, values
from benchmarks.workloads import sample_values
from client import Admin

VALUE_BYTES = 100
DEADLINE_S = 300.0
_KAFKA_LISTENER = re.compile(r"kafka listener PLAINTEXT on (\S+):(\d+)")


@contextmanager
def broker(workdir: Path) -> Iterator[tuple[str, str]]:
    """An odradek broker with a Kafka listener: (native address, Kafka address)."""
    settings = {"ODRADEK_KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0"}
    with start_odradek(workdir, settings=settings) as server:
        deadline = time.monotonic() + 30
        while (found := _KAFKA_LISTENER.search(server.log_tail(100_000))) is None:
            if time.monotonic() > deadline:
                raise SystemExit("the broker printed no Kafka listener line")
            time.sleep(0.05)
        yield server.address, f"{found[1]}:{found[2]}"


def _topic(admin: Admin, name: str) -> str:
    topic = f"bench-kafka-{name}-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic, partitions=1)
    return topic


def librdkafka_produce(kafka: str, topic: str, count: int, codec: str, acks: int) -> float:
    """Seconds to have ``count`` values acknowledged by the broker. Delivery reports come for
    failures only (``delivery.report.only.error``), as a producer tuned for throughput runs."""
    from confluent_kafka import Producer

    failed: list[Any] = []
    producer = Producer({
        "bootstrap.servers": kafka, "compression.type": codec, "acks": acks,
        "linger.ms": 5, "batch.size": 1_000_000, "enable.idempotence": False,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True, "on_delivery": lambda error, _: failed.append(error),
    })
    samples = values(value_bytes=VALUE_BYTES)
    producer.produce(topic, samples[0])
    producer.flush(30)  # the connection and metadata are ready
    produce = producer.produce
    start = time.perf_counter()
    for i in range(count - 1):
        while True:
            try:
                produce(topic, samples[i % len(samples)])
                break
            except BufferError:  # its queue is full: let it send
                producer.poll(0.01)
    left = producer.flush(DEADLINE_S)
    seconds = time.perf_counter() - start
    if left or failed:
        raise SystemExit(f"librdkafka: {left} unacknowledged, errors {failed[:3]}")
    return seconds


def librdkafka_consume(kafka: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import TopicPartition as KafkaPartition

    # librdkafka's defaults fetch 1 MB a partition and back off once 100,000 messages are
    # queued (fetch.queue.backoff.ms): about 400,000 msgs/s, the broker idle in between
    consumer = KafkaConsumer({"bootstrap.servers": kafka, "group.id": "bench-kafka-clients",
                              "enable.auto.commit": False,
                              "max.partition.fetch.bytes": 10_485_760,
                              "queued.min.messages": 1_000_000})
    try:
        consumer.assign([KafkaPartition(topic, 0, 0)])
        seen = 0
        start = time.perf_counter()
        deadline = time.monotonic() + DEADLINE_S
        while seen < count and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(10_000, timeout=1.0) if not m.error())
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if seen < count:
        raise SystemExit(f"librdkafka consumer read {seen} of {count}")
    return seconds


def _line(bench: str, client: str, count: int, seconds: float, **params: Any) -> dict[str, Any]:
    return {"bench": bench, "client": client, **params, "messages": count,
            "value_bytes": VALUE_BYTES, "msgs_per_s": round(count / seconds),
            "mb_per_s": round(count * VALUE_BYTES / seconds / 1e6, 1)}


def odradek_cases(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="odradek-bench-kafka-") as tmp, \
            broker(Path(tmp)) as (native, kafka), Admin(native) as admin:
        for codec in ("none", "lz4"):
            for acks in (1, -1):
                ours = fill(native, _topic(admin, f"native-{codec}"), count, codec,
                            1 if acks == 1 else "all")
                theirs = librdkafka_produce(kafka, _topic(admin, f"rdkafka-{codec}"), count,
                                            codec, acks)
                emit(_line("producer", "odradek", count, ours, codec=codec, acks=acks))
                emit({**_line("producer", "confluent-kafka", count, theirs, codec=codec,
                              acks=acks), "ratio_to_native": round(ours / theirs, 2)})
        topic = _topic(admin, "consume")
        fill(native, topic, count, "none", 1)
        ours = consume(native, topic, count)
        theirs = librdkafka_consume(kafka, topic, count)
        emit(_line("consumer", "odradek", count, ours, codec="none"))
        emit({**_line("consumer", "confluent-kafka", count, theirs, codec="none"),
              "ratio_to_native": round(ours / theirs, 2)})


def redis_cases(count: int) -> None:
    def measure(name: str, system: Any) -> Iterator[dict[str, Any]]:
        samples = sample_values(VALUE_BYTES)
        for bench in ("producer", "consumer"):
            target = f"bench-{bench}-{uuid.uuid4().hex[:8]}"
            with tempfile.TemporaryDirectory(prefix="odradek-bench-redis-") as tmp, \
                    system.start(Path(tmp)) as server:
                if bench == "consumer":
                    system.produce(server.address, target, samples, count)
                    seconds = system.consume(server.address, target, count)
                else:
                    seconds = system.produce(server.address, target, samples, count)
            yield {**_line(bench, "redis-py", count, seconds), "system": name}

    for line in systems.measure_each(["redis"], measure):
        emit(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kafka_clients",
                                     description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100,000 messages a case")
    parser.add_argument("--messages", type=int, help="messages a case (default 1,000,000)")
    args = parser.parse_args(argv)
    count = args.messages or (100_000 if args.quick else 1_000_000)
    odradek_cases(count)
    redis_cases(count)


if __name__ == "__main__":
    main()
