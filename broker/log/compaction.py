"""Log compaction: keep the newest message per key in the closed segments (seed 003).

A pass has three steps. ``offset_map`` reads the dirty segments (those written since the last
pass) and records the latest offset of every key, up to ``cleaner_dedupe_buffer_bytes``: when the
map is full it stops, the pass cleans only up to the last offset it mapped, and another pass
continues from there (Kafka's dedupe buffer), so memory stays bounded however many keys.
``write_cleaned`` copies the closed segments, in groups that fit one segment, into ``.cleaned``
files, leaving out every message whose key has a newer offset and every tombstone (null value)
older than ``delete_retention_ms``; offsets are kept, so gaps appear. Entries of every magic
are cleaned alike: a v1 wrapper or a record batch that loses messages is written again around
the rest, with the same codec; a record batch keeps its offset range and producer fields, and
one left empty stays, as a header, while it is its producer's last. The caller then swaps the
cleaned segments in with one replacement of the segment list, guarded on disk by a manifest
(``finish_interrupted_swap`` completes a swap a crash interrupted), so readers and restarts see
the old segments or the new ones, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.log import layout
from broker.log.errors import CorruptSegmentError
from broker.log.index import MAX_RELATIVE_OFFSET
from broker.log.segment import Segment
from protocol import record_batch
from protocol.compression import Codec, compress
from protocol.entry_scan import entry_size_at, scan_entries
from protocol.messageset import Entry, encode_message, open_wrapper, read_entries

_WRITE_CHUNK = 1 << 20
_READ_CHUNK = 1 << 20


def dirty_ratio(closed: Sequence[Segment], cleaner_checkpoint: int) -> tuple[float, int]:
    """The share of closed-segment bytes not compacted yet, and how many bytes that is."""
    total = sum(s.size for s in closed)
    dirty = sum(s.size for s in closed if s.next_offset > cleaner_checkpoint)
    return (dirty / total if total else 0.0), dirty


def _messages(entry: Entry) -> list[Entry]:
    return open_wrapper(entry) if entry.codec is not Codec.NONE else [entry]


def stored_entries(segment: Segment) -> Iterator[tuple[int, bytes]]:
    """Every entry of ``segment`` -- v0 or v1 message, wrapper or record batch -- with its
    magic, as stored, reading in chunks."""
    pos = 0
    while pos < segment.size:
        buf = segment.file.pread(min(_READ_CHUNK, segment.size - pos), pos)
        scan = scan_entries(buf, verify_crc=False)
        if not scan.positions:  # one entry larger than a chunk, or damage
            need = entry_size_at(buf, 0)
            if need is not None and need <= segment.size - pos:
                buf = segment.file.pread(need, pos)
                scan = scan_entries(buf, verify_crc=False)
            if not scan.positions:
                raise CorruptSegmentError(
                    f"{segment.path(layout.LOG)}: no whole entry at position {pos}"
                    + (f": {scan.error}" if scan.error else ""))
        for at, size, magic in zip(scan.positions, scan.sizes, scan.magics, strict=True):
            yield magic, buf[at : at + size]
        pos += scan.end


def _keyed(magic: int, raw: bytes) -> tuple[int, list[tuple[int, bytes | None]]]:
    """The last offset an entry holds, and the offset and key of each of its messages."""
    if magic == record_batch.MAGIC:
        header = record_batch.read_batch_header(raw)
        assert header is not None  # stored whole
        records = record_batch.decode_records(raw, header)
        return header.last_offset, [(r.offset, r.key) for r in records]
    (entry,), _ = read_entries(raw)
    return entry.offset, [(m.offset, m.key) for m in _messages(entry)]


# What one key costs in the offset map, besides its bytes: a CPython dict slot, the key's bytes
# object header and the offset int (Kafka charges 24 bytes: a 16-byte hash and an 8-byte offset).
MAP_ENTRY_OVERHEAD = 100


def map_entry_bytes(key: bytes) -> int:
    """What ``key`` counts against ``cleaner_dedupe_buffer_bytes``."""
    return len(key) + MAP_ENTRY_OVERHEAD


@dataclass
class OffsetMap:
    """The latest offset of every key from ``start`` up to ``end`` (inclusive; -1: nothing
    mapped). ``full``: the map reached its bound before the dirty section's end, so a pass
    cleans only up to ``end`` and another pass continues from ``end + 1``."""

    latest: dict[bytes, int] = field(default_factory=dict)
    end: int = -1
    full: bool = False
    size_bytes: int = 0


def offset_map(dirty: Iterable[Segment], start: int = 0, max_bytes: int | None = None) -> OffsetMap:
    """The latest offset of every key in the dirty segments from offset ``start`` on, stopping
    before the first new key that would take the map past ``max_bytes`` (Kafka's
    ``log.cleaner.dedupe.buffer.size``). The first key is always taken, so a pass progresses."""
    result = OffsetMap()
    latest = result.latest
    for segment in dirty:
        for magic, raw in stored_entries(segment):
            last, messages = _keyed(magic, raw)
            if last < start:  # a wrapper or batch bears its last offset: all of it is below
                continue
            for offset, key in messages:
                if offset < start:
                    continue
                if key is not None and key not in latest:
                    cost = map_entry_bytes(key)
                    if max_bytes is not None and latest and result.size_bytes + cost > max_bytes:
                        result.full = True
                        return result
                    result.size_bytes += cost
                if key is not None:
                    latest[key] = offset
                result.end = offset
    return result


def groups(closed: Sequence[Segment], segment_bytes: int) -> list[list[Segment]]:
    """Consecutive closed segments merged while they fit one segment (small segments left by
    earlier passes do not pile up)."""
    result: list[list[Segment]] = []
    size = 0
    for segment in closed:
        current = result[-1] if result else None
        if (
            current is None
            or size + segment.size > segment_bytes
            or segment.next_offset - current[0].base_offset > MAX_RELATIVE_OFFSET
        ):
            result.append([segment])
            size = segment.size
        else:
            current.append(segment)
            size += segment.size
    return result


def write_cleaned(
    group: Sequence[Segment],
    latest: dict[bytes, int],
    delete_horizon_ms: int,
    index_interval_bytes: int,
    upto: int | None = None,
    producers_last: Mapping[int, int] | None = None,
) -> Segment:
    """The compacted copy of ``group`` as one ``.cleaned`` segment, sealed and on disk. Only
    messages at or below ``upto`` (the end of a bounded offset map) are considered; those above
    it are copied as they are, for a later pass whose map covers them. ``producers_last``: the
    last offset of each producer id in the partition's producer state, whose batch ending
    there stays even when no record of it does."""
    first = group[0]
    cleaned = Segment.create(
        first.directory, first.base_offset, index_interval_bytes, suffix=layout.CLEANED
    )
    buffer = bytearray()
    for segment in group:
        drop_tombstones = segment.last_modified_ms() < delete_horizon_ms
        for magic, raw in stored_entries(segment):
            if magic == record_batch.MAGIC:
                kept = _retained_batch(raw, latest, drop_tombstones, upto, producers_last or {})
            else:
                (entry,), _ = read_entries(raw)
                kept = _retained(entry, raw, latest, drop_tombstones, upto)
            if kept is not None:
                buffer += kept
                if len(buffer) >= _WRITE_CHUNK:
                    _write(cleaned, buffer)
    _write(cleaned, buffer)
    cleaned.seal()
    cleaned.fsync()
    return cleaned


def _write(cleaned: Segment, buffer: bytearray) -> None:
    if buffer:
        data = bytes(buffer)
        cleaned.append(data, scan_entries(data, verify_crc=False), 0.0)
        buffer.clear()


def _retained(
    entry: Entry,
    raw: bytes,
    latest: dict[bytes, int],
    drop_tombstones: bool,
    upto: int | None = None,
) -> bytes | None:
    """The bytes of ``entry`` that survive: all of it, a wrapper recompressed around its
    surviving inner messages (same codec, same offsets), or nothing."""

    def keep(message: Entry) -> bool:
        return _keeps(message.offset, message.key, message.value, latest, drop_tombstones, upto)

    if entry.codec is Codec.NONE:
        return raw if keep(entry) else None
    inner = open_wrapper(entry)
    kept = [m for m in inner if keep(m)]
    if len(kept) == len(inner):
        return raw
    if not kept:
        return None
    # magic 1: offsets relative to the first kept message; magic 0: absolute, as stored
    base = kept[0].offset if entry.magic else 0
    inner_set = b"".join(
        encode_message(
            m.offset - base, m.key, m.value, m.timestamp, attributes=m.attributes, magic=m.magic
        )
        for m in kept
    )
    return encode_message(
        kept[-1].offset,
        None,
        compress(entry.codec, inner_set, magic=entry.magic),
        entry.timestamp,
        attributes=entry.attributes,
        magic=entry.magic,
    )


def _keeps(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    latest: dict[bytes, int],
    drop_tombstones: bool,
    upto: int | None,
) -> bool:
    """Whether the message at ``offset`` survives: no newer offset of its key, and not a
    tombstone past its retention."""
    if key is None:  # written before the log was compacted: nothing to match
        return True
    if upto is not None and offset > upto:  # past the map: its keys are unknown
        return True
    if latest.get(key, -1) > offset:
        return False
    return not (value is None and drop_tombstones)


def _retained_batch(
    raw: bytes,
    latest: dict[bytes, int],
    drop_tombstones: bool,
    upto: int | None,
    producers_last: Mapping[int, int],
) -> bytes | None:
    """The bytes of the record batch ``raw`` that survive: all of it, unchanged; a new batch
    of its surviving records (``record_batch.encode_retained``: same offsets, producer fields
    and codec); or nothing. A batch left without records stays, as its header alone, when it
    is the last of a producer the partition still tracks: the producer's sequence and epoch
    must survive, or its next batch would be refused as out of sequence (Kafka's cleaner
    keeps the same batches)."""
    header = record_batch.read_batch_header(raw)
    assert header is not None  # stored whole
    records = record_batch.decode_records(raw, header)
    kept = [r for r in records if _keeps(r.offset, r.key, r.value, latest, drop_tombstones, upto)]
    if not kept and not (
        header.producer_id >= 0 and producers_last.get(header.producer_id) == header.last_offset
    ):
        return None
    if len(kept) == len(records):
        return raw
    return record_batch.encode_retained(header, kept)


def finish_interrupted_swap(directory: Path) -> None:
    """At open: complete a swap whose manifest was written, and drop cleaned files a crash
    left before their manifest (that pass never started swapping)."""
    manifest = directory / layout.SWAP_MANIFEST
    swap = layout.read_swap_manifest(manifest)
    if swap is not None:
        old, new = swap
        for base in old:
            if base not in new:
                for suffix in layout.SEGMENT_SUFFIXES:
                    layout.segment_path(directory, base, suffix).unlink(missing_ok=True)
        for base in new:
            for suffix in layout.SEGMENT_SUFFIXES:
                cleaned = layout.segment_path(directory, base, suffix, layout.CLEANED)
                if cleaned.exists():
                    os.replace(cleaned, layout.segment_path(directory, base, suffix))
    manifest.unlink(missing_ok=True)
    for leftover in directory.glob(f"*{layout.CLEANED}"):
        leftover.unlink()
    if swap is not None:
        layout.fsync_dir(directory)
