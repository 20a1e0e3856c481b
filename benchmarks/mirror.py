"""``odradek mirror`` between two brokers on this machine, beside the plain clients it is built
on: ``python -m benchmarks.mirror [--quick] [--messages N] [--profile]``.

For 100-byte and 1 KiB values, compression none and lz4, a source topic of 4 partitions is
filled with N messages; then, each on topics of its own, one JSON line per case:

- ``consumer``: one ``Consumer.poll`` reading the source topic from its start;
- ``producer``: one ``Producer`` sending the same messages with the same codec (``send()``,
  acks all) to a new 4-partition topic on the target;
- ``mirror`` with ``mode`` ``passthrough`` (stored message sets appended unopened) and
  ``recompress`` (decoded and produced again with the source's codec): one stream in a fresh
  group, in this process, mirroring the source topic from its start to a new target topic. It
  is timed from its first sets sent until the target acknowledged all N messages, over the
  messages sent after those first sets: its set-up is left out, as the clients'
  measurements start with their connections and metadata ready. ``join_time_ms`` is the
  group's join (start to assignment), ``start_time_ms`` the assignment to the first sets sent
  (offsets, the first fetch, the target's metadata). A run so small that the first sets hold
  every message is timed from the assignment. The pass-through line carries
  ``ratio_to_slower_client`` -- its msgs/s over the slower of the consumer and the producer,
  the reference the mirror aims at (>= 0.7) -- and ``ratio_to_recompress`` (lz4: >= 3); both
  ratios are the same for MB/s, the bytes being the same.

Each case runs ``--rounds`` times (3; 1 in a quick run), the rounds of the four measurements
interleaved, and the fastest round of each is reported: the machine may be shared, and a busy
moment then shows as a slower round rather than as a slower client. MB/s counts value bytes, in
units of 10**6. Both brokers are started here (standalone, each in
its own temporary directory) and stopped at the end; every case's topics are deleted after it.
``--profile`` runs the lz4 pass-through mirror at 100 B under cProfile and prints the functions
that take the most time to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.codec import emit
from benchmarks.servers import start_odradek
from benchmarks.throughput import fill
from client import Admin, Consumer, TopicPartition
from client.offsets import LATEST
from protocol.compression import Codec
from tooling.mirror.naming import Renaming, TopicSelection
from tooling.mirror.runner import Mirror, MirrorOptions
from tooling.mirror.stream import StreamConfig

PARTITIONS = 4
VALUE_BYTES = (100, 1024)
CODECS = ("none", "lz4")
ACKS = "all"  # the mirror's default
DEADLINE_S = 300.0
_WATCH_INTERVAL_S = 0.002  # how often the clock looks at the mirror's acknowledged count


@dataclass(frozen=True)
class Clusters:
    source: str
    target: str


@contextmanager
def clusters() -> Iterator[Clusters]:
    """Two standalone brokers, each in a temporary directory of its own."""
    with tempfile.TemporaryDirectory(prefix="odradek-bench-mirror-") as tmp, ExitStack() as stack:
        source = stack.enter_context(start_odradek(Path(tmp) / "source"))
        target = stack.enter_context(start_odradek(Path(tmp) / "target"))
        yield Clusters(source.address, target.address)


def new_topic(admin: Admin, name: str) -> str:
    topic = f"bench-mirror-{name}-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic, partitions=PARTITIONS)
    return topic


def log_end(admin: Admin, topic: str) -> int:
    """Messages in ``topic``: the sum of its partitions' log ends (nothing is deleted)."""
    ends = admin.list_offsets({TopicPartition(topic, p): LATEST for p in range(PARTITIONS)})
    return sum(found.offset for found in ends.values())


def consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds for one ``Consumer.poll`` loop to read ``count`` messages from the start."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10_000) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.position(tp)
        seen = 0
        deadline = time.monotonic() + DEADLINE_S
        start = time.perf_counter()
        while seen < count and time.monotonic() < deadline:
            seen += len(consumer.poll(timeout_ms=1000))
        seconds = time.perf_counter() - start
    if seen < count:
        raise SystemExit(f"the consumer read {seen} of {count} messages of {topic}")
    return seconds


