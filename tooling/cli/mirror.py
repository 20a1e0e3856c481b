"""``odradek mirror``: copy topics from one cluster to another until stopped, and
``odradek mirror status``: where a mirror's group stands. tooling/mirror/ does the work;
docs/mirroring.md is the user's guide."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from broker.settings import host_port
from client.admin import Admin
from client.consumer import Consumer
from client.group_admin import GroupAdmin
from client.producer import Producer
from client.security import SecurityConfig, SecurityOptions
from protocol.compression import Codec
from tooling.cli.args import command_config, positive_int
from tooling.cli.client_properties import client_property
from tooling.cli.output import Output
from tooling.cli.signals import StopRequest
from tooling.mirror.naming import Renaming, TopicSelection
from tooling.mirror.progress import serve_metrics
from tooling.mirror.runner import Mirror, MirrorOptions
from tooling.mirror.status import mirror_status
from tooling.mirror.stream import StreamConfig

_DESCRIPTION = """\
Copy topics from the --source cluster to the --target cluster until Ctrl-C or SIGTERM: a
consumer group on the source (--group) and a producer on the target, per stream. Each target
topic is created like its source topic (partitions, replication factor up to the target's
brokers, topic configs) and every message goes to the same partition number, in order. Stored
message sets are appended as they are -- compressed ones are not decompressed -- unless
--recompress is given. A source offset is committed only after the target acknowledged every
message before it, so a mirror killed and started again loses nothing and copies again at most
what it had not committed. Several processes with the same --group share the partitions.
`odradek mirror status` shows, per source partition, the committed offset, both log ends and the
lag."""


def add_mirror_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parser holding --json (the clusters have options of their own)."""
    mirror = commands.add_parser(
        "mirror", parents=parents, help="copy topics from one cluster to another",
        description=_DESCRIPTION,
    )
    mirror.add_argument("action", nargs="?", choices=["run", "status"], default="run",
                        help="run the mirror (the default), or show where its group stands")
    _add_cluster_options(mirror)
    topics = mirror.add_mutually_exclusive_group()
    topics.add_argument("--topics", metavar="PATTERN",
                        help="mirror every topic whose whole name matches this regular "
                        "expression, also topics created later (internal ones never)")
    topics.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                        help="mirror this topic (repeat for more)")
    mirror.add_argument("--num-streams", type=positive_int, default=1, metavar="N",
                        help="consumer-producer pairs in this process, sharing the partitions "
                        "through the group (default: %(default)s)")
    mirror.add_argument("--recompress", type=_codec, metavar="CODEC",
                        help="decode the messages and compress them again with CODEC (none, "
                        "gzip, snappy, lz4) instead of passing stored sets through")
    mirror.add_argument("--acks", choices=["all", "1"], default="all",
                        help="what the target acknowledges before a source offset may be "
                        "committed (default: %(default)s)")
    mirror.add_argument("--commit-interval-ms", type=positive_int, default=5_000, metavar="MS",
                        help="how often acknowledged source offsets are committed; a restart "
                        "copies again at most this long's messages (default: %(default)s)")
    mirror.add_argument("--sync-interval-ms", type=positive_int, default=30_000, metavar="MS",
                        help="how often the source is looked at for new topics and partitions "
                        "(default: %(default)s)")
    mirror.add_argument("--from-latest", action="store_true",
                        help="where the group has no commit, start at the end (default: the "
                        "earliest stored message)")
    mirror.add_argument("--progress-interval-s", type=float, default=10.0, metavar="S",
                        help="print messages/s, MB/s and lag per topic this often on stderr; 0 "
                        "for never (default: %(default)s)")
    mirror.add_argument("--metrics-listener", type=_host_port, metavar="HOST:PORT",
                        help="serve Prometheus metrics here (port 0: any free port, printed)")
    mirror.add_argument("--source-property", dest="source_properties", action="append",
                        type=client_property(Consumer, "consumer"), default=[],
                        metavar="KEY=VALUE", help="a setting of the source consumer")
    mirror.add_argument("--target-property", dest="target_properties", action="append",
                        type=client_property(Producer, "producer"), default=[],
                        metavar="KEY=VALUE", help="a setting of the target producer")
    mirror.set_defaults(run=cmd_mirror)


