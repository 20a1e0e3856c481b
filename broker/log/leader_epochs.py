"""Which leader epoch wrote which offsets of a partition: the leader-epoch cache (KIP-101).

Each entry ``(epoch, start_offset)`` says that the leader of ``epoch`` wrote the offsets from
``start_offset`` up to the start of the next entry (or the log end). A follower that comes back
asks its leader where its own latest epoch ends (OffsetsForLeaderEpoch) and truncates there,
instead of to its high watermark, which loses or forks data when leaders change quickly (KIP-101;
DESIGN.md: "never by high watermark alone").

Message format v1 has no leader-epoch field per entry, so this cache, persisted as
``leader-epoch-checkpoint`` in the partition directory (seed 003; Kafka's format: version 0,
the entry count, then ``epoch start_offset`` lines), is the only record of it. It is rewritten
atomically and fsynced on every change, which only happens when the leader changes, the log is
truncated or retention moves the log start.

The semantics are Kafka's ``LeaderEpochFileCache`` of KIP-101/KIP-279 (Kafka 2.0): ``assign``
ignores an epoch that is not newer than the latest or a start offset below the latest's, and
``end_offset_for`` answers UNDEFINED for an epoch below the first one (so the follower knows the
leader cannot say). The methods are thread-safe; ``PartitionLog`` calls them under its own lock,
so that the cache and the log change together.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import structlog

from broker.log import layout
from broker.log.errors import CorruptCheckpointError

log = structlog.get_logger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int  # the first offset written in this epoch


class LeaderEpochCache:
    """The ``(epoch, start_offset)`` entries of one partition, epochs and start offsets
    increasing, kept in ``path`` (``leader-epoch-checkpoint``)."""

    def __init__(self, path: Path, entries: Iterable[EpochEntry] = ()) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            if (
                epoch < 0
                or start < 0
                or (self._epochs and (epoch <= self._epochs[-1] or start < self._starts[-1]))
            ):
                raise ValueError(
                    f"{path}: entry ({epoch}, {start}) does not follow "
                    f"{list(zip(self._epochs, self._starts, strict=True))}"
                )
            self._epochs.append(epoch)
            self._starts.append(start)

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """The cache stored in ``path``, empty when the file does not exist. A malformed file
        raises ``CorruptCheckpointError``."""
        rows = layout.read_checkpoint(path, 2) or []
        try:
            return cls(path, [EpochEntry(int(epoch), int(start)) for epoch, start in rows])
        except ValueError as exc:
            raise CorruptCheckpointError(f"{path}: bad entries: {exc}") from None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        with self._lock:
            return tuple(map(EpochEntry, self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, UNDEFINED_EPOCH (-1) when there is none: what a follower sends in
        OffsetsForLeaderEpoch."""
        with self._lock:
            return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Ignored (False) when ``epoch`` is
        not newer than the latest epoch, or ``start_offset`` is below the latest start offset:
        an epoch's start, once recorded, does not move (Kafka 2.0's ``assign``). Returns
        whether the cache changed; a change is on disk when it returns."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} and start offset {start_offset} must be >= 0")
        with self._lock:
            if self._epochs and (epoch <= self._epochs[-1] or start_offset < self._starts[-1]):
                if epoch > self._epochs[-1]:
                    log.warning(
                        "log.leader_epoch.ignored",
                        path=str(self._path),
                        epoch=epoch,
                        start_offset=start_offset,
                        latest=(self._epochs[-1], self._starts[-1]),
                    )
                return False
            self._epochs.append(epoch)
            self._starts.append(start_offset)
            self._write()
        log.info(
            "log.leader_epoch.assigned",
            path=str(self._path),
            epoch=epoch,
            start_offset=start_offset,
        )
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for OffsetsForLeaderEpoch (KIP-279): the largest epoch at or
        below ``requested_epoch`` and the start offset of the next larger epoch -- or
        ``log_end_offset`` when ``requested_epoch`` is the latest. UNDEFINED ``(-1, -1)`` when
        the cache is empty, or ``requested_epoch`` is below the first epoch or above the latest
        (or is UNDEFINED_EPOCH itself)."""
        with self._lock:
            epochs = self._epochs
            if requested_epoch < 0 or not epochs or requested_epoch > epochs[-1]:
                return UNDEFINED
            if requested_epoch == epochs[-1]:
                return requested_epoch, log_end_offset
            following = bisect_right(epochs, requested_epoch)  # the first larger epoch
            if not following:
                return UNDEFINED
            return epochs[following - 1], self._starts[following]

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log now ends at ``end_offset``: drop every entry starting at or after it (those
        epochs wrote nothing that is left). A negative ``end_offset`` changes nothing."""
        with self._lock:
            keep = len(self._starts)
            while keep and self._starts[keep - 1] >= end_offset >= 0:
                keep -= 1
            if keep == len(self._starts):
                return False
            removed = list(zip(self._epochs[keep:], self._starts[keep:], strict=True))
            del self._epochs[keep:], self._starts[keep:]
            self._write()
        log.info(
            "log.leader_epoch.truncated_from_end",
            path=str(self._path),
            end_offset=end_offset,
            removed=removed,
        )
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset`` (retention deleted segments): drop the entries
        wholly below it and move the start of the epoch that holds it up to ``start_offset``.
        An entry starting at ``start_offset`` stays as it is."""
        with self._lock:
            holder = bisect_right(self._starts, start_offset) - 1  # the epoch holding it
            if holder < 0 or (holder == 0 and self._starts[0] == start_offset):
                return False
            removed = list(zip(self._epochs[:holder], self._starts[:holder], strict=True))
            del self._epochs[:holder], self._starts[:holder]
            self._starts[0] = start_offset
            self._write()
        log.info(
            "log.leader_epoch.truncated_from_start",
            path=str(self._path),
            start_offset=start_offset,
            removed=removed,
        )
        return True

    def clear(self) -> bool:
        """Drop every entry (the log was emptied: ``truncate_fully_and_start_at``)."""
        with self._lock:
            if not self._epochs:
                return False
            self._epochs.clear()
            self._starts.clear()
            self._write()
        return True

    def _write(self) -> None:
        layout.write_checkpoint(self._path, list(zip(self._epochs, self._starts, strict=True)))

    def __repr__(self) -> str:
        return f"LeaderEpochCache({str(self._path)!r}, {list(self.entries)})"
