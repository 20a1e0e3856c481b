"""Client throughput and latency against one real broker:
``python -m benchmarks.throughput [--quick] [--profile] [--bootstrap HOST:PORT]``.

Prints one JSON line per case:

- ``producer``: messages/s and MB/s sending 100-byte values from one ``Producer`` to a
  one-partition topic, for compression none and lz4 and acks 1 and all (``linger_ms=5``,
  ``batch_bytes=256 KiB``);
- ``consumer``: messages/s of ``Consumer.poll`` reading a 1,000,000-message topic from the start;
- ``latency``: end-to-end latency (send to ``poll`` return) at 1,000 messages/s with
  ``linger_ms=0``, producer and consumer in separate processes, p50/p99/max in ms;
- ``producer_topics``: 20 messages to each of 500 new (auto-created) topics from one
  ``Producer``, and the time per topic among the first and the last fifth of them: learning a
  topic must cost the same however many are known already;
- ``producer_format``: the producer case (100-byte values, acks=all) writing message format v1
  (Produce v1) and v2 (record batches, Produce v2), for compression none, lz4 and zstd (v2
  only), v2 with and without idempotence (issue #27's aim: v2 idempotent >= 0.9 of v1);
- ``consumer_format``: the consumer case over a topic of each format, and over v2 read by a
  Fetch v2 reader -- the broker down-converts every batch to v1 -- with the conversion's cost
  per fetched MB beside it.

MB/s counts value bytes, in units of 10**6. Without ``--bootstrap`` the benchmark starts its own
broker (``python -m broker start --port 0`` in a temporary directory) and stops it at the end.
``--profile`` runs the lz4/acks=1 producer and the consumer case under cProfile and prints the
functions that take the most time to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import selectors
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from benchmarks.codec import emit, sample_records
from benchmarks.servers import stop_process
from client import Admin, Consumer, Producer, TopicPartition
from client import fetcher as fetcher_module
from client import producer as producer_module

VALUE_BYTES = 100
PRODUCER_VALUE_BYTES = (100, 1024)  # issue #8: 100 B and 1 KiB values
_LISTENING = re.compile(r"odradek broker (-?\d+) listening on (\S+):(\d+)")
_STAMP = struct.Struct(">q")


# ------------------------------------------------------------------------------------ broker


@contextmanager
def own_broker(timeout: float = 30.0) -> Iterator[str]:
    """Start a broker on a free port in a temporary directory; yield its address."""
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        log_path = Path(tmp) / "broker.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "broker", "start", "--host", "127.0.0.1", "--port", "0",
                 "--data-dir", str(Path(tmp) / "data")],
                stdout=subprocess.PIPE,
                stderr=log,
            )
            try:
                yield _wait_listening(proc, timeout, log_path)
            finally:
                stop_process(proc)


def _wait_listening(proc: subprocess.Popen[bytes], timeout: float, log_path: Path) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None or not selector.select(remaining):
                break
            chunk = cast(io.BufferedReader, proc.stdout).read1(4096)  # Popen: a BufferedReader
            if not chunk:
                break
            line += chunk
    match = _LISTENING.search(line.decode(errors="replace"))
    if match is None:
        proc.kill()
        raise SystemExit(
            f"broker did not start: {line!r}\n{log_path.read_text(errors='replace')[-2000:]}"
        )
    return f"{match.group(2)}:{match.group(3)}"


# ------------------------------------------------------------------------------------- cases


def values(count: int = 1000, value_bytes: int = VALUE_BYTES) -> list[bytes]:
    """Log-like values (a little repetitive, as real ones are)."""
    return [r[1] or b"" for r in sample_records(count, value_bytes)]


def new_topic(admin: Admin, name: str) -> str:
    topic = f"bench-{name}-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic, partitions=1)
    return topic


def fill(
    bootstrap: str,
    topic: str,
    n: int,
    codec: str,
    acks: int | str,
    value_bytes: int = VALUE_BYTES,
    api: str = "send",
) -> float:
    """Send ``n`` values to ``topic`` with ``Producer.send`` one at a time, or with
    ``Producer.send_many`` (``api``) a thousand at a time; return the seconds it took, flush
    included."""
    samples = values(value_bytes=value_bytes)
    with Producer(
        bootstrap,
        acks=acks,
        compression=codec,
        linger_ms=5,
        batch_bytes=256 * 1024,
        buffer_bytes=64 * 1024 * 1024,
    ) as producer:
        producer.send(topic, samples[0]).result(30)  # metadata and connection are ready
        send = producer.send
        count = len(samples)
        start = time.perf_counter()
        if api == "send_many":
            send_many = producer.send_many
            for _ in range((n - 1) // count):
                send_many(topic, samples)
            send_many(topic, samples[: (n - 1) % count])
        else:
            for i in range(n - 1):
                send(topic, samples[i % count])
        producer.flush()
        return time.perf_counter() - start


def producer_cases(bootstrap: str, n: int, profiler: cProfile.Profile | None) -> None:
    with Admin(bootstrap) as admin:
        for value_bytes in PRODUCER_VALUE_BYTES:
            count = n if value_bytes == VALUE_BYTES else max(n // 5, 1)  # same order of MB
            for codec in ("none", "lz4"):
                for acks in (1, "all"):
                    topic = new_topic(admin, f"produce-{value_bytes}-{codec}-{acks}")
                    profiling = (
                        profiler is not None
                        and codec == "lz4"
                        and acks == 1
                        and value_bytes == VALUE_BYTES
                    )
                    if profiling:
                        assert profiler is not None
                        profiler.enable()
                    seconds = fill(bootstrap, topic, count, codec, acks, value_bytes)
                    if profiling:
                        assert profiler is not None
                        profiler.disable()
                    emit({
                        "bench": "producer",
                        "codec": codec,
                        "acks": acks,
                        "messages": count,
                        "value_bytes": value_bytes,
                        "msgs_per_s": round(count / seconds),
                        "mb_per_s": round(count * value_bytes / seconds / 1e6, 1),
                    })
    send_many_cases(bootstrap, n)


def send_many_cases(bootstrap: str, n: int) -> None:
    """The batch API's figures beside ``send()``'s (100 B values, acks=1)."""
    with Admin(bootstrap) as admin:
        for codec in ("none", "lz4"):
            topic = new_topic(admin, f"produce-many-{codec}")
            seconds = fill(bootstrap, topic, n, codec, 1, api="send_many")
            emit({
                "bench": "producer",
                "api": "send_many",
                "codec": codec,
                "acks": 1,
                "messages": n,
                "value_bytes": VALUE_BYTES,
                "msgs_per_s": round(n / seconds),
                "mb_per_s": round(n * VALUE_BYTES / seconds / 1e6, 1),
            })


def consumer_case(bootstrap: str, n: int, profiler: cProfile.Profile | None) -> None:
    with Admin(bootstrap) as admin:
        topic = new_topic(admin, "consume")
    fill(bootstrap, topic, n, "none", 1)
    tp = TopicPartition(topic, 0)
    with Consumer(
        bootstrap, auto_offset_reset="earliest", max_poll_records=10_000
    ) as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        seen = 0
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        while seen < n:
            seen += len(consumer.poll(timeout_ms=1000))
        seconds = time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
    emit({
        "bench": "consumer",
        "codec": "none",
        "messages": n,
        "value_bytes": VALUE_BYTES,
        "max_poll_records": 10_000,
        "msgs_per_s": round(n / seconds),
        "mb_per_s": round(n * VALUE_BYTES / seconds / 1e6, 1),
    })


@contextmanager
def client_versions(produce: tuple[int, int] | None = None,
                    fetch: tuple[int, int] | None = None) -> Iterator[None]:
    """The clients as of an older release: the Produce (message format) and Fetch versions
    they may use, narrowed for the block."""
    saved = producer_module.PRODUCE_VERSIONS, fetcher_module.FETCH_VERSIONS
    if produce is not None:
        producer_module.PRODUCE_VERSIONS = produce
    if fetch is not None:
        fetcher_module.FETCH_VERSIONS = fetch
    try:
        yield
    finally:
        producer_module.PRODUCE_VERSIONS, fetcher_module.FETCH_VERSIONS = saved


def fill_format(bootstrap: str, topic: str, n: int, codec: str, message_format: int,
                idempotent: bool) -> float:
    """``fill`` with acks=all in message format ``message_format``; the seconds it took."""
    samples = values()
    produce = (1, 1) if message_format == 1 else None
    with client_versions(produce=produce), Producer(
        bootstrap, acks="all", compression=codec, linger_ms=5, batch_bytes=256 * 1024,
        buffer_bytes=64 * 1024 * 1024, enable_idempotence=idempotent,
    ) as producer:
        producer.send(topic, samples[0]).result(30)
        start = time.perf_counter()
        send_many = producer.send_many
        for _ in range((n - 1) // len(samples)):
            send_many(topic, samples)
        send_many(topic, samples[: (n - 1) % len(samples)])
        producer.flush()
        return time.perf_counter() - start


def format_cases(bootstrap: str, produce_n: int, consume_n: int) -> None:
    """Message format v1 against v2, idempotent or not, in the same run (issue #27)."""
    cases = [(1, "none", False), (1, "lz4", False)] + [
        (2, codec, idempotent) for codec in ("none", "lz4", "zstd") for idempotent in (False, True)]
    with Admin(bootstrap) as admin:
        for message_format, codec, idempotent in cases:
            topic = new_topic(admin, f"format-v{message_format}-{codec}-{idempotent}")
            seconds = fill_format(bootstrap, topic, produce_n, codec, message_format, idempotent)
            emit({"bench": "producer_format", "format": f"v{message_format}", "codec": codec,
                  "idempotent": idempotent, "acks": "all", "messages": produce_n,
                  "value_bytes": VALUE_BYTES, "msgs_per_s": round(produce_n / seconds),
                  "mb_per_s": round(produce_n * VALUE_BYTES / seconds / 1e6, 1)})
        topics = {}
        for message_format in (1, 2):
            topics[message_format] = new_topic(admin, f"read-v{message_format}")
            fill_format(bootstrap, topics[message_format], consume_n, "none", message_format,
                        message_format == 2)
    seconds_v2 = 0.0
    for message_format, fetch, label in ((1, None, "v4"), (2, None, "v4"),
                                         (2, (2, 2), "v2 (down-converted)")):
        with client_versions(fetch=fetch):
            seconds = consume(bootstrap, topics[message_format], consume_n)
        line = {"bench": "consumer_format", "format": f"v{message_format}", "fetch": label,
                "messages": consume_n, "value_bytes": VALUE_BYTES,
                "msgs_per_s": round(consume_n / seconds),
                "mb_per_s": round(consume_n * VALUE_BYTES / seconds / 1e6, 1)}
        if fetch is None and message_format == 2:
            seconds_v2 = seconds
        elif fetch is not None:
            megabytes = consume_n * VALUE_BYTES / 1e6
            line["conversion_ms_per_mb"] = round((seconds - seconds_v2) / megabytes * 1000, 2)
        emit(line)


def consume(bootstrap: str, topic: str, n: int, **options: Any) -> float:
    """Seconds ``Consumer.poll`` takes to read ``n`` messages of ``topic``'s partition 0 from
    the start (``options``: more Consumer settings, e.g. security)."""
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10_000,
                  **options) as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        seen = 0
        start = time.perf_counter()
        while seen < n:
            seen += len(consumer.poll(timeout_ms=1000))
        return time.perf_counter() - start


