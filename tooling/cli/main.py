"""The ``odradek`` command line: topics, produce and consume from the shell, and the broker.

``odradek broker ...`` and ``odradek log ...`` replace this process with ``python -m broker``
and ``python -m broker.log.dump`` (same PID, so whoever started it can stop it), so the other
commands never load the broker's code. Every other command talks to brokers over the wire.

Expected failures (a broker that cannot be reached, a topic that does not exist, a bad setting)
print one line naming what went wrong and exit 1 -- no traceback. Human output uses rich
tables; ``--json`` prints JSON for scripts (one object per record for ``consume``). SIGTERM
stops a command as Ctrl-C does, cleanly (tooling/cli/signals.py).
"""

from __future__ import annotations

import argparse
import base64
import inspect
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from client.consumer import Consumer
from client.errors import CorruptRecordError
from client.metadata import TopicInfo
from client.offsets import EARLIEST, LATEST, OffsetAndTimestamp
from client.producer import Producer
from client.records import ConsumerRecord, TopicPartition
from protocol.compression import Codec
from protocol.errors import OdradekError, TopicAuthorizationFailedError
from tooling.cli.acls import add_acls_parser
from tooling.cli.args import (
    admin_client,
    client_options,
    json_option,
    non_negative_int,
    positive_int,
    security_options,
)
from tooling.cli.cluster import add_cluster_parser
from tooling.cli.console import add_console_parser
from tooling.cli.groups import add_groups_parser
from tooling.cli.output import Output
from tooling.cli.quotas import add_quotas_parser
from tooling.cli.records import add_records_parser
from tooling.cli.signals import Interrupted, StopRequest, signals_interrupt
from tooling.cli.users import add_users_parser
from tooling.local.demo import add_demo_parser

#: the longest ``consume`` waits in one poll: a stop signal is acted on within this
_STOP_CHECK_MS = 500
_PASSTHROUGH = {"broker": "broker", "log": "broker.log.dump"}


