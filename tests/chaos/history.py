"""What a chaos run records, one JSON-lines file per kind of record in the run's directory.

The runner and its processes append lines while the run goes on; at the end, the healed
cluster's logs, replica verdicts and groups are added. The checker reads it all back. Every
``t`` is ``time.monotonic()`` of the one machine the run uses, so the lines of every process
share one clock and can be ordered against each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

#: a partition as the history names it
TopicPartition = tuple[str, int]


@dataclass(frozen=True, kw_only=True)
class Produced:
    """One send's outcome. ``value`` is unique across the run (an integer as text), so a
    stored or delivered record can be traced back to the one send that made it."""

    FILE: ClassVar[str] = "produced.jsonl"
    t: float
    producer: str
    topic: str
    partition: int
    value: str
    acked: bool
    offset: int | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Consumed:
    """One record a consumer processed, with the generation it believed it was in."""

    FILE: ClassVar[str] = "consumed.jsonl"
    t: float
    group: str
    member: str
    generation: int
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, kw_only=True)
class Owned:
    """What a member owns from ``t`` until its next line: written after each assignment or
    revocation callback, and (``owned`` empty, ``ended`` set) when the member closes or is
    killed -- for a killed member the runner writes that line at the kill."""

    FILE: ClassVar[str] = "owned.jsonl"
    t: float
    group: str
    member: str
    generation: int
    owned: tuple[TopicPartition, ...]
    ended: Literal["killed", "closed"] | None = None

    def __post_init__(self) -> None:
        if self.ended is not None and self.owned:
            raise ValueError(f"a member that {self.ended} owns nothing, not {self.owned}")


@dataclass(frozen=True, kw_only=True)
class Commit:
    """An offset commit the coordinator acknowledged (refused commits are not recorded): sent
    at ``sent`` with ``generation``, its answer read at ``t``. The coordinator took it at some
    moment between the two."""

    FILE: ClassVar[str] = "commits.jsonl"
    t: float
    group: str
    member: str
    generation: int
    topic: str
    partition: int
    offset: int
    sent: float | None = None


@dataclass(frozen=True, kw_only=True)
class Fault:
    """A fault's start or end, so violations can be read against what was going on."""

    FILE: ClassVar[str] = "faults.jsonl"
    t: float
    fault: str
    target: str
    phase: Literal["start", "end"]
    detail: str | None = None


@dataclass(frozen=True, kw_only=True)
class FinalLog:
    """A partition as a fresh consumer reads it after the cluster healed: every
    ``(offset, value)`` from the log start to the high watermark."""

    FILE: ClassVar[str] = "final_logs.jsonl"
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    records: tuple[tuple[int, str], ...]


@dataclass(frozen=True, kw_only=True)
class ReplicaVerdict:
    """Whether every replica of a partition holds the same bytes below the high watermark.
    A plain record, so the checker does not depend on the tool that compares replicas."""

    FILE: ClassVar[str] = "replicas.jsonl"
    topic: str
    partition: int
    agree: bool
    first_difference: str | None = None
    unanswered: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GroupOutcome:
    """A group as described after the cluster healed, next to the live members the runner
    expects in it (named as ``members`` names them), and the partitions whose committed
    offset stayed short of the log's end once the producers had stopped: ``(topic,
    partition, committed, end)``, committed -1 for none."""

    FILE: ClassVar[str] = "groups.jsonl"
    group: str
    state: str
    generation: int
    members: tuple[str, ...]
    expected_members: tuple[str, ...]
    behind: tuple[tuple[str, int, int, int], ...] = ()


@dataclass(frozen=True, kw_only=True)
class StaleMetadata:
    """After the cluster healed, a broker whose Metadata still named another leader (or leader
    epoch) for a partition than ZooKeeper's state says: clients asking it are sent to the wrong
    broker. Only disagreements are written."""

    FILE: ClassVar[str] = "metadata.jsonl"
    broker: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    zookeeper_leader: int
    zookeeper_leader_epoch: int


