"""Log compaction: keep the newest message per key in the closed segments (seed 003).

A pass has three steps. ``offset_map`` reads the dirty segments (those written since the last
pass) and records the latest offset of every key, up to ``cleaner_dedupe_buffer_bytes``: when the
map is full it stops, the pass cleans only up to the last offset it mapped, and another pass
continues from there (Kafka's dedupe buffer), so memory stays bounded however many keys.
``write_cleaned`` copies the closed segments, in groups that fit one segment, into ``.cleaned``
files, leaving out every message whose key has a newer offset and every tombstone (null value)
older than ``delete_retention_ms``; offsets are kept, so gaps appear. The caller then swaps the
cleaned segments in with one replacement of the segment list, guarded on disk by a manifest
(``finish_interrupted_swap`` completes a swap a crash interrupted), so readers and restarts see
the old segments or the new ones, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.log import layout
from broker.log.index import MAX_RELATIVE_OFFSET
from broker.log.segment import Segment
from protocol.compression import Codec, compress
from protocol.entry_scan import scan_entries
from protocol.messageset import Entry, encode_message, open_wrapper

_WRITE_CHUNK = 1 << 20


def dirty_ratio(closed: Sequence[Segment], cleaner_checkpoint: int) -> tuple[float, int]:
    """The share of closed-segment bytes not compacted yet, and how many bytes that is."""
    total = sum(s.size for s in closed)
    dirty = sum(s.size for s in closed if s.next_offset > cleaner_checkpoint)
    return (dirty / total if total else 0.0), dirty


def _messages(entry: Entry) -> list[Entry]:
    return open_wrapper(entry) if entry.codec is not Codec.NONE else [entry]


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
        for entry, _raw in segment.entries():
            if entry.offset < start:  # a wrapper bears its last offset: all of it is below
                continue
            for message in _messages(entry):
                if message.offset < start:
                    continue
                key = message.key
                if key is not None and key not in latest:
                    cost = map_entry_bytes(key)
                    if max_bytes is not None and latest and result.size_bytes + cost > max_bytes:
                        result.full = True
                        return result
                    result.size_bytes += cost
                if key is not None:
                    latest[key] = message.offset
                result.end = message.offset
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
) -> Segment:
    """The compacted copy of ``group`` as one ``.cleaned`` segment, sealed and on disk. Only
    messages at or below ``upto`` (the end of a bounded offset map) are considered; those above
    it are copied as they are, for a later pass whose map covers them."""
    first = group[0]
    cleaned = Segment.create(
        first.directory, first.base_offset, index_interval_bytes, suffix=layout.CLEANED
    )
    buffer = bytearray()
    for segment in group:
        drop_tombstones = segment.last_modified_ms() < delete_horizon_ms
        for entry, raw in segment.entries():
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
        if message.key is None:  # written before the log was compacted: nothing to match
            return True
        if upto is not None and message.offset > upto:  # past the map: its keys are unknown
            return True
        if latest.get(message.key, -1) > message.offset:
            return False
        return not (message.value is None and drop_tombstones)

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
