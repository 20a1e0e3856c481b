"""Spark batch read against one Consumer, on the same topic in the same run:
``python -m benchmarks.spark [--messages N] [--master local[2]] [--bootstrap HOST:PORT]``.

Fills a 4-partition topic with 100-byte values (1,000,000 by default), then prints one JSON line
per case:

- ``spark_session_start``: seconds to start a local SparkSession (JVM included);
- ``spark_batch_read``: rows/s of ``spark.read.format("odradek")`` over the whole topic, summing
  the value lengths so every row reaches Spark (the first query of the session, which also
  starts Spark's Python workers, is a small warm-up and not timed);
- ``consumer_read``: rows/s of one ``Consumer`` assigned all four partitions, polling to the end.

Without ``--bootstrap`` the benchmark starts its own broker and stops it at the end.
"""

from __future__ import annotations

import argparse
import json
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.codec import emit
from benchmarks.throughput import VALUE_BYTES, own_broker, values
from client import Admin, Consumer, Producer, TopicPartition
from pipeline.session import local_session

PARTITIONS = 4


def fill(bootstrap: str, topic: str, n: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS)
    samples = values()
    with Producer(
        bootstrap, linger_ms=5, batch_bytes=256 * 1024, buffer_bytes=64 * 1024 * 1024
    ) as producer:
        for i in range(n):
            producer.send(topic, samples[i % len(samples)], partition=i % PARTITIONS)
        producer.flush()


def spark_read(spark: SparkSession, bootstrap: str, topic: str, n: int, master: str) -> None:
    def load(**options: str) -> DataFrame:
        reader = spark.read.format("odradek").option("bootstrap.servers", bootstrap)
        return reader.option("subscribe", topic).options(**options).load()

    warm_up = {topic: {str(p): 10 for p in range(PARTITIONS)}}
    load(endingOffsets=json.dumps(warm_up)).count()
    start = time.perf_counter()
    totals = load().agg(F.count("*"), F.sum(F.length("value"))).first()
    seconds = time.perf_counter() - start
    assert totals is not None
    rows, value_bytes = totals
    assert rows == n, f"read {rows} rows, expected {n}"
    emit({
        "bench": "spark_batch_read",
        "master": master,
        "messages": n,
        "partitions": PARTITIONS,
        "seconds": round(seconds, 2),
        "rows_per_s": round(n / seconds),
        "mb_per_s": round(value_bytes / seconds / 1e6, 1),
    })


def consumer_read(bootstrap: str, topic: str, n: int) -> None:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10_000) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.position(tp)
        seen = 0
        start = time.perf_counter()
        while seen < n:
            seen += len(consumer.poll(timeout_ms=1000))
        seconds = time.perf_counter() - start
    emit({
        "bench": "consumer_read",
        "messages": n,
        "partitions": PARTITIONS,
        "seconds": round(seconds, 2),
        "rows_per_s": round(n / seconds),
        "mb_per_s": round(n * VALUE_BYTES / seconds / 1e6, 1),
    })


def run(bootstrap: str, n: int, master: str) -> None:
    topic = f"bench-spark-{int(time.time())}"
    fill(bootstrap, topic, n)
    start = time.perf_counter()
    spark = local_session("odradek-benchmark", master=master)
    emit({"bench": "spark_session_start", "master": master,
          "seconds": round(time.perf_counter() - start, 2)})
    try:
        spark_read(spark, bootstrap, topic, n, master)
    finally:
        spark.stop()
    consumer_read(bootstrap, topic, n)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000, help="default: 1,000,000")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args(argv)
    if args.bootstrap:
        run(args.bootstrap, args.messages, args.master)
    else:
        with own_broker() as bootstrap:
            run(bootstrap, args.messages, args.master)


if __name__ == "__main__":
    main()