# ------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek",
        description="odradek: a log broker with a broker-side consumer-group coordinator.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    client = client_options()
    json_flag = json_option()

    commands.add_parser(
        "broker",
        add_help=False,
        help="run a broker: `odradek broker start [...]` (try `odradek broker start --help`)",
    )
    commands.add_parser(
        "log",
        add_help=False,
        help="dump log segment and index files: `odradek log dump PATH...` "
        "(try `odradek log dump --help`)",
    )

    topics = commands.add_parser("topics", help="create, list, describe and delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    create = topic_commands.add_parser(
        "create", parents=[client, json_flag], help="create a topic"
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
        type=_key_value,
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
    listing = topic_commands.add_parser("list", parents=[client, json_flag], help="list topics")
    listing.add_argument(
        "--internal", action="store_true", help="include internal topics (__consumer_offsets)"
    )
    listing.set_defaults(run=cmd_topics_list)
    describe = topic_commands.add_parser(
        "describe",
        parents=[client, json_flag],
        help="partitions, leaders, replicas, ISR and offsets of topics",
    )
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="topics (default: all)")
    describe.add_argument(
        "--all-configs", action="store_true",
        help="show every config's effective value and its source (default/broker/topic), not "
        "only the topic's overrides")
    describe.set_defaults(run=cmd_topics_describe)
    alter = topic_commands.add_parser(
        "alter", parents=[client, json_flag],
        help="add partitions to a topic (never fewer; groups subscribed to it rebalance) or "
        "change its configs",
    )
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=positive_int,
                       help="the new total partition count, larger than the current one")
    alter.add_argument("--config", action="append", default=[], type=_key_value,
                       metavar="KEY=VALUE",
                       help="set a config override, e.g. retention_ms=3600000 (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a config override: the broker's setting applies again "
                       "(repeatable)")
    alter.set_defaults(run=cmd_topics_alter)
    reassign = topic_commands.add_parser(
        "reassign", parents=[client, json_flag],
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
        "delete", parents=[client, json_flag], help="delete topics and their data"
    )
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(run=cmd_topics_delete)

    produce = commands.add_parser(
        "produce",
        parents=[client, json_flag],
        help="send lines from stdin as messages",
        description="Send each line of stdin as one message; print how many were sent and the "
        "rate at the end.",
    )
    produce.add_argument("topic")
    produce.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value (a line without SEP is an "
        "error); without this option messages have no key",
    )
    produce.add_argument(
        "--compression",
        default="none",
        choices=[c.name.lower() for c in Codec],
        help="batch compression (default: none)",
    )
    produce.add_argument(
        "--acks",
        default="1",
        choices=["0", "1", "all", "-1"],
        help="0: do not wait; 1: the leader wrote it; all: every in-sync replica has it "
        "(default: 1)",
    )
    produce.add_argument("--partition", type=non_negative_int, help="send every line here")
    produce.add_argument(
        "--linger-ms", type=non_negative_int, default=5, help="batching delay (default: 5)"
    )
    produce.add_argument(
        "--batch-bytes", type=positive_int, default=65_536, help="batch size (default: 65536)"
    )
    produce.add_argument(
        "--null-marker", metavar="STR",
        help="a line (with --key-separator: a value) equal to STR is sent with a null value: "
        "a tombstone, which deletes its key from a compacted topic",
    )
    produce.add_argument(
        "-X", "--producer-property", "--property", dest="properties", action="append",
        type=_client_property(Producer, "producer"), default=[], metavar="KEY=VALUE",
        help="a Producer setting, by its odradek or Kafka name (max_request_bytes=2097152, "
        "max.request.size=2097152, retries=3, delivery.timeout.ms=5000 ...; docs/clients.md); "
        "overrides the options above; repeatable",
    )
    produce.set_defaults(run=cmd_produce)

    consume = commands.add_parser(
        "consume",
        parents=[client, json_flag],
        help="print messages of topics, alone or as a member of a consumer group",
        description="Print messages, one per line (the value; with --key-separator the key, "
        "SEP, the value), or with --json one JSON object per message. Without --group it "
        "reads every partition of the topics and starts at their end unless told otherwise. "
        "With --group it joins the group, reads the partitions the group gives it, starts at "
        "the group's committed offsets (else at the end, or with --from-beginning at the "
        "start), commits what it printed, and leaves the group when it exits -- also on "
        "Ctrl-C or SIGTERM, which end it between polls (exit status 0).",
    )
    consume.add_argument(
        "topics", nargs="+", metavar="TOPIC",
        help="topics to read (with --pattern: one regular expression for topic names)",
    )
    consume.add_argument(
        "--partition", type=non_negative_int,
        help="only this partition of the one TOPIC (default: all; not with --group)",
    )
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning", action="store_true",
        help="start at the earliest stored message (with --group: where nothing is committed)",
    )
    start.add_argument(
        "--offset", type=_start_offset, metavar="earliest|latest|N",
        help="where to start: earliest or latest for every partition (with --group: where "
        "nothing is committed), or offset N (needs --partition)",
    )
    consume.add_argument(
        "--max-messages", type=positive_int, help="exit after this many messages"
    )
    consume.add_argument(
        "--timeout-ms",
        type=positive_int,
        help="exit when no message arrives for this long (default: wait forever)",
    )
    consume.add_argument(
        "--key-separator", metavar="SEP",
        help="print the key and SEP before each value (with --print: SEP after each field)",
    )
    consume.add_argument(
        "--print", dest="print_fields", type=_print_fields, default=[], metavar="FIELDS",
        help="print these fields before each value, in this order, each followed by a tab (or "
        f"--key-separator's SEP): a comma-separated list of {', '.join(_PRINT_FIELDS)} "
        "(kafka-console-consumer's print.* properties; a null key or value prints as null)",
    )
    consume.add_argument(
        "--format", dest="data_format", choices=["text", "base64", "hex"], default="text",
        help="how keys and values are printed, also with --json: text (UTF-8, any other byte "
        "as a \\xNN escape), base64 or hex (default: text)",
    )
    consume.add_argument(
        "-X", "--consumer-property", dest="properties", action="append",
        type=_client_property(Consumer, "consumer"), default=[], metavar="KEY=VALUE",
        help="a Consumer setting, by its odradek or Kafka name (max_poll_records=10, "
        "session.timeout.ms=6000, check_crcs=false ...; docs/clients.md); overrides what the "
        "options above set; repeatable",
    )
    consume.add_argument("--group", metavar="G", help="consume as a member of consumer group G")
    consume.add_argument(
        "--skip-message-on-error", action="store_true",
        help="skip a damaged message (bad CRC, malformed) with a warning and go on, as "
        "kafka-console-consumer's skip.message.on.error (default: print the messages before "
        "it, then exit 1 naming its offset)",
    )
    consume.add_argument(
        "--pattern", action="store_true",
        help="TOPIC is a regular expression: read every topic whose whole name matches it, "
        "including topics created later (needs --group)",
    )
    consume.add_argument(
        "--commit", choices=["auto", "sync", "async"], default="auto",
        help="with --group: commit every few seconds (auto), or after each batch printed, "
        "waiting (sync) or not (async) for the answer (default: auto)",
    )
    consume.set_defaults(run=cmd_consume)
    add_groups_parser(commands, [client, json_flag])
    add_console_parser(commands, client.get_default("bootstrap"))
    add_cluster_parser(commands, json_flag)
    add_records_parser(commands, [client, json_flag])
    add_acls_parser(commands, [client, json_flag])
    add_quotas_parser(commands, [client, json_flag])
    add_users_parser(commands, [client, json_flag])
    add_demo_parser(commands)
    return parser


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _start_offset(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not earliest, latest or an offset (a whole number, at least 0)"
        ) from None


