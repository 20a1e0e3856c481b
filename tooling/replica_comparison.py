"""Comparing the replicas of one partition entry by entry, as stored: offsets, CRCs, bytes.

Each replica's stored message sets are cut into whole entries (protocol.entry_scan, no
decoding: a compressed wrapper is one entry, with the offset of its last message), and the
N-th entry of every replica is compared with the N-th of the reference replica (the leader,
when it answered). The first entry that differs is the verdict: its offsets differ, or its
stored CRCs, or -- same offset and CRC -- its bytes (one copy is damaged: which one fails
its CRC is said). A copy that ends, or turns malformed, where the others go on is missing
entries. Copies are compared as they arrive (``ReplicaCopy.feed`` a chunk at a time), so a
partition of any size needs a chunk per replica in memory, not its whole log.

Sans-IO: tooling/replica_verification.py reads the replicas from the brokers; tests and the
history checker of a chaos run may feed it bytes from anywhere (``compare_message_sets``).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from protocol.entry_scan import scan_entries
from protocol.messageset import LOG_OVERHEAD, crc32

_CRC = struct.Struct(">I")
_OFFSET = struct.Struct(">q")
_CRC_AT = LOG_OVERHEAD  # the stored CRC follows the offset and the size
_CRC_FROM = LOG_OVERHEAD + 4  # the CRC covers the entry from its magic byte on


class DifferenceKind(StrEnum):
    OFFSET = "offset"  # the copies hold different offsets at the same place
    CRC = "crc"  # same offset, different stored CRCs (different messages)
    BYTES = "bytes"  # same offset and stored CRC, different bytes: a copy is damaged
    MISSING = "missing"  # a copy ends where another goes on
    MALFORMED = "malformed"  # a copy holds an entry that is not well formed


@dataclass(frozen=True)
class StoredEntry:
    """One whole entry of a replica's log, as stored."""

    offset: int  # for a compressed wrapper, its last message's
    crc: int  # as stored
    data: bytes | memoryview  # the whole entry, its offset and size included

    @property
    def crc_holds(self) -> bool:
        return crc32(self.data[_CRC_FROM:]) == self.crc


@dataclass(frozen=True)
class Difference:
    """The first place where the copies of a partition differ."""

    offset: int
    kind: DifferenceKind
    #: the reference replica first, then each replica whose copy differs from it there
    brokers: tuple[int, ...]
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"offset": self.offset, "kind": str(self.kind), "brokers": list(self.brokers),
                "detail": self.detail}

    def __str__(self) -> str:
        brokers = ",".join(map(str, self.brokers))
        return f"offset {self.offset} ({self.kind}, brokers {brokers}): {self.detail}"


class ReplicaCopy:
    """The entries of one replica read so far and not compared yet, from ``start`` (the
    entry holding it) up to ``end`` (exclusive; an entry whose offset reaches it is left out,
    as is a wrapper straddling it)."""

    def __init__(self, broker_id: int, start: int, end: int) -> None:
        self.broker_id = broker_id
        self.end = end
        #: where the next read starts: just past the last whole entry taken
        self.next_offset = start
        self.pending: deque[StoredEntry] = deque()
        #: no entry below ``end`` will follow the pending ones
        self.finished = start >= end
        #: why the entry after the pending ones is not well formed (then ``finished``)
        self.malformed: str | None = None

    def feed(self, records: bytes | memoryview) -> bool:
        """Take the whole entries of a chunk read at ``next_offset``; an empty chunk means the
        replica has no more. False when the chunk holds no whole entry at all (its first
        entry is larger than the chunk: read again with more bytes)."""
        if self.finished:
            return True
        if not records:
            self.finished = True
            return True
        view = memoryview(records)
        scan = scan_entries(view, verify_crc=False)
        taken = False
        for position, offset, size in zip(scan.positions, scan.offsets, scan.sizes,
                                          strict=True):
            if offset < self.next_offset:
                if not taken:
                    continue  # a read begins at the entry holding its offset, or before
                self.malformed = f"offset {offset} does not follow offset {self.next_offset - 1}"
                self.finished = True
                return True
            if offset >= self.end:
                self.finished = True
                return True
            (crc,) = _CRC.unpack_from(view, position + _CRC_AT)
            self.pending.append(StoredEntry(offset, crc, view[position:position + size]))
            self.next_offset = offset + 1
            taken = True
        if scan.error is not None:
            at = _OFFSET.unpack_from(view, scan.end)[0] if scan.end + 8 <= len(view) else None
            where = f" (its offset field says {at})" if at is not None else ""
            self.malformed = f"{scan.error}{where}"
            self.finished = True
            return True
        if self.next_offset >= self.end:
            self.finished = True
        return taken or self.finished

    @property
    def exhausted(self) -> bool:
        """Finished, and every entry taken compared."""
        return self.finished and not self.pending


