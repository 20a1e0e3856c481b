"""``odradek cluster verify-replicas``: every replica of each partition compared entry by entry,
as stored (tooling/replica_verification.py), one line per partition.

Each line says ``ok`` or the first difference; a summary goes to stderr, with the progress of
a long run. ``--json`` prints one object with every verdict. The exit status is 0 only when
every replica answered and every copy agrees: 1 when copies differ, 2 when nothing differs but
a replica could not be read (its broker down, say).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from tooling.cli.args import add_command_config, positive_int, security_options
from tooling.cli.output import Output
from tooling.replica_verification import (
    DEFAULT_CHUNK_BYTES,
    PartitionVerdict,
    Progress,
    ProgressPacer,
    VerdictStatus,
    verify_replicas,
)

EXIT_DIFFERS = 1
EXIT_INCOMPLETE = 2
HIGH_WATERMARK_NOTE = (
    "compared up to the lowest high watermark among the replicas that answered (a follower "
    "learns the high watermark from its next fetch, so its own can lag the leader's by one)")
DESCRIPTION = (
    "Read every replica of each partition from its own broker (a debugging fetch, Kafka's "
    "replica_id -2, answered by followers as well as leaders) and compare the copies entry "
    "by entry as stored -- offsets, CRCs and bytes -- from the highest log start to the "
    "lowest high watermark among the replicas that answered (Kafka's "
    "kafka-replica-verification). Prints `ok` or the first difference per partition. A "
    "replica that cannot be read (broker down) is reported as not answering, not as a "
    "difference. Exit status: 0 all agree, 1 copies differ, 2 a replica did not answer.")


def add_verify_replicas_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    json_parent: argparse.ArgumentParser,
    default_dir: str,
    bootstrap_of: Callable[[argparse.Namespace], str],
) -> None:
    """Add ``verify-replicas`` to ``odradek cluster``'s actions; ``bootstrap_of`` finds the
    brokers from --bootstrap or --dir as the other actions do."""
    verify = actions.add_parser(
        "verify-replicas", parents=[json_parent],
        help="compare every replica of each partition entry by entry (offsets, CRCs, bytes)",
        description=DESCRIPTION)
    verify.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                        help="only this topic's partitions (repeatable; default: every topic "
                        "but the internal ones)")
    where = verify.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", metavar="HOST:PORT[,HOST:PORT...]",
                       help=f"brokers to ask (default: the local cluster in {default_dir}, "
                       "else $ODRADEK_BOOTSTRAP or 127.0.0.1:9092)")
    where.add_argument("--dir", type=Path,
                       help="ask the local cluster recorded in DIR/cluster.json")
    verify.add_argument(
        "--api-timeout-ms", dest="api_timeout_ms", type=positive_int, default=30_000,
        metavar="MS", help="how long to wait for brokers to answer (default: %(default)s)")
    verify.add_argument("--chunk-bytes", dest="chunk_bytes", type=positive_int,
                        default=DEFAULT_CHUNK_BYTES, metavar="BYTES",
                        help="how much of a replica each read asks for (default: %(default)s)")
    add_command_config(verify)
    verify.set_defaults(run=lambda args, output: cmd_verify_replicas(
        args, output, bootstrap_of(args)))


def cmd_verify_replicas(args: argparse.Namespace, output: Output, bootstrap: str) -> int:
    pacer = ProgressPacer(lambda p: output.note(_progress_line(p)))
    verdicts = verify_replicas(
        bootstrap, args.topic or None, timeout_ms=args.api_timeout_ms,
        chunk_bytes=args.chunk_bytes, progress=pacer, **security_options(args))
    counts = _counts(verdicts)
    if args.json:
        output.json({
            "partitions": [v.to_json() for v in verdicts],
            "summary": {"partitions": len(verdicts),
                        **{str(status): n for status, n in counts.items()}},
            "agree": all(v.ok for v in verdicts),
        })
    else:
        for verdict in verdicts:
            output.out.write(verdict_line(verdict) + "\n")
        output.note(summary_line(verdicts))
    if counts[VerdictStatus.DIFFERS]:
        return EXIT_DIFFERS
    return EXIT_INCOMPLETE if counts[VerdictStatus.INCOMPLETE] else 0


def verdict_line(verdict: PartitionVerdict) -> str:
    """``orders-0: ok (...)``, or what differs first, or which replica did not answer."""
    name = f"{verdict.topic}-{verdict.partition}"
    compared = ",".join(map(str, verdict.compared)) or "none"
    span = (f"offsets {verdict.start_offset}..{verdict.end_offset}, {verdict.entries} "
            f"entries, brokers {compared}")
    missing = "; ".join(f"broker {b} not answering: {why}"
                        for b, why in verdict.not_answering.items())
    difference = verdict.difference
    if difference is not None:
        line = f"{name}: DIFFERS at {difference}"
        return f"{line}; {missing}" if missing else line
    if missing:
        agreed = "the others agree" if len(verdict.compared) > 1 else "nothing to compare with"
        return f"{name}: incomplete: {missing}; {agreed} ({span})"
    return f"{name}: ok ({span}){_starts_note(verdict)}"


def _starts_note(verdict: PartitionVerdict) -> str:
    starts = {r.broker_id: r.log_start_offset for r in verdict.replicas}
    if len(set(starts.values())) <= 1:
        return ""
    listed = ", ".join(f"{b}: {s}" for b, s in starts.items())
    return f"; log starts differ ({listed}), compared from the highest"


def summary_line(verdicts: Sequence[PartitionVerdict]) -> str:
    parts = ", ".join(f"{n} {status}" for status, n in _counts(verdicts).items())
    return f"{len(verdicts)} partitions: {parts}; {HIGH_WATERMARK_NOTE}"


def _counts(verdicts: Sequence[PartitionVerdict]) -> dict[VerdictStatus, int]:
    return {status: sum(v.status is status for v in verdicts) for status in VerdictStatus}


def _progress_line(progress: Progress) -> str:
    return (f"verifying {progress.topic}-{progress.partition} (partition {progress.number} of "
            f"{progress.partitions}): at offset {progress.offset} of {progress.end_offset}")