class _Assigned:
    """When the mirror's stream was assigned its partitions (its ``mirror: stream-0 mirrors
    ...`` note): the mirror is timed from there, its group's join counted apart. Every note
    goes on to stderr."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, note: str) -> None:
        if self.at is None and " mirrors " in note:
            self.at = time.perf_counter()
        print(note, file=sys.stderr, flush=True)


def _enabling(profiler: cProfile.Profile) -> Any:
    """A profile hook for threads started from now on: the first event of each enables
    ``profiler`` in that thread (cProfile profiles only the threads that enable it). Only the
    stream's own thread may run code under it, one profiler to a thread."""

    def hook(frame: Any, event: str, arg: Any) -> None:
        if threading.current_thread().name.startswith("mirror-stream-"):
            profiler.enable()
        else:
            sys.setprofile(None)

    return hook


@dataclass(frozen=True)
class MirrorTiming:
    """A mirror's run in three parts. The rate is the copy's: its clients' set-up is left out,
    as the clients' own measurements start with their connections and metadata ready."""

    join_s: float  # start to the stream's assignment
    start_s: float  # assignment to its first sets sent (offsets, first fetch, target metadata)
    copy_s: float  # from there until the target acknowledged every message
    copied: int  # the messages sent after the first sets: those the copy's time is for


def mirror(clusters: Clusters, topic: str, count: int, recompress: Codec | None,
           profiler: cProfile.Profile | None = None) -> tuple[MirrorTiming, str]:
    """Mirror ``topic`` (``count`` messages) from its start with one stream in a fresh group
    until the target acknowledged all of them; the timing and the target topic."""
    mode = "passthrough" if recompress is None else f"recompress-{recompress.name.lower()}"
    target_suffix = f"{mode}-{uuid.uuid4().hex[:8]}"
    options = MirrorOptions(
        stream=StreamConfig(clusters.source, clusters.target,
                            group=f"bench-mirror-{uuid.uuid4().hex[:8]}", recompress=recompress),
        selection=TopicSelection(names=frozenset({topic})),
        renaming=Renaming("{topic}." + target_suffix),
        progress_interval=0,
    )
    assigned = _Assigned()
    runner = Mirror(options, assigned)
    progress = runner.progress
    stop = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            runner.run(stop.is_set)
        except BaseException as exc:  # raised below, in the measuring thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="bench-mirror")
    if profiler is not None:
        threading.setprofile(_enabling(profiler))  # the stream's thread starts after this one
    try:
        start = time.perf_counter()
        thread.start()
        deadline = time.monotonic() + DEADLINE_S
        first: tuple[float, int] | None = None  # when the first sets were seen sent, and theirs
        while progress.acknowledged < count:
            if first is None and progress.topics:
                first = (time.perf_counter(), progress.totals()[0])
            if not thread.is_alive() or time.monotonic() > deadline:
                raise SystemExit(f"the mirror ({mode}) stopped after {progress.acknowledged} of "
                                 f"{count} messages: {failed[0] if failed else 'timed out'}")
            time.sleep(_WATCH_INTERVAL_S)  # a clock's resolution; the mirror runs meanwhile
        done = time.perf_counter()
    finally:
        stop.set()
        thread.join()
        threading.setprofile(None)
    if failed:
        raise failed[0]
    if assigned.at is None or first is None:
        raise SystemExit(f"the mirror ({mode}) logged no assignment or sent nothing")
    sent_at, sent = first
    if sent < count:
        timing = MirrorTiming(assigned.at - start, sent_at - assigned.at, done - sent_at,
                              count - sent)
    else:  # all in the first sets (a tiny run): timed from the assignment, set-up included
        timing = MirrorTiming(assigned.at - start, sent_at - assigned.at, done - assigned.at,
                              count)
    return timing, f"{topic}.{target_suffix}"