Record = (Produced | Consumed | Owned | Commit | Fault | FinalLog | ReplicaVerdict | GroupOutcome
          | StaleMetadata)
R = TypeVar("R", Produced, Consumed, Owned, Commit, Fault, FinalLog, ReplicaVerdict, GroupOutcome,
            StaleMetadata)
RECORD_KINDS: tuple[type[Record], ...] = (
    Produced, Consumed, Owned, Commit, Fault, FinalLog, ReplicaVerdict, GroupOutcome,
    StaleMetadata)


@dataclass(frozen=True, kw_only=True)
class History:
    """A whole run, in memory: what the checker reads."""

    produced: tuple[Produced, ...] = ()
    consumed: tuple[Consumed, ...] = ()
    owned: tuple[Owned, ...] = ()
    commits: tuple[Commit, ...] = ()
    faults: tuple[Fault, ...] = ()
    final_logs: tuple[FinalLog, ...] = ()
    replicas: tuple[ReplicaVerdict, ...] = ()
    groups: tuple[GroupOutcome, ...] = ()
    metadata: tuple[StaleMetadata, ...] = ()


#: History's field for each kind of record
_HISTORY_FIELDS: dict[type[Record], str] = {
    Produced: "produced", Consumed: "consumed", Owned: "owned", Commit: "commits",
    Fault: "faults", FinalLog: "final_logs", ReplicaVerdict: "replicas", GroupOutcome: "groups",
    StaleMetadata: "metadata",
}


def to_line(record: Record) -> str:
    """The record as one JSON line (no newline); tuples become lists."""
    return json.dumps(asdict(record), separators=(",", ":"))


def from_line(kind: type[R], line: str) -> R:
    """A record of ``kind`` from its JSON line. A key the record does not have is an error:
    a field the checker silently ignored would be a check silently skipped."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError(f"{kind.FILE}: not a JSON object: {line!r}")
    unknown = data.keys() - {f.name for f in fields(kind)}
    if unknown:
        raise ValueError(f"{kind.FILE}: unknown keys {sorted(unknown)} in {line!r}")
    return kind(**{key: _tuples(value) for key, value in data.items()})


def _tuples(value: Any) -> Any:
    """JSON's lists as tuples, at every depth, so records stay hashable and compare equal."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


def append_record(run_dir: Path, record: Record) -> None:
    """Append one record to its kind's file. One ``write`` of a whole line to a file opened
    for appending, so lines from several processes do not interleave."""
    line = (to_line(record) + "\n").encode()
    fd = os.open(run_dir / record.FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def write_records(path: Path, records: Iterable[Record]) -> None:
    """Write a whole file of records (the end-of-run files, and tests)."""
    path.write_text("".join(to_line(record) + "\n" for record in records), "utf-8")


def read_records(path: Path, kind: type[R]) -> Iterator[R]:
    """The records of one file, in file order; a missing file holds none."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield from_line(kind, line)


def write_history(run_dir: Path, history: History) -> None:
    """Every kind of record to its file in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for kind, name in _HISTORY_FIELDS.items():
        write_records(run_dir / kind.FILE, getattr(history, name))


def read_history(run_dir: Path) -> History:
    """A run's directory, read back whole."""
    return History(
        produced=tuple(read_records(run_dir / Produced.FILE, Produced)),
        consumed=tuple(read_records(run_dir / Consumed.FILE, Consumed)),
        owned=tuple(read_records(run_dir / Owned.FILE, Owned)),
        commits=tuple(read_records(run_dir / Commit.FILE, Commit)),
        faults=tuple(read_records(run_dir / Fault.FILE, Fault)),
        final_logs=tuple(read_records(run_dir / FinalLog.FILE, FinalLog)),
        replicas=tuple(read_records(run_dir / ReplicaVerdict.FILE, ReplicaVerdict)),
        groups=tuple(read_records(run_dir / GroupOutcome.FILE, GroupOutcome)),
        metadata=tuple(read_records(run_dir / StaleMetadata.FILE, StaleMetadata)),
    )
