"""``odradek records delete`` (kafka-delete-records) and ``odradek log-dirs`` (kafka-log-dirs).

``records delete --topic T --partition P --before OFFSET`` asks the partition's leader to move
its log start offset to OFFSET (``-1`` or ``latest``: the high watermark): the records below
it are gone for consumers, whole segments below it are deleted. ``log-dirs`` asks every broker
(Metadata's broker list) for the partition logs on its disk: size, log start and end offsets,
high watermark and segment count. ``add_records_parser`` adds both to the ``odradek`` parser
(tooling/cli/main.py), sharing its client options and ``--json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict

from client.records import TopicPartition
from tooling.cli.args import admin_client, non_negative_int
from tooling.cli.output import Output

LOG_DIR_COLUMNS = ("BROKER", "TOPIC", "PARTITION", "SIZE", "LOG-START-OFFSET", "LOG-END-OFFSET",
                   "HIGH-WATERMARK", "SEGMENTS", "LOG-DIR")


def add_records_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    records = subparsers.add_parser("records", help="delete the records of a partition "
                                    "below an offset")
    actions = records.add_subparsers(dest="records_command", metavar="ACTION", required=True)
    delete = actions.add_parser(
        "delete", parents=parents,
        help="move a partition's log start offset up (kafka-delete-records)",
        description="The partition's leader moves its log start offset to OFFSET: reads "
        "below it fail with OFFSET_OUT_OF_RANGE, and whole segments below it are deleted. "
        "OFFSET may not be above the high watermark; -1 or latest means the high watermark.")
    delete.add_argument("--topic", required=True)
    delete.add_argument("--partition", required=True, type=non_negative_int)
    delete.add_argument("--before", required=True, type=_before_offset, metavar="OFFSET",
                        help="the new log start offset, or -1 / latest for the high watermark")
    delete.set_defaults(run=cmd_records_delete)

    log_dirs = subparsers.add_parser(
        "log-dirs", parents=parents,
        help="the partition logs on every broker's disk (kafka-log-dirs)",
        description="Per broker, per partition log on its disk: " + ", ".join(
            LOG_DIR_COLUMNS[3:-1]) + ".")
    log_dirs.add_argument("--topic", action="append", dest="topics", metavar="TOPIC",
                          help="only this topic (repeatable)")
    log_dirs.add_argument("--broker", action="append", dest="brokers", type=int,
                          metavar="ID", help="ask only this broker (repeatable)")
    log_dirs.set_defaults(run=cmd_log_dirs)


def _before_offset(text: str) -> int:
    if text == "latest":
        return -1
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an offset (a whole number, at least 0), -1 or latest") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{text!r}: an offset is at least 0 (or -1: latest)")
    return value


def cmd_records_delete(args: argparse.Namespace, output: Output) -> int:
    tp = TopicPartition(args.topic, args.partition)
    with admin_client(args) as admin:
        low = admin.delete_records({tp: args.before})[tp]
    if args.json:
        output.json({"topic": tp.topic, "partition": tp.partition, "low_watermark": low})
    else:
        output.out.write(f"{tp.topic}-{tp.partition}: log start offset is now {low}\n")
    return 0


def cmd_log_dirs(args: argparse.Namespace, output: Output) -> int:
    with admin_client(args) as admin:
        replicas = admin.describe_log_dirs(args.topics, brokers=args.brokers)
    replicas.sort(key=lambda r: (r.broker_id, r.topic, r.partition))
    if args.json:
        output.json([asdict(r) for r in replicas])
        return 0
    output.table("Log directories", LOG_DIR_COLUMNS, [
        (r.broker_id, r.topic, r.partition, r.size, r.log_start_offset, r.log_end_offset,
         r.high_watermark, r.segments, r.log_dir)
        for r in replicas
    ])
    return 0
