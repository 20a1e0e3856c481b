"""Replica verification (Kafka's kafka-replica-verification): every replica of each partition,
read from its own broker, compared entry by entry as stored -- offsets, CRCs, bytes.

For each partition, each live replica is first asked where its log starts and where its high
watermark is (a debugging fetch of no bytes: client.replica_reads). The copies are compared
from the highest log start to the lowest high watermark among the replicas that answered:
below every high watermark, so every copy should hold the same entries there. A follower
learns the high watermark from its next fetch, so its own can lag the leader's by one fetch;
the range compared is that of the replica furthest behind, and what came later is not
looked at. Then each replica is read a chunk at a time and fed to the comparison
(tooling/replica_comparison.py) until the first difference or the end of the range.

A replica whose broker is not live, cannot be reached, or answers with an error is reported
as not answering, not as a difference; the others are compared without it. The verdict is
a snapshot: a partition written to meanwhile is compared up to the high watermarks it had
when its turn came. Topics with ``cleanup_policy=compact`` are compacted by each broker on
its own schedule, so their copies may differ where one replica has been cleaned and another
not yet; internal topics (compacted) are left out unless named.

``verify_replicas`` is what the ``odradek cluster verify-replicas`` command prints and what a
chaos run's history checker calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Unpack

from client.admin import Admin
from client.metadata import PartitionInfo
from client.records import TopicPartition
from client.replica_reads import ReplicaRead
from client.security import SecurityOptions
from protocol.errors import ErrorCode, OdradekError
from tooling.replica_comparison import (
    Difference,
    PartitionComparison,
    ReplicaCopy,
)

#: how much of one replica each read asks for
DEFAULT_CHUNK_BYTES = 1 << 20
#: an entry larger than this is not read (the broker's default max_request_bytes is 100 MiB)
MAX_CHUNK_BYTES = 128 << 20


class VerdictStatus(StrEnum):
    OK = "ok"  # every replica answered and every copy agrees
    DIFFERS = "differs"  # two copies differ (``difference`` says where)
    INCOMPLETE = "incomplete"  # no difference among the copies read, but a replica did not answer


@dataclass(frozen=True)
class ReplicaState:
    """One replica as verification saw it: its range, or why it could not be read."""

    broker_id: int
    high_watermark: int | None = None
    log_start_offset: int | None = None
    #: why this replica was not read (or not to the end); None when it was
    not_answering: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker_id, "high_watermark": self.high_watermark,
                "log_start_offset": self.log_start_offset, "not_answering": self.not_answering}


@dataclass(frozen=True)
class PartitionVerdict:
    """What verification found for one partition."""

    topic: str
    partition: int
    leader: int  # -1: none
    #: every assigned replica, in the assignment's order
    replicas: tuple[ReplicaState, ...]
    #: the range compared: [start_offset, end_offset), the highest log start and the lowest
    #: high watermark among the replicas that answered (-1, -1 when none did)
    start_offset: int
    end_offset: int
    entries: int  # entries found equal in every copy compared
    difference: Difference | None

    @property
    def status(self) -> VerdictStatus:
        if self.difference is not None:
            return VerdictStatus.DIFFERS
        if self.not_answering:
            return VerdictStatus.INCOMPLETE
        return VerdictStatus.OK

    @property
    def ok(self) -> bool:
        return self.status is VerdictStatus.OK

    @property
    def compared(self) -> tuple[int, ...]:
        """The brokers whose copies were compared to the end (or to the difference)."""
        return tuple(r.broker_id for r in self.replicas if r.not_answering is None)

    @property
    def not_answering(self) -> dict[int, str]:
        return {r.broker_id: r.not_answering for r in self.replicas
                if r.not_answering is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "status": str(self.status),
            "leader": self.leader, "replicas": [r.to_json() for r in self.replicas],
            "start_offset": self.start_offset, "end_offset": self.end_offset,
            "entries": self.entries,
            "difference": None if self.difference is None else self.difference.to_json(),
        }


class Progress(NamedTuple):
    """Where a run is: the partition being compared (``number`` of ``partitions``, from 1)
    and how far its comparison has come."""

    number: int
    partitions: int
    topic: str
    partition: int
    offset: int
    end_offset: int


def verify_replicas(
    bootstrap: str | Sequence[str],
    topics: Iterable[str] | None = None,
    *,
    timeout_ms: int = 30_000,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: Callable[[Progress], None] | None = None,
    **security: Unpack[SecurityOptions],
) -> list[PartitionVerdict]:
    """Compare every replica of each partition of ``topics`` (None: every topic but the
    internal ones), one verdict per partition in topic and partition order. Raises only when
    the cluster cannot be asked at all (no broker answers Metadata, a named topic does not
    exist); a replica that cannot be read is in its partition's verdict."""
    with Admin(bootstrap, client_id="odradek-replica-verification", timeout_ms=timeout_ms,
               request_timeout_ms=timeout_ms, **security) as admin:
        return verify_with(admin, topics, chunk_bytes=chunk_bytes, progress=progress)