_PRINT_FIELDS = ("topic", "partition", "offset", "timestamp", "key")


def _print_fields(text: str) -> list[str]:
    fields = [field.strip() for field in text.split(",") if field.strip()]
    unknown = [field for field in fields if field not in _PRINT_FIELDS]
    if unknown or not fields:
        raise argparse.ArgumentTypeError(
            f"unknown field {(unknown or [text])[0]!r}; choose from {', '.join(_PRINT_FIELDS)}"
        )
    return fields


#: Kafka's names for the client settings whose odradek name is not Kafka's with _ for .
_KAFKA_NAMES = {
    "batch.size": "batch_bytes",
    "buffer.memory": "buffer_bytes",
    "max.request.size": "max_request_bytes",
    "compression.type": "compression",
    "max.partition.fetch.bytes": "partition_fetch_bytes",
    "fetch.message.max.bytes": "max_partition_fetch_bytes",
}
#: settings the CLI has its own options for, or that are no text: not passed by -X
_NOT_PROPERTIES = {"bootstrap", "group_id", "partitioner"}


def _client_property(client: type, role: str) -> Callable[[str], tuple[str, Any]]:
    """An argparse type for ``-X KEY=VALUE``: KEY is a keyword argument of ``client`` (or its
    Kafka name), VALUE converted to the type the argument is annotated with."""
    annotations = {
        name: str(parameter.annotation)
        for name, parameter in inspect.signature(client).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in _NOT_PROPERTIES
    }

    def parse(text: str) -> tuple[str, Any]:
        key, value = _key_value(text)
        name = _KAFKA_NAMES.get(key, key.replace(".", "_").replace("-", "_"))
        if name not in annotations:
            raise argparse.ArgumentTypeError(
                f"unknown {role} property {key!r}; known: {', '.join(annotations)}"
            )
        try:
            return name, _convert_setting(value, annotations[name])
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{role} property {key!r}: {exc}") from None

    parse.__name__ = f"{role} property"
    return parse


def _convert_setting(text: str, annotation: str) -> Any:
    kinds = [kind.strip() for kind in annotation.split("|")]
    if "bool" in kinds:
        if text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise ValueError(f"{text!r} is not true or false")
    for kind in kinds:
        if kind in ("int", "float"):
            try:
                return int(text)
            except ValueError:
                if kind == "float":
                    try:
                        return float(text)
                    except ValueError:
                        pass
        elif kind != "None":
            return text  # str, or a name the client parses itself (Codec, OffsetReset)
    names = {"int": "a whole number", "float": "a number"}
    wanted = " or ".join(names.get(k, k) for k in kinds if k != "None")
    raise ValueError(f"{text!r} is not {wanted}")


# ---------------------------------------------------------------------------------- commands


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


def cmd_produce(args: argparse.Namespace, output: Output, stdin: BinaryIO | None = None) -> int:
    source = stdin if stdin is not None else sys.stdin.buffer
    separator = None if args.key_separator is None else args.key_separator.encode()
    null_marker = None if args.null_marker is None else args.null_marker.encode()
    sent = failed = 0
    first_error: list[BaseException] = []
    stopped: tuple[int, str] | None = None  # the line and the error that stopped the input

    def count(future: Any) -> None:
        nonlocal failed
        error = future.exception()
        if error is not None:
            failed += 1
            if not first_error:
                first_error.append(error)

    started = time.monotonic()
    with StopRequest() as stop, Producer(args.bootstrap, **_producer_settings(args),
                                         **security_options(args)) as producer:
        producer.partitions_for(args.topic)  # fail fast, naming the topic, if it is unusable
        lines = iter(source)
        number = 0
        # A stop signal: send what was read, report, exit 128+N. A message that fails (at
        # once, or when its batch is answered) stops the input: the summary names the error.
        while not stop.requested:
            if first_error:
                stopped = (number, f"a message failed: {first_error[0]}")
                break
            try:
                with stop.interruptible():
                    line = next(lines, None)
            except Interrupted:
                break
            if line is None:
                break
            number += 1
            value = line[:-1] if line.endswith(b"\n") else line
            key = None
            if separator is not None:
                key, sep, value = value.partition(separator)
                if not sep:
                    stopped = (number, f"line {number} has no key separator")
                    break
            try:
                future = producer.send(
                    args.topic,
                    None if value == null_marker else value,
                    key=key,
                    partition=args.partition,
                )
            except OdradekError as exc:  # too large, no such partition, no room in time
                stopped = (number, f"line {number}: {exc or type(exc).__name__}")
                break
            future.add_done_callback(count)
            sent += 1
        producer.flush()
    if stopped is None and first_error:  # the last batches failed after the input ended
        stopped = (number, f"a message failed: {first_error[0]}")
    _report_produced(args, output, sent - failed, failed,
                     max(time.monotonic() - started, 1e-9), stopped)
    if stopped is not None:
        return 1
    return 0 if stop.signum is None else 128 + stop.signum


