"""``odradek consume``: print messages, alone or as a member of a consumer group
(kafka-console-consumer). ``add_consume_parser`` adds it to the ``odradek`` parser
(tooling/cli/main.py), sharing its client options and ``--json``."""

from __future__ import annotations

import argparse
import base64
import time
from collections.abc import Callable, Sequence
from typing import Any

from client.consumer import Consumer
from client.errors import CorruptRecordError
from client.records import ConsumerRecord, TopicPartition
from tooling.cli.args import non_negative_int, positive_int, security_options
from tooling.cli.client_properties import client_property
from tooling.cli.output import Output
from tooling.cli.signals import StopRequest

#: the longest ``consume`` waits in one poll: a stop signal is acted on within this
_STOP_CHECK_MS = 500


def add_consume_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    consume = commands.add_parser(
        "consume",
        parents=parents,
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
        type=client_property(Consumer, "consumer"), default=[], metavar="KEY=VALUE",
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
