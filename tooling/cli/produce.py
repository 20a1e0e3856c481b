"""``odradek produce``: each line of stdin one message (kafka-console-producer).
``add_produce_parser`` adds it to the ``odradek`` parser (tooling/cli/main.py), sharing its client
options and ``--json``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from client.producer import Producer
from protocol.compression import BatchCodec
from protocol.errors import OdradekError
from tooling.cli.args import non_negative_int, positive_int, security_options
from tooling.cli.client_properties import client_property
from tooling.cli.output import Output
from tooling.cli.signals import Interrupted, StopRequest


def add_produce_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    produce = commands.add_parser(
        "produce",
        parents=parents,
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
        choices=[c.name.lower() for c in BatchCodec],
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
        type=client_property(Producer, "producer"), default=[], metavar="KEY=VALUE",
        help="a Producer setting, by its odradek or Kafka name (max_request_bytes=2097152, "
        "max.request.size=2097152, retries=3, delivery.timeout.ms=5000 ...; docs/clients.md); "
        "overrides the options above; repeatable",
    )
    produce.set_defaults(run=cmd_produce)


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