def _producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``produce``'s options as Producer settings; ``--property`` ones win."""
    settings: dict[str, Any] = {
        "acks": args.acks,
        "compression": args.compression,
        "linger_ms": args.linger_ms,
        "batch_bytes": args.batch_bytes,
        "max_block_ms": args.api_timeout_ms,
        "delivery_timeout_ms": max(args.api_timeout_ms, 30_000),
    }
    settings.update(args.properties)
    return settings


def _report_produced(args: argparse.Namespace, output: Output, acknowledged: int, failed: int,
                     elapsed: float, stopped: tuple[int, str] | None) -> None:
    """The summary line (or JSON), and what stopped the input, if anything did."""
    if args.json:
        output.json(
            {
                "topic": args.topic,
                "sent": acknowledged,
                "failed": failed,
                "seconds": round(elapsed, 3),
                "msgs_per_s": round(acknowledged / elapsed, 1),
                "error": None if stopped is None else stopped[1],
                "stopped_at_line": None if stopped is None else stopped[0],
            }
        )
    else:
        output.note(
            f"sent {acknowledged} messages to {args.topic!r} in {elapsed:.2f} s "
            f"({acknowledged / elapsed:,.0f} msgs/s)"
        )
    if stopped is not None:
        output.note(
            f"odradek: error: stopped after reading {stopped[0]} lines: {acknowledged} sent, "
            f"{failed} failed; stopped by {stopped[1]}"
        )


def cmd_consume(args: argparse.Namespace, output: Output) -> int:
    problem = _consume_usage_problem(args)
    if problem:
        output.note(f"odradek: error: {problem}")
        return 1
    group = args.group is not None
    settings: dict[str, Any] = {
        "auto_offset_reset": "earliest"
        if args.from_beginning or args.offset == "earliest"
        else "latest",
        "enable_auto_commit": group and args.commit == "auto",
        "default_api_timeout_ms": args.api_timeout_ms,
    }
    settings.update(args.properties)
    # SIGTERM and Ctrl-C end the loop between polls; leaving the block closes the consumer
    # (final commit, LeaveGroup) with the signals still deferred, then the summary: exit 0.
    with StopRequest() as stop, Consumer(
        args.bootstrap,
        group_id=args.group,
        **settings,
        **security_options(args),
    ) as consumer:
        if group:
            if args.pattern:
                consumer.subscribe(pattern=args.topics[0])
            else:
                consumer.subscribe(args.topics)
        elif not _assign_for_consume(consumer, args, output):
            return 1
        try:
            count = _consume_loop(consumer, args, output, stop)
        except CorruptRecordError as exc:  # the messages before it are printed
            output.note(f"odradek: error: {exc}; --skip-message-on-error skips it")
            return 1
    output.note(f"processed {count} messages")
    return 0


def _consume_usage_problem(args: argparse.Namespace) -> str | None:
    numbered = isinstance(args.offset, int)
    if numbered and args.group is not None:
        return "--offset N cannot be used with --group (earliest or latest can)"
    if numbered and args.partition is None:
        return "--offset N needs --partition (earliest or latest do not)"
    if args.partition is not None and len(args.topics) > 1:
        return "--partition needs exactly one TOPIC"
    if args.group is None:
        if args.pattern:
            return "--pattern needs --group"
        return None
    if args.partition is not None:
        return "--partition cannot be used with --group: the group assigns the partitions"
    if args.pattern and len(args.topics) > 1:
        return "--pattern takes one regular expression"
    return None


