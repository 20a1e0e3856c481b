"""The benchmark suite: ``python -m benchmarks.run [--quick] [--only NAME] [--json]``.

Runs every area in ``AREAS`` in order, prints one JSON line per measurement -- ``area``,
``name``, ``params``, ``value``, ``unit`` and, where a peer ran the same workload, ``peers``:
``{"redis": {"value": ..., "ratio": odradek / peer}, ...}`` -- plus one line per area or peer
that is missing or failed (``status`` and ``reason``), then writes benchmarks/report.md with its
plots. ``--quick`` finishes within about two minutes, the full run within fifteen. Without
``--json`` the summary table follows the JSON lines. ``--compare FILE`` then lists every figure
more than 20% worse than in FILE, a run saved with ``--save FILE`` (benchmarks/compare.py).
Last comes the aims table (benchmarks/aims.py: the aims of issue #15, of the mirror and of
rebalancing, this run's figures, reached or not), on stderr with ``--json``. Progress goes to
stderr. Exit status 1 when an area failed (a missing one is reported, not an error).

scripts/bench installs the peers (Debian's redis-server and nats-server) and the ``bench`` extra
(matplotlib, redis, nats-py) first, then runs this.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import aims, compare, latency, limits, machine, peers, rebalance, report
from benchmarks.areas import Area, AreaResult, RawLine, TimeLimits, run_area, script
from benchmarks.measurements import Measurement, Problem, join, json_line, normalise

DEFAULT_REPORT = Path(__file__).resolve().parent / "report.md"

AREAS = (
    Area("codec", "message-set encode/decode per codec; CRC32 implementations",
         script("benchmarks.codec")),
    Area("log", "log append and read next to raw file I/O of the same bytes",
         script("benchmarks.log")),
    Area("fetch_send", "fetch responses by sendfile against read-and-pack",
         script("benchmarks.fetch_send")),
    Area("throughput", "Producer and Consumer against a real broker",
         script("benchmarks.throughput")),
    Area("security", "Producer and Consumer over SASL_SSL beside PLAINTEXT, and logins/s "
         "(TLS, SCRAM, PLAIN)", script("benchmarks.security")),
    Area("kafka_clients", "librdkafka (confluent-kafka) through the Kafka listener beside "
         "odradek's client and Redis Streams", script("benchmarks.kafka_clients")),
    Area("peers", "Redis Streams and NATS JetStream on the producer and consumer workloads",
         peers.run),
    Area("limits", "sequential file write/read and loopback socket copy of the same bytes",
         limits.run),
    Area("latency", "end-to-end latency at 1k/10k/100k msgs/s from the intended send time",
         latency.run),
    Area("coordinator", "heartbeats/s and rebalance time for 10/100/1,000 members (raw protocol)",
         script("benchmarks.coordinator")),
    Area("group", "rebalance time with 3/10/30 real consumers",
         script("benchmarks.group")),
    Area("scale", "10,000 groups / 100,000 members and 10,000 partitions on one broker: memory, "
         "heartbeat p99 while 1,000 groups rebalance, start-up",
         script("benchmarks.scale")),
    Area("group_failover", "coordinator failover (kill -9 / SIGTERM of the broker coordinating "
         "10 groups of 10 consumers; 3 brokers, ZooKeeper) and Catch-up of 1,000,000 offset "
         "records", script("benchmarks.group", TimeLimits(quick=180.0, full=600.0),
                           args=("failover",))),
    Area("spark", "Spark batch read of a topic next to one Consumer",
         script("benchmarks.spark", TimeLimits(quick=90.0, full=300.0),
                quick_args=("--messages", "50000"))),
    Area("cluster", "availability after kill -9 / SIGTERM of a partition leader and kill -9 of "
         "the controller (3 brokers, ZooKeeper)",
         script("benchmarks.cluster", TimeLimits(quick=120.0, full=300.0))),
    Area("replication", "producer msgs/s, end-to-end latency and acks=all failover with RF 1 "
         "and RF 3 (3 brokers, ZooKeeper)",
         script("benchmarks.replication", TimeLimits(quick=120.0, full=300.0))),
    Area("mirror", "odradek mirror between two brokers, pass-through and --recompress, beside "
         "Consumer.poll and Producer.send on the same messages",
         script("benchmarks.mirror", TimeLimits(quick=90.0, full=900.0))),
    Area("rebalance", "a member's restart and a rolling restart of 10/100 consuming members: "
         "eager, incremental and static side by side (pauses, throughput dip, time to a stable "
         "assignment)", rebalance.area),
)


def run_areas(areas: Sequence[Area], quick: bool) -> list[AreaResult]:
    earlier: dict[str, Sequence[RawLine]] = {}
    results = []
    for area in areas:
        print(f"benchmarks: {area.name} ...", file=sys.stderr, flush=True)
        result = run_area(area, quick, earlier)
        earlier[area.name] = result.lines
        results.append(result)
        note = f": {result.reason}" if result.reason else ""
        print(f"benchmarks: {area.name} {result.status}, {len(result.lines)} lines in "
              f"{result.seconds:.1f} s{note}", file=sys.stderr, flush=True)
    return results


def collect(results: Sequence[AreaResult]) -> tuple[list[Measurement], list[Problem]]:
    """Every area's lines as measurements (peers joined to odradek's) and problems."""
    measurements: list[Measurement] = []
    problems: list[Problem] = []
    for result in results:
        if result.status != "ok":
            problems.append(Problem(result.name, result.name, result.status, result.reason))
        for line in result.lines:
            item = normalise(result.name, line)
            if isinstance(item, Problem):
                problems.append(item)
            else:
                measurements.extend(item)
    return join(measurements), problems


def select(names: Sequence[str] | None) -> list[Area]:
    if not names:
        return list(AREAS)
    known = {area.name: area for area in AREAS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown area {', '.join(unknown)}; the areas are {', '.join(known)}")
    return [area for area in AREAS if area.name in names]


def main(argv: Sequence[str] | None = None, areas: Sequence[Area] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small counts, about two minutes")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run only this area (repeatable): " + ", ".join(a.name for a in AREAS))
    parser.add_argument("--json", action="store_true", help="print only the JSON lines")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT,
                        help="where to write the report (plots go beside it)")
    parser.add_argument("--save", type=Path, metavar="FILE",
                        help="write the JSON lines to FILE too (a baseline for --compare)")
    parser.add_argument("--compare", type=Path, metavar="FILE",
                        help="list every figure more than 20%% worse than in FILE, a saved run "
                             f"(the latest quick one: {compare.BASELINE.name})")
    args = parser.parse_args(argv)
    saved = compare.load(args.compare) if args.compare else None  # a bad file fails first
    chosen = select(args.only) if areas is None else list(areas)
    command = "python -m benchmarks.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = datetime.now(UTC)
    start = time.monotonic()
    results = run_areas(chosen, args.quick)
    measurements, problems = collect(results)
    items: list[Measurement | Problem] = [*measurements, *problems]
    for item in items:
        print(json_line(item), flush=True)
    if args.save:
        args.save.write_text("".join(json_line(item) + "\n" for item in items))
    record = report.RunRecord(
        command.strip(), started, time.monotonic() - start, machine.describe(), results,
        measurements, problems,
    )
    written = report.write(record, args.report)
    summary = report.summary_rows(report.side_by_side(measurements))
    if summary and not args.json:
        print("\n" + "\n".join(report.table(summary)))
    print(f"benchmarks: wrote {', '.join(map(str, written))}", file=sys.stderr)
    after = sys.stderr if args.json else sys.stdout  # after the JSON lines, so stderr with --json
    if saved is not None:
        found = compare.changes(saved, measurements)
        print("\n" + "\n".join(compare.report(args.compare, found)), file=after)
    print("\nThe aims of issue #15, of the mirror and of rebalancing in this run "
          "(benchmarks/aims.py):\n"
          + "\n".join(aims.table(aims.evaluate(measurements))), file=after)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
