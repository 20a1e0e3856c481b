"""Batch job: copy a range of a topic to Parquet files.

    python -m pipeline.jobs.topic_to_parquet --bootstrap 127.0.0.1:9092 \\
        --topic events --output ./events-parquet \\
        [--starting-offsets earliest] [--ending-offsets latest] [--min-partitions 8]

Writes every column of the odradek source (key, value, topic, partition, offset, timestamp,
timestampType), replacing what ``--output`` held. Offsets take ``earliest``, ``latest`` or JSON
per partition, as the source's options do, e.g. ``'{"events": {"0": 100, "1": -2}}'``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import SparkSession

from pipeline.session import local_session


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.jobs.topic_to_parquet", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--bootstrap", required=True, help="broker HOST:PORT[,HOST:PORT]")
    parser.add_argument("--topic", required=True, help="the topic (or comma-separated topics)")
    parser.add_argument("--output", required=True, help="directory to write Parquet files to")
    parser.add_argument("--starting-offsets", default="earliest", help="default: earliest")
    parser.add_argument("--ending-offsets", default="latest", help="default: latest")
    parser.add_argument("--min-partitions", type=int, help="split the read into at least N tasks")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    return parser.parse_args(argv)


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    """Write the Parquet files; return how many rows they hold."""
    reader = (
        spark.read.format("odradek")
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("endingOffsets", args.ending_offsets)
    )
    if args.min_partitions:
        reader = reader.option("minPartitions", str(args.min_partitions))
    reader.load().write.mode("overwrite").parquet(args.output)
    return spark.read.parquet(args.output).count()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spark = local_session("odradek-topic-to-parquet", master=args.master)
    try:
        rows = run(spark, args)
    finally:
        spark.stop()
    print(f"wrote {rows} messages to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