def _assign_for_consume(consumer: Consumer, args: argparse.Namespace, output: Output) -> bool:
    tps: list[TopicPartition] = []
    for topic in args.topics:
        partitions = consumer.partitions_for(topic)
        if args.partition is not None:
            if args.partition not in partitions:
                output.note(
                    f"odradek: error: topic {topic!r} has no partition {args.partition} "
                    f"(it has {len(partitions)})"
                )
                return False
            partitions = [args.partition]
        tps += [TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    if args.from_beginning or args.offset == "earliest":
        consumer.seek_to_beginning()
    elif isinstance(args.offset, int):
        consumer.seek(tps[0], args.offset)
    else:
        consumer.seek_to_end()
    return True


def _consume_loop(
    consumer: Consumer, args: argparse.Namespace, output: Output, stop: StopRequest
) -> int:
    """Print records until --max-messages, --timeout-ms of silence, or a stop signal (Ctrl-C,
    SIGTERM); with a group, commit per --commit (``close`` commits last with auto-commit).
    The signal is only looked at between polls, so no request is cut in half."""
    write = _record_writer(args, output)
    commit_each_batch = args.group is not None and args.commit != "auto"
    count = 0
    idle_since = time.monotonic()
    while not stop.requested and (args.max_messages is None or count < args.max_messages):
        wait = min(_STOP_CHECK_MS, args.timeout_ms or _STOP_CHECK_MS)
        want = None if args.max_messages is None else args.max_messages - count
        try:
            records = consumer.poll(timeout_ms=wait, max_records=want)
        except CorruptRecordError as exc:
            if not args.skip_message_on_error:
                raise
            output.note(f"odradek: warning: skipping a damaged message: {exc}")
            consumer.seek(exc.tp, exc.offset + 1)
            continue
        if records:
            for record in records:
                write(record)
            count += len(records)
            output.out.flush()
            idle_since = time.monotonic()
            if commit_each_batch:
                if args.commit == "sync":
                    consumer.commit()
                else:
                    consumer.commit_async(callback=_report_async_commit(output))
        elif args.timeout_ms is not None and (
            time.monotonic() - idle_since >= args.timeout_ms / 1000
        ):
            break
    if commit_each_batch and args.commit == "async":
        consumer.commit()  # the last async commit may still be out: make sure of the end
    return count


def _report_async_commit(output: Output) -> Callable[[Any, BaseException | None], None]:
    def report(offsets: Any, error: BaseException | None) -> None:
        if error is not None:
            output.note(f"odradek: warning: commit failed: {error}")

    return report


def _record_writer(args: argparse.Namespace, output: Output) -> Callable[[ConsumerRecord], None]:
    _text = _DATA_FORMATS[args.data_format]
    if args.json:

        def write_json(record: ConsumerRecord) -> None:
            output.json(
                {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": _text(record.key),
                    "value": _text(record.value),
                }
            )

        return write_json
    separator = "\t" if args.key_separator is None else args.key_separator
    fields = args.print_fields or (["key"] if args.key_separator is not None else [])

    def show(data: bytes | None) -> str:
        text = _text(data)
        return "null" if text is None else text

    def write_line(record: ConsumerRecord) -> None:
        printed = [
            show(record.key) if field == "key" else str(getattr(record, field))
            for field in fields
        ]
        output.out.write("".join(part + separator for part in printed) + show(record.value) + "\n")

    return write_line


def _text(data: bytes | None) -> str | None:
    """Bytes as text: UTF-8, with any byte that is not UTF-8 written as a \\xNN escape."""
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


_DATA_FORMATS: dict[str, Callable[[bytes | None], str | None]] = {
    "text": _text, "base64": _base64, "hex": _hex
}


# -------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _PASSTHROUGH:
        module = _PASSTHROUGH[args_list[0]]
        rest = args_list[1:]
        if args_list[0] == "log" and rest[:1] == ["dump"]:
            rest = rest[1:]  # ``odradek log dump PATH``: the module's own name for itself
        os.execv(sys.executable, [sys.executable, "-m", module, *rest])
    args = build_parser().parse_args(args_list)
    output = Output(sys.stdout, sys.stderr)
    try:
        with signals_interrupt():  # SIGTERM cleans up as Ctrl-C does (tooling/cli/signals.py)
            code: int = args.run(args, output)
        return code
    except OdradekError as exc:
        output.note(f"odradek: error: {exc or type(exc).__name__}")
        return 1
    except KeyboardInterrupt as exc:  # 130 for Ctrl-C, 143 for SIGTERM
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as shell tools do.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