def verify_with(
    admin: Admin,
    topics: Iterable[str] | None = None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: Callable[[Progress], None] | None = None,
) -> list[PartitionVerdict]:
    """``verify_replicas`` with an Admin client of the caller's."""
    described = admin.describe_topics(None if topics is None else list(topics))
    if topics is None:
        described = [t for t in described if not t.internal]
    live = set(admin.cluster_metadata().brokers)
    partitions = [t.partitions[p] for t in sorted(described, key=lambda t: t.name)
                  for p in sorted(t.partitions)]
    # a broker that did not answer (down, paused) is not waited for again partition by partition
    silent: dict[int, str] = {}
    return [_verify_partition(admin, info, live, silent, chunk_bytes, number, len(partitions),
                              progress)
            for number, info in enumerate(partitions, 1)]


def _verify_partition(admin: Admin, info: PartitionInfo, live: set[int], silent: dict[int, str],
                      chunk_bytes: int, number: int, count: int,
                      progress: Callable[[Progress], None] | None) -> PartitionVerdict:
    tp = TopicPartition(info.topic, info.partition)
    why: dict[int, str] = {b: "not live (Metadata lists no such broker)"
                           for b in info.replicas if b not in live}
    why |= {b: silent[b] for b in info.replicas if b in silent}
    asked = [b for b in info.replicas if b not in why]
    # where each copy starts and ends: a read of no bytes at offset 0 (out of range, it still
    # answers the range)
    probes = _read(admin, {b: (0, 0) for b in asked}, tp, why, silent, probing=True)
    ranges = {b: (r.log_start_offset, r.high_watermark) for b, r in probes.items()}
    if not ranges:
        return _verdict(info, ranges, why, -1, -1, None)
    start = max(s for s, _ in ranges.values())
    end = min(hw for _, hw in ranges.values())
    copies = {b: ReplicaCopy(b, start, end) for b in ranges}
    comparison = PartitionComparison(copies, reference=info.leader)
    sizes = dict.fromkeys(ranges, chunk_bytes)
    while not comparison.done:
        wanted = comparison.wanted()
        reads = _read(admin, {b: (copies[b].next_offset, sizes[b]) for b in wanted}, tp, why,
                      silent)
        for broker_id in wanted:
            read = reads.get(broker_id)
            if read is None:
                comparison.drop(broker_id)
            elif not copies[broker_id].feed(read.records):  # an entry larger than the chunk
                sizes[broker_id] *= 2
                if sizes[broker_id] > MAX_CHUNK_BYTES:
                    why[broker_id] = (f"its entry at offset {copies[broker_id].next_offset} is "
                                      f"larger than {MAX_CHUNK_BYTES} bytes")
                    comparison.drop(broker_id)
        comparison.step()
        if progress is not None and comparison.copies:
            at = min(c.next_offset for c in comparison.copies.values())
            progress(Progress(number, count, tp.topic, tp.partition, at, end))
    return _verdict(info, ranges, why, start, end, comparison)


def _read(admin: Admin, wanted: dict[int, tuple[int, int]], tp: TopicPartition,
          why: dict[int, str], silent: dict[int, str], *, probing: bool = False
          ) -> dict[int, ReplicaRead]:
    """Each broker's read of its replica; a broker that did not answer, or answered an
    error, is left out with the reason in ``why`` (and in ``silent`` when it did not answer
    at all). A probe takes OFFSET_OUT_OF_RANGE for an answer (it carries the range)."""
    if not wanted:
        return {}
    answers = admin.read_replicas({b: {tp: at} for b, at in wanted.items()})
    out = {}
    for broker_id, (offset, _) in wanted.items():
        answer = answers.get(broker_id)
        read = answer.get(tp) if isinstance(answer, dict) else None
        if isinstance(answer, OdradekError):
            why[broker_id] = f"did not answer: {answer}"
            silent[broker_id] = f"did not answer earlier in this run: {answer}"
        elif read is None:
            why[broker_id] = "answered without this partition"
        elif read.error is ErrorCode.NONE or (
                probing and read.error is ErrorCode.OFFSET_OUT_OF_RANGE):
            out[broker_id] = read
        elif read.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            why[broker_id] = (f"its log no longer holds offset {offset} (now from "
                              f"{read.log_start_offset}, high watermark "
                              f"{read.high_watermark}): moved during the comparison")
        else:
            why[broker_id] = f"answered {read.error.name}: {read.error.info.meaning}"
    return out


def _verdict(info: PartitionInfo, ranges: dict[int, tuple[int, int]], why: dict[int, str],
             start: int, end: int, comparison: PartitionComparison | None) -> PartitionVerdict:
    replicas = []
    for broker_id in info.replicas:
        log_start, high_watermark = ranges.get(broker_id, (None, None))
        replicas.append(ReplicaState(broker_id, high_watermark, log_start, why.get(broker_id)))
    return PartitionVerdict(
        info.topic, info.partition, info.leader, tuple(replicas), start, end,
        0 if comparison is None else comparison.compared,
        None if comparison is None else comparison.difference)


class ProgressPacer:
    """Calls ``report`` with at most one ``Progress`` every ``interval`` seconds: a long run
    says where it is without a line per read."""

    def __init__(self, report: Callable[[Progress], None], interval: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._interval = interval
        self._clock = clock
        self._next = clock() + interval

    def __call__(self, progress: Progress) -> None:
        now = self._clock()
        if now >= self._next:
            self._next = now + self._interval
            self._report(progress)