@dataclass
class Best:
    """The fastest of a measurement's rounds: on a shared machine a busy moment shows as a
    slower round, not as a slower client (benchmarks/codec.py does the same)."""

    msgs_per_s: float = 0.0
    timing: MirrorTiming | None = None  # the mirror's, of that round

    def add(self, messages: int, seconds: float, timing: MirrorTiming | None = None) -> None:
        if messages / seconds > self.msgs_per_s:
            self.msgs_per_s, self.timing = messages / seconds, timing

    def line(self, value_bytes: int) -> dict[str, Any]:
        line: dict[str, Any] = {"msgs_per_s": round(self.msgs_per_s),
                                "mb_per_s": round(self.msgs_per_s * value_bytes / 1e6, 1)}
        if self.timing is not None:
            line.update(join_time_ms=round(self.timing.join_s * 1000, 1),
                        start_time_ms=round(self.timing.start_s * 1000, 1))
        return line


def mirror_case(clusters: Clusters, codec: str, value_bytes: int, count: int, rounds: int,
                profiler: cProfile.Profile | None) -> None:
    """One codec and value size: fill the source, then ``rounds`` rounds of the two clients
    and the two mirrors, each on topics of its own; their lines, then the topics deleted."""
    params = {"codec": codec, "value_bytes": value_bytes, "messages": count,
              "partitions": PARTITIONS, "rounds": rounds}
    consumed, produced, passthrough, recompressed = Best(), Best(), Best(), Best()
    with Admin(clusters.source) as source, Admin(clusters.target) as target:
        topic = new_topic(source, f"{codec}-{value_bytes}")
        fill(clusters.source, topic, count, codec, ACKS, value_bytes)
        if (stored := log_end(source, topic)) != count:
            raise SystemExit(f"the source topic holds {stored} messages, not {count}")
        for round_ in range(rounds):
            consumed.add(count, consume(clusters.source, topic, count))
            produced_topic = new_topic(target, f"produce-{codec}-{value_bytes}")
            produced.add(count, fill(clusters.target, produced_topic, count, codec, ACKS,
                                     value_bytes))
            target.delete_topic(produced_topic)
            for best, recompress in ((passthrough, None), (recompressed, Codec.parse(codec))):
                timing, mirrored = mirror(clusters, topic, count, recompress,
                                          profiler if round_ == 0 and recompress is None else None)
                if (stored := log_end(target, mirrored)) != count:
                    raise SystemExit(f"the target topic {mirrored} holds {stored} messages, "
                                     f"not {count}")
                target.delete_topic(mirrored)
                best.add(timing.copied, timing.copy_s, timing)
        source.delete_topic(topic)
    slower = min(consumed.msgs_per_s, produced.msgs_per_s)
    emit({"bench": "consumer", **params, **consumed.line(value_bytes)})
    emit({"bench": "producer", **params, "acks": ACKS, **produced.line(value_bytes)})
    emit({"bench": "mirror", "mode": "passthrough", **params, **passthrough.line(value_bytes),
          "ratio_to_slower_client": round(passthrough.msgs_per_s / slower, 3),
          "ratio_to_recompress": round(passthrough.msgs_per_s / recompressed.msgs_per_s, 3)})
    emit({"bench": "mirror", "mode": "recompress", **params, **recompressed.line(value_bytes),
          "ratio_to_slower_client": round(recompressed.msgs_per_s / slower, 3)})


def counts(messages: int | None, quick: bool) -> dict[int, int]:
    """Messages per value size: 1 KiB values get a fifth as many (the same order of MB)."""
    base = messages or (4_000 if quick else 1_000_000)
    return {size: base if size == 100 else max(base // 5, 1) for size in VALUE_BYTES}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mirror", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4,000 messages of 100 B a case")
    parser.add_argument("--messages", type=int,
                        help="messages of 100 B a case (default 1,000,000; 1 KiB: a fifth)")
    parser.add_argument("--rounds", type=int,
                        help="rounds of each measurement, the best reported (default 3; quick 1)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the lz4 pass-through mirror at 100 B")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    profiler = cProfile.Profile() if args.profile else None
    with clusters() as both:
        for value_bytes, count in counts(args.messages, args.quick).items():
            for codec in CODECS:
                profiling = profiler if codec == "lz4" and value_bytes == 100 else None
                mirror_case(both, codec, value_bytes, count, rounds, profiling)
    if profiler is not None:
        print("--- lz4 pass-through mirror, 100 B (cProfile, by own time)", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