class PartitionComparison:
    """The copies of one partition, compared entry by entry as they are fed."""

    def __init__(self, copies: Mapping[int, ReplicaCopy], reference: int | None = None) -> None:
        self.copies = dict(copies)
        self._reference = reference
        self.compared = 0  # entries found equal in every copy
        self.difference: Difference | None = None

    @property
    def reference(self) -> int:
        """The copy the others are held to: the one asked for while it is here, else the
        lowest broker id."""
        if self._reference in self.copies:
            return self._reference
        return min(self.copies)

    @property
    def done(self) -> bool:
        return self.difference is not None or all(c.exhausted for c in self.copies.values())

    def wanted(self) -> list[int]:
        """The replicas to read next: those with nothing left to compare and more to come."""
        if self.done:
            return []
        return [b for b, c in sorted(self.copies.items()) if not c.pending and not c.finished]

    def drop(self, broker_id: int) -> None:
        """A replica that stopped answering: compare the others without it."""
        self.copies.pop(broker_id, None)
        if self.copies:
            self.step()

    def step(self) -> Difference | None:
        """Compare every entry that all copies have; the first difference, once found."""
        if self.difference is not None or not self.copies:
            return self.difference
        copies = self.copies
        reference = self.reference
        while all(c.pending for c in copies.values()):
            ours = copies[reference].pending[0]
            differing = [b for b, c in sorted(copies.items())
                         if b != reference and c.pending[0].data != ours.data]
            if differing:
                theirs = {b: copies[b].pending[0] for b in differing}
                self.difference = _entry_difference(reference, ours, theirs)
                return self.difference
            for c in copies.values():
                c.pending.popleft()
            self.compared += 1
        ended = [b for b, c in sorted(copies.items()) if c.exhausted]
        going_on = [b for b, c in sorted(copies.items()) if c.pending]
        if ended and going_on:
            self.difference = self._missing(reference, ended, going_on)
        return self.difference

    def _missing(self, reference: int, ended: list[int], going_on: list[int]) -> Difference:
        offset = min(self.copies[b].pending[0].offset for b in going_on)
        others = ended if reference in going_on else going_on
        malformed = [b for b in ended if self.copies[b].malformed is not None]
        if malformed:
            why = "; ".join(f"broker {b}: {self.copies[b].malformed}" for b in malformed)
            return Difference(offset, DifferenceKind.MALFORMED, (reference, *others),
                              f"where brokers {_ids(going_on)} hold the entry at offset "
                              f"{offset}, the copy of {_named(malformed)} is not well formed "
                              f"({why})")
        return Difference(offset, DifferenceKind.MISSING, (reference, *others),
                          f"{_named(ended)} {_have(ended)} no entry at offset {offset}, where "
                          f"{_named(going_on)} {_have(going_on)} one: the copy ends there")


def _entry_difference(reference: int, ours: StoredEntry, theirs: Mapping[int, StoredEntry]
                      ) -> Difference:
    """How the entries at one place differ: offsets first, then stored CRCs, then bytes."""
    brokers = (reference, *theirs)
    if any(e.offset != ours.offset for e in theirs.values()):
        offset = min(ours.offset, *(e.offset for e in theirs.values()))
        held = ", ".join(f"broker {b} offset {e.offset}"
                         for b, e in [(reference, ours), *theirs.items()])
        return Difference(offset, DifferenceKind.OFFSET, brokers,
                          f"the copies hold different offsets at the same place: {held}")
    described = "; ".join(_described(b, e) for b, e in [(reference, ours), *theirs.items()])
    if any(e.crc != ours.crc for e in theirs.values()):
        return Difference(ours.offset, DifferenceKind.CRC, brokers,
                          f"the stored CRCs differ: {described}")
    first = min(_first_byte_apart(ours.data, e.data) for e in theirs.values())
    return Difference(ours.offset, DifferenceKind.BYTES, brokers,
                      f"same offset and stored CRC, the bytes differ from byte {first} of "
                      f"the entry on: {described}")


def _described(broker_id: int, entry: StoredEntry) -> str:
    holds = "holds" if entry.crc_holds else "FAILS over its bytes"
    return f"broker {broker_id} {len(entry.data)} bytes, CRC {entry.crc:#010x} {holds}"


def _first_byte_apart(a: bytes | memoryview, b: bytes | memoryview) -> int:
    a, b = bytes(a), bytes(b)
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def _ids(brokers: list[int]) -> str:
    return ",".join(map(str, brokers))


def _named(brokers: list[int]) -> str:
    return f"broker {brokers[0]}" if len(brokers) == 1 else f"brokers {_ids(brokers)}"


def _have(brokers: list[int]) -> str:
    return "has" if len(brokers) == 1 else "have"


def compare_message_sets(sets: Mapping[int, bytes], *, end: int, start: int = 0,
                         reference: int | None = None) -> PartitionComparison:
    """Compare whole copies at once: ``{broker: its stored entries from start on}``, up to
    ``end``. The comparison's ``difference`` is None when they agree, and ``compared``
    counts the entries found equal."""
    copies = {}
    for broker_id, data in sets.items():
        copy = ReplicaCopy(broker_id, start, end)
        copy.feed(data)
        copy.feed(b"")  # that was all of it
        copies[broker_id] = copy
    comparison = PartitionComparison(copies, reference)
    comparison.step()
    return comparison
