"""``odradek topics create / list / describe / alter / reassign / delete`` (kafka-topics and
kafka-reassign-partitions). ``add_topics_parser`` adds them to the ``odradek`` parser
(tooling/cli/main.py), sharing its client options and ``--json``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from client.metadata import TopicInfo
from client.offsets import EARLIEST, LATEST, OffsetAndTimestamp
from client.records import TopicPartition
from protocol.errors import TopicAuthorizationFailedError
from tooling.cli.args import admin_client, key_value, non_negative_int, positive_int
from tooling.cli.output import Output


def add_topics_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    topics = commands.add_parser("topics", help="create, list, describe and delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    create = topic_commands.add_parser(
        "create", parents=parents, help="create a topic"
    )
    create.add_argument("topic", help="topic name: [a-zA-Z0-9._-], at most 249 characters")
    create.add_argument(
        "--partitions", type=positive_int, default=1, help="partition count (default: 1)"
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        default=1,
        help="copies of each partition; at most the number of live brokers (default: 1)",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a per-topic setting, e.g. cleanup_policy=compact (repeatable)",
    )
    create.add_argument(
        "--replica-assignment", type=_replica_assignment, metavar="B:B,B:B,...",
        help="explicit replicas per partition, partitions separated by ',' and brokers by ':' "
        "(the preferred leader first), as Kafka's kafka-topics; replaces --partitions and "
        "--replication-factor",
    )
    create.add_argument(
        "--if-not-exists", action="store_true",
        help="succeed, changing nothing, when the topic already exists (as Kafka's kafka-topics)",
    )
    create.set_defaults(run=cmd_topics_create)
    listing = topic_commands.add_parser("list", parents=parents, help="list topics")
    listing.add_argument(
        "--internal", action="store_true", help="include internal topics (__consumer_offsets)"
    )
    listing.set_defaults(run=cmd_topics_list)
    describe = topic_commands.add_parser(
        "describe",
        parents=parents,
        help="partitions, leaders, replicas, ISR and offsets of topics",
    )
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="topics (default: all)")
    describe.add_argument(
        "--all-configs", action="store_true",
        help="show every config's effective value and its source (default/broker/topic), not "
        "only the topic's overrides")
    describe.set_defaults(run=cmd_topics_describe)
    alter = topic_commands.add_parser(
        "alter", parents=parents,
        help="add partitions to a topic (never fewer; groups subscribed to it rebalance) or "
        "change its configs",
    )
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=positive_int,
                       help="the new total partition count, larger than the current one")
    alter.add_argument("--config", action="append", default=[], type=key_value,
                       metavar="KEY=VALUE",
                       help="set a config override, e.g. retention_ms=3600000 (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a config override: the broker's setting applies again "
                       "(repeatable)")
    alter.set_defaults(run=cmd_topics_alter)
    reassign = topic_commands.add_parser(
        "reassign", parents=parents,
        help="move a partition to new replicas (kafka-reassign-partitions)",
        description="Add the new replicas, wait until they are in sync, then remove the old "
        "ones, as Kafka's reassignment does. Prints progress until the move is done (or "
        "returns at once with --no-wait).",
    )
    reassign.add_argument("topic")
    reassign.add_argument("--partition", type=non_negative_int, required=True)
    reassign.add_argument("--replicas", required=True, type=_broker_ids, metavar="ID,ID,...",
                          help="the new replicas, the preferred leader first")
    reassign.add_argument("--no-wait", dest="wait", action="store_false",
                          help="return once the move has started")
    reassign.add_argument("--wait-timeout-ms", type=positive_int, default=120_000,
                          metavar="MS", help="how long to wait for the move (default: "
                          "%(default)s)")
    reassign.set_defaults(run=cmd_topics_reassign)
    delete = topic_commands.add_parser(
        "delete", parents=parents, help="delete topics and their data"
    )
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(run=cmd_topics_delete)


def _replica_assignment(text: str) -> dict[int, list[int]]:
    try:
        return {p: [int(b) for b in part.split(":")] for p, part in enumerate(text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a replica assignment such as 0:1:2,1:2:0") from None


def cmd_topics_create(args: argparse.Namespace, output: Output) -> int:
    assignment = args.replica_assignment
    if assignment is not None:
        args.partitions, args.replication_factor = len(assignment), len(assignment[0])
    with admin_client(args) as admin:
        created = admin.create_topic(
            args.topic, args.partitions, args.replication_factor, dict(args.config),
            replica_assignment=assignment, exist_ok=args.if_not_exists,
        )
    if args.json:
        output.json(
            {
                "topic": args.topic,
                "partitions": args.partitions,
                "replication_factor": args.replication_factor,
                "configs": dict(args.config),
                "created": created,
            }
        )
    elif created:
        output.out.write(f"created topic {args.topic!r} with {args.partitions} partition(s)\n")
    else:
        output.out.write(f"topic {args.topic!r} already exists; left as it is\n")
    return 0


def cmd_topics_list(args: argparse.Namespace, output: Output) -> int:
    with admin_client(args) as admin:
        names = admin.list_topics(include_internal=args.internal)
    if args.json:
        output.json(names)
    else:
        for name in names:
            output.out.write(name + "\n")
    return 0


def cmd_topics_describe(args: argparse.Namespace, output: Output) -> int:
    with admin_client(args) as admin:
        topics = admin.describe_topics(args.topics or None)
        tps = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
        earliest = admin.list_offsets(dict.fromkeys(tps, EARLIEST)) if tps else {}
        latest = admin.list_offsets(dict.fromkeys(tps, LATEST)) if tps else {}
        configs = admin.describe_configs_results([t.name for t in topics]) if topics else {}
    described = [_describe(t, earliest, latest) for t in topics]
    for entry in described:
        found = configs.get(entry["topic"], [])
        if isinstance(found, TopicAuthorizationFailedError):
            # Partitions need Describe, configs DescribeConfigs, which a principal granted Read
            # or Write on the topic lacks: show what it may see, and say what it may not.
            entry["configs"], entry["configs_error"] = None, str(found)
            if not args.json:
                output.note(f"note: configs not shown: {found}")
            continue
        if not isinstance(found, list):
            raise found
        entry["configs"] = [
            {"name": c.name, "value": c.value, "source": c.source}
            for c in found
            if args.all_configs or c.source == "topic"
        ]
        entry["configs_error"] = None
    if args.json:
        output.json(described)
        return 0
    rows = [
        (
            t["topic"],
            p["partition"],
            p["leader"],
            ",".join(map(str, p["replicas"])),
            ",".join(map(str, p["isr"])),
            p["earliest_offset"],
            p["latest_offset"],
        )
        for t in described
        for p in t["partitions"]
    ]
    columns = ("topic", "partition", "leader", "replicas", "isr", "earliest", "latest")
    output.table("topics", columns, rows)
    config_rows = [(t["topic"], c["name"], "" if c["value"] is None else c["value"], c["source"])
                   for t in described for c in t["configs"] or ()]
    if config_rows:
        output.table("configs", ("topic", "config", "value", "source"), config_rows)
    return 0


def _describe(
    topic: TopicInfo,
    earliest: dict[TopicPartition, OffsetAndTimestamp],
    latest: dict[TopicPartition, OffsetAndTimestamp],
) -> dict[str, Any]:
    partitions = []
    for number in sorted(topic.partitions):
        p = topic.partitions[number]
        tp = TopicPartition(topic.name, number)
        partitions.append(
            {
                "partition": number,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "earliest_offset": earliest[tp].offset,
                "latest_offset": latest[tp].offset,
            }
        )
    return {"topic": topic.name, "internal": topic.internal, "partitions": partitions}


def cmd_topics_alter(args: argparse.Namespace, output: Output) -> int:
    changes = dict(args.config)
    if args.partitions is None and not changes and not args.delete_config:
        output.note("error: give --partitions, --config or --delete-config")
        return 2
    with admin_client(args) as admin:
        if changes or args.delete_config:
            admin.alter_configs(args.topic, changes, args.delete_config)
        if args.partitions is not None:
            admin.create_partitions(args.topic, args.partitions)
    if args.json:
        doc: dict[str, Any] = {"topic": args.topic}
        if args.partitions is not None:
            doc["partitions"] = args.partitions
        if changes or args.delete_config:
            doc.update(set_configs=changes, deleted_configs=list(args.delete_config))
        output.json(doc)
        return 0
    if changes or args.delete_config:
        done = [f"{k}={v}" for k, v in changes.items()] + [
            f"{k} deleted" for k in args.delete_config]
        output.out.write(f"topic {args.topic!r} configs: {', '.join(done)}\n")
    if args.partitions is not None:
        output.out.write(f"topic {args.topic!r} now has {args.partitions} partitions\n")
    return 0


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of broker "
                                         "ids") from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError("broker ids are whole numbers of at least 0")
    return ids


def cmd_topics_reassign(args: argparse.Namespace, output: Output) -> int:
    tp = (args.topic, args.partition)
    with admin_client(args) as admin:
        admin.reassign_partitions({tp: args.replicas})
        if not args.wait:
            output.note(f"moving {args.topic}-{args.partition} to replicas {args.replicas}")
            return 0
        deadline = time.monotonic() + args.wait_timeout_ms / 1000
        shown = None
        while True:
            info = admin.describe_topics([args.topic])[0].partitions[args.partition]
            now = (info.replicas, info.isr, info.leader)
            if now != shown:
                output.note(f"{args.topic}-{args.partition}: replicas {list(info.replicas)}, "
                            f"in sync {list(info.isr)}, leader {info.leader}")
                shown = now
            if list(info.replicas) == args.replicas and set(info.isr) == set(args.replicas):
                break
            if time.monotonic() >= deadline:
                output.note(f"odradek: error: {args.topic}-{args.partition} has not moved "
                            f"within {args.wait_timeout_ms} ms; it goes on in the background")
                return 1
            time.sleep(0.2)
    if args.json:
        output.json({"topic": args.topic, "partition": args.partition,
                     "replicas": args.replicas, "leader": info.leader})
    else:
        output.out.write(f"{args.topic}-{args.partition} moved to replicas {args.replicas} "
                         f"(leader {info.leader})\n")
    return 0


def cmd_topics_delete(args: argparse.Namespace, output: Output) -> int:
    with admin_client(args) as admin:
        results = admin.delete_topics(args.topics)
    failed = {name: error for name, error in results.items() if error is not None}
    if args.json:
        output.json({name: (None if e is None else str(e)) for name, e in results.items()})
    else:
        for name, error in results.items():
            if error is None:
                output.out.write(f"deleted topic {name!r}\n")
    for error in failed.values():
        output.note(f"odradek: error: {error}")
    return 1 if failed else 0
