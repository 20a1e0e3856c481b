"""Fetched bytes handed on as stored message sets, not decoded into records.

A mirror (seed 001: poll() "would also help removing the decompression/recompression in mirror
maker") passes what the source stored straight to the target: compressed wrappers stay as they
are. What must still be known is where the set starts and ends:

- entries wholly before the position are dropped (a fetch starts at the entry holding it);
- a compressed wrapper that *straddles* the position -- the consumer seeked, or resumed from a
  commit, into its middle -- is opened, and its messages from the position on are compressed
  again into one wrapper of the same codec (the only time this module recompresses). Positions
  this consumer reached itself are always at an entry's end, so that check is skipped for them;
- a partial trailing entry is left for the next fetch;
- a damaged entry ends the set, and is reported after the entries before it;
- an entry stamped with log-append time (a source topic with
  ``message_timestamp_type=LogAppendTime``) is rewritten as create time holding that same time,
  because a broker refuses the log-append type from producers: a plain message has its attribute
  and CRC rewritten; a wrapper's messages are compressed again, each taking the wrapper's time.

The scan reads only headers and CRCs (protocol.entry_scan), so a set costs about one pass over
its bytes.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple

from protocol.entry_scan import scan_entries
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    encode_message,
    encode_message_set,
    open_wrapper,
    read_entries,
)


class FetchedSet(NamedTuple):
    """Stored entries of one partition, as ``Consumer.poll_sets`` returns them: ``data`` holds
    the messages from ``offset`` up to ``next_offset`` (exclusive) as the broker stored them --
    a log may have gaps (compaction), so ``next_offset - offset`` counts offsets, not always
    messages. ``Producer.send_set`` appends such bytes to another log unchanged."""

    topic: str
    partition: int
    offset: int
    next_offset: int
    data: bytes


class SetCut(NamedTuple):
    """What a fetched chunk holds from a position on."""

    data: bytes  # whole entries from the position on; empty when none
    next_offset: int  # the position after them (the position itself when there are none)
    whole: int  # bytes of the chunk that were whole entries (0: the first one did not fit)
    damage: MessageFormatError | None  # the entry after ``data`` is damaged


def cut_from(data: bytes, position: int, *, aligned: bool, verify_crc: bool) -> SetCut:
    """The whole entries of ``data`` holding offsets from ``position`` on; ``aligned`` says
    ``position`` is known to be an entry's start (no wrapper needs opening)."""
    scan = scan_entries(data, verify_crc=verify_crc)
    damage = None
    if scan.error is not None:
        damaged_at = int.from_bytes(data[scan.end : scan.end + 8], "big", signed=True)
        error_type = CorruptMessageError if scan.bad_crc else MessageFormatError
        damage = error_type(scan.error, offset=damaged_at, position=scan.end)
    offsets = scan.offsets
    first = bisect_left(offsets, position)  # a wrapper's offset is its last message's
    if first == len(offsets):
        return SetCut(b"", position, scan.end, damage)
    start = scan.positions[first]
    head = b""
    if not aligned and scan.attributes[first] & CODEC_MASK:
        end = start + scan.sizes[first]
        head = _trimmed_wrapper(data[start:end], position)
        start = end
    body = data[start : scan.end] if start or scan.end != len(data) else data
    out = head + body if head else body
    if any(map(TIMESTAMP_TYPE_BIT.__and__, scan.attributes[first:])):  # C-level, per entry
        out = _as_create_time(out)
    return SetCut(out, offsets[-1] + 1, scan.end, damage)


def _as_create_time(data: bytes) -> bytes:
    """``data`` with each log-append-time entry rewritten as create time, its time kept."""
    entries, _ = read_entries(data, verify_crc=False)
    parts = []
    for e in entries:
        raw = data[e.position : e.end]
        if not (e.magic and e.attributes & TIMESTAMP_TYPE_BIT):
            parts.append(raw)
        elif e.attributes & CODEC_MASK:
            inner = open_wrapper(e, verify_crc=False)
            parts.append(encode_message_set(
                [(i.key, i.value, e.timestamp) for i in inner], codec=e.codec,
                base_offset=inner[0].offset))
        else:
            parts.append(encode_message(e.offset, e.key, e.value, e.timestamp))
    return b"".join(parts)


def _trimmed_wrapper(entry_bytes: bytes, position: int) -> bytes:
    """A wrapper's messages from ``position`` on: the wrapper itself when it starts there, else
    they are compressed again with its codec (its inner timestamps kept)."""
    (wrapper,), _ = read_entries(entry_bytes, verify_crc=False)
    inner = open_wrapper(wrapper, verify_crc=False)
    if inner[0].offset >= position:
        return entry_bytes
    log_append = wrapper.magic and wrapper.attributes & TIMESTAMP_TYPE_BIT
    kept = [
        (e.key, e.value, wrapper.timestamp if log_append else e.timestamp)
        for e in inner
        if e.offset >= position
    ]
    return encode_message_set(kept, codec=wrapper.codec, base_offset=position, magic=wrapper.magic)