def latency_case(bootstrap: str, seconds: float, rate: int = 1000) -> None:
    with Admin(bootstrap) as admin:
        topic = new_topic(admin, "latency")
    count = int(seconds * rate)
    tp = TopicPartition(topic, 0)
    latencies: list[float] = []
    with Consumer(bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=500) as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        sender = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.throughput", "--latency-producer",
             bootstrap, topic, str(count), str(rate)]
        )
        try:
            deadline = time.monotonic() + seconds + 60
            while len(latencies) < count and time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=100):
                    now = time.time_ns()
                    (sent,) = _STAMP.unpack_from(record.value or b"")
                    latencies.append((now - sent) / 1e6)
        finally:
            sender.wait(60)
    latencies.sort()
    emit({
        "bench": "latency",
        "rate_per_s": rate,
        "linger_ms": 0,
        "messages": len(latencies),
        "p50_ms": round(_percentile(latencies, 0.50), 2),
        "p99_ms": round(_percentile(latencies, 0.99), 2),
        "max_ms": round(latencies[-1], 2) if latencies else None,
    })


def many_topics_case(bootstrap: str, topics: int, per_topic: int = 20) -> None:
    """Each new topic costs one metadata round trip (and its creation on the broker); the
    cost must not grow with the topics already known (it did: 8 ms, then 37 ms per topic)."""
    prefix = f"bench-topics-{uuid.uuid4().hex[:8]}"
    value = values(1)[0]
    per_topic_s: list[float] = []
    with Producer(bootstrap, acks=1, linger_ms=0) as producer:
        producer.partitions_for(f"{prefix}-warm")  # connection and first metadata are ready
        start = time.perf_counter()
        for i in range(topics):
            began = time.perf_counter()
            topic = f"{prefix}-{i}"
            for _ in range(per_topic):
                producer.send(topic, value)
            per_topic_s.append(time.perf_counter() - began)
        producer.flush()
        seconds = time.perf_counter() - start
    fifth = max(topics // 5, 1)
    emit({
        "bench": "producer_topics",
        "topics": topics,
        "messages": topics * per_topic,
        "value_bytes": len(value),
        "msgs_per_s": round(topics * per_topic / seconds),
        "first_fifth_time_ms": round(1000 * sum(per_topic_s[:fifth]) / fifth, 2),
        "last_fifth_time_ms": round(1000 * sum(per_topic_s[-fifth:]) / fifth, 2),
    })


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def latency_producer(bootstrap: str, topic: str, count: int, rate: int) -> None:
    """The sending half of the latency case: ``count`` messages at ``rate``/s, each carrying
    its send time (ns since the epoch) in its first 8 bytes."""
    padding = b"p" * (VALUE_BYTES - _STAMP.size)
    with Producer(bootstrap, acks=1, linger_ms=0) as producer:
        producer.partitions_for(topic)
        start = time.monotonic()
        for i in range(count):
            due = start + i / rate
            while (wait := due - time.monotonic()) > 0:
                producer.poll(wait)
            producer.send(topic, _STAMP.pack(time.time_ns()) + padding, partition=0)
        producer.flush()


# -------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument("--profile", action="store_true", help="cProfile the hot paths")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--latency-producer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.latency_producer:
        bootstrap, topic, count, rate = args.latency_producer
        latency_producer(bootstrap, topic, int(count), int(rate))
        return
    produce_n = 20_000 if args.quick else 500_000
    consume_n = 20_000 if args.quick else 1_000_000
    latency_s = 1.0 if args.quick else 5.0
    topics_n = 100 if args.quick else 500
    profilers = {"producer": cProfile.Profile(), "consumer": cProfile.Profile()}
    use = (lambda name: profilers[name]) if args.profile else (lambda name: None)

    def run(bootstrap: str) -> None:
        producer_cases(bootstrap, produce_n, use("producer"))
        consumer_case(bootstrap, consume_n, use("consumer"))
        latency_case(bootstrap, latency_s)
        many_topics_case(bootstrap, topics_n)
        format_cases(bootstrap, produce_n, consume_n)

    if args.bootstrap:
        run(args.bootstrap)
    else:
        with own_broker() as bootstrap:
            run(bootstrap)
    if args.profile:
        for name, profiler in profilers.items():
            print(f"--- {name} (cProfile, by own time)", file=sys.stderr)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)



if __name__ == "__main__":
    main()