def _add_cluster_options(mirror: argparse.ArgumentParser) -> None:
    for side, example in (("source", "the cluster copied from"),
                          ("target", "the cluster copied to")):
        mirror.add_argument(f"--{side}", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                            help=f"brokers of {example}")
        mirror.add_argument(f"--{side}-config", type=command_config, metavar="FILE",
                            help=f"TLS and SASL settings for the {side} (the format of "
                            "--command-config)")
    mirror.add_argument("--group", default="odradek-mirror",
                        help="the mirror's consumer group on the source (default: %(default)s)")
    mirror.add_argument("--rename", default="{topic}", metavar="TEMPLATE",
                        help="the target topic's name: {topic} is the source topic's, {source} "
                        "the --source-alias (e.g. '{source}.{topic}', MirrorMaker 2's naming; "
                        "default: %(default)s)")
    mirror.add_argument("--source-alias", metavar="NAME",
                        help="the source cluster's name, for {source} in --rename")
    mirror.add_argument("--api-timeout-ms", type=positive_int, default=30_000, metavar="MS",
                        help="how long to wait for brokers to answer (default: %(default)s)")


def cmd_mirror(args: argparse.Namespace, output: Output) -> int:
    renaming = Renaming(args.rename, args.source_alias)
    if args.action == "status":
        return _status(args, renaming, output)
    selection = TopicSelection.of(args.topics, args.topic)
    options = MirrorOptions(
        stream=StreamConfig(
            args.source, args.target, group=args.group,
            source_security=_security(args.source_config),
            target_security=_security(args.target_config),
            source_properties=dict(args.source_properties),
            target_properties=dict(args.target_properties),
            acks=args.acks, recompress=args.recompress,
            commit_interval=args.commit_interval_ms / 1000, from_latest=args.from_latest,
            metadata_max_age_ms=args.sync_interval_ms,
        ),
        selection=selection, renaming=renaming, num_streams=args.num_streams,
        progress_interval=args.progress_interval_s,
        sync_interval=args.sync_interval_ms / 1000, api_timeout_ms=args.api_timeout_ms,
    )
    mirror = Mirror(options, output.note)
    if args.metrics_listener is not None:
        host, port = serve_metrics(mirror.progress, *args.metrics_listener)
        output.note(f"mirror: metrics on http://{host}:{port}/metrics")
    with StopRequest() as stop:
        mirror.run(lambda: stop.requested)
    messages, size = mirror.progress.totals()
    output.note(f"mirror: stopped; {messages:,} messages ({size:,} bytes) sent, "
                f"{mirror.progress.acknowledged:,} acknowledged and committed")
    return 0


def _status(args: argparse.Namespace, renaming: Renaming, output: Output) -> int:
    with GroupAdmin(args.source, timeout_ms=args.api_timeout_ms,
                    **_security(args.source_config)) as source, \
            Admin(args.target, timeout_ms=args.api_timeout_ms,
                  **_security(args.target_config)) as target:
        rows = mirror_status(source, target, args.group, renaming)
    if args.json:
        output.json([{
            "topic": r.source.topic, "partition": r.source.partition,
            "committed": r.committed, "source_end": r.source_end, "lag": r.lag,
            "target_topic": r.target.topic, "target_end": r.target_end,
        } for r in rows])
        return 0
    if not rows:
        output.note(f"group {args.group!r} has committed nothing on {args.source}")
        return 0
    table: list[list[Any]] = [
        [r.source.topic, r.source.partition, r.committed, _text(r.source_end), _text(r.lag),
         r.target.topic, _text(r.target_end)]
        for r in rows
    ]
    output.table(f"mirror group {args.group} ({args.source} -> {args.target})",
                 ["TOPIC", "PARTITION", "COMMITTED", "SOURCE-END", "LAG", "TARGET-TOPIC",
                  "TARGET-END"], table)
    return 0


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _security(config: SecurityConfig | None) -> SecurityOptions:
    return {} if config is None else config.options()


def _codec(text: str) -> Codec:
    try:
        return Codec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as a broker's listener settings read it."""
    try:
        return host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
