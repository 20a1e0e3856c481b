"""Streaming job: count events per key in tumbling windows, from one topic to another.

    python -m pipeline.jobs.windowed_counts --bootstrap 127.0.0.1:9092 \\
        --source events --sink event-counts --checkpoint ./counts-checkpoint \\
        [--window "1 minute"] [--available-now]

Event time is each message's timestamp. Every trigger writes one message per (window, key)
whose count changed (Spark's update output mode): key ``<window start>|<event key>``, value JSON
``{"window_start", "window_end", "key", "count"}``. A later message for the same key supersedes
an earlier one, so a compacted sink topic keeps exactly the final counts. Progress lives in the
checkpoint directory: run it again and it carries on where it stopped. ``--available-now``
reads what is in the topic now, writes the counts and exits; without it the job runs until
interrupted.

Spark offers Python streaming sinks append mode only, so each micro-batch's updated counts are
written with the source's batch writer (``foreachBatch``); a batch replayed after a crash is
written again (at least once, like every odradek write).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from pipeline.session import local_session


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.jobs.windowed_counts", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--bootstrap", required=True, help="broker HOST:PORT[,HOST:PORT]")
    parser.add_argument("--source", required=True, help="topic of events to count")
    parser.add_argument("--sink", required=True, help="topic the counts are written to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument("--window", default="1 minute", help="window length (default: 1 minute)")
    parser.add_argument(
        "--watermark",
        default="10 minutes",
        help="how late an event may arrive and still be counted (default: 10 minutes)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new checkpoint starts: earliest, latest or JSON (default: earliest)",
    )
    parser.add_argument("--group-id", help="commit the offsets read to this consumer group")
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there now, then exit"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    return parser.parse_args(argv)


def window_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Rows ready for the odradek sink: one per (window, key) whose count changed."""
    counts = (
        events.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window), F.col("key").cast("string").alias("key"))
        .count()
    )
    # ISO 8601 in the session's time zone with its offset ("Z" for UTC, as local_session sets).
    start = F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ssXXX")
    end = F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ssXXX")
    return counts.select(
        F.concat_ws("|", start, F.coalesce("key", F.lit(""))).alias("key"),
        F.to_json(
            F.struct(start.alias("window_start"), end.alias("window_end"), "key", "count"),
            {"ignoreNullFields": "false"},  # a null key stays in the JSON as null
        ).alias("value"),
    )


def run(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    """Start the query and return it, running."""
    reader = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.group_id:
        reader = reader.option("groupId", args.group_id)

    def write_counts(counts: DataFrame, batch_id: int) -> None:
        (
            counts.write.format("odradek")
            .mode("append")
            .option("bootstrap.servers", args.bootstrap)
            .option("topic", args.sink)
            .save()
        )

    writer = (
        window_counts(reader.load(), args.window, args.watermark)
        .writeStream.outputMode("update")
        .foreachBatch(write_counts)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spark = local_session("odradek-windowed-counts", master=args.master)
    try:
        query = run(spark, args)
        query.awaitTermination()
        print(f"read {sum(p.numInputRows for p in query.recentProgress)} events")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
