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

Record batches (magic 2, fetched with Fetch v4 as the source stores them) are passed on so too,
headers, codec and timestamps kept, each batch on its own:

- a batch wholly before the position is dropped; so are control batches (transaction markers:
  only a broker writes them, and the target refuses them from a client) and empty batches
  (compaction leaves them to carry producer state; they hold nothing to copy);
- the producer identity is stripped (producer id, epoch and base sequence set to none, the
  CRC-32C recomputed): the target numbers nothing of the source's, and its producer state
  never sees the source's producer ids -- they would collide with the target's own, and a
  mirror resuming from its last commit would be refused as out of order;
- a batch is decoded and encoded again (same codec, headers kept, each record's own timestamp,
  as create time) only when it must be: it straddles the position (the records from it on),
  it has log-append time (each record then takes the batch's time, as above), or its offsets
  have gaps (a compacted batch: a producer's batch must hold offsets 0..n-1; the target assigns
  its own offsets anyway). Any other batch's bytes go on unchanged but for the stripped
  identity.

A broker takes a set of one format only, so a set ends where the source log switches between
v0/v1 entries and record batches; the next set starts there.

The scan reads only headers and CRCs (protocol.entry_scan), so a set costs about one pass over
its bytes (for record batches, one more CRC-32C pass in C where an identity is stripped).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from contextlib import suppress
from typing import NamedTuple

from protocol import record_batch
from protocol.entry_scan import Scan, scan_entries
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    encode_message,
    encode_message_set,
    open_wrapper,
    read_entries,
)
from protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT


class FetchedSet(NamedTuple):
    """Stored entries of one partition, as ``Consumer.poll_sets`` returns them: ``data`` holds
    the messages from ``offset`` up to ``next_offset`` (exclusive) as the broker stored them --
    a log may have gaps (compaction), so ``next_offset - offset`` counts offsets, not always
    messages. ``data`` is of one format: v0/v1 entries or record batches. ``Producer.send_set``
    appends such bytes to another log unchanged."""

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
    """The whole entries of ``data`` holding offsets from ``position`` on, up to the first of
    another format (v0/v1 or record batches); ``aligned`` says ``position`` is known to be an
    entry's start (no wrapper needs opening)."""
    scan = scan_entries(data, verify_crc=verify_crc)
    damage = None
    if scan.error is not None:
        damaged_at = int.from_bytes(data[scan.end : scan.end + 8], "big", signed=True)
        error_type = CorruptMessageError if scan.bad_crc else MessageFormatError
        damage = error_type(scan.error, offset=damaged_at, position=scan.end)
    offsets = scan.offsets
    first = bisect_left(offsets, position)  # a wrapper's or batch's offset is its last one's
    if first == len(offsets):
        return SetCut(b"", position, scan.end, damage)
    batches = scan.magics[first] == record_batch.MAGIC
    stop = _format_end(scan.magics, first, batches)
    end = scan.end
    if stop < len(offsets):  # the other format is the next set's, and so is any damage
        end = scan.positions[stop]
        damage = None
    if batches:
        out, stop, damage = _batches_from(data, scan, first, stop, position, damage,
                                          verify_crc)
        if stop == first:
            return SetCut(b"", position, scan.end, damage)
        return SetCut(out, offsets[stop - 1] + 1, scan.end, damage)
    start = scan.positions[first]
    head = b""
    if not aligned and scan.attributes[first] & CODEC_MASK:
        after = start + scan.sizes[first]
        head = _trimmed_wrapper(data[start:after], position)
        start = after
    body = data[start:end] if start or end != len(data) else data
    out = head + body if head else body
    if any(map(TIMESTAMP_TYPE_BIT.__and__, scan.attributes[first:stop])):  # C-level, per entry
        out = _as_create_time(out)
    return SetCut(out, offsets[stop - 1] + 1, scan.end, damage)


def _format_end(magics: Sequence[int], first: int, batches: bool) -> int:
    """The index of the first entry from ``first`` on of the other format (len if none)."""
    others = (0, 1) if batches else (record_batch.MAGIC,)
    stop = len(magics)
    for magic in others:
        with suppress(ValueError):  # none of that magic
            stop = magics.index(magic, first, stop)
    return stop


def _batches_from(
    data: bytes, scan: Scan, first: int, stop: int, position: int,
    damage: MessageFormatError | None, crc_checked: bool,
) -> tuple[bytes, int, MessageFormatError | None]:
    """The record batches ``first``..``stop`` of the scan made ready for another log (the
    module's docstring says how); ends early, with the damage, at a batch whose records cannot
    be read where they must be. Returns the bytes, the index after the last batch handled and
    the damage after them."""
    parts = []
    positions = scan.positions
    for i in range(first, stop):
        pos = positions[i]
        try:
            parts.append(_batch_to_pass_on(data, pos, position, crc_checked))
        except MessageFormatError as exc:  # names the batch's base offset
            return b"".join(parts), i, exc
    return b"".join(parts), stop, damage


def _batch_to_pass_on(data: bytes, pos: int, position: int, crc_checked: bool) -> bytes:
    """The batch at ``pos`` (scanned: whole and well framed) as another log may take it from
    a client; empty when nothing of it is to be copied. A batch that is changed gets a new
    CRC, so its own is checked first even when the scan did not (``check_crcs=False``): a
    damaged batch must not go on looking sound."""
    header = record_batch.read_batch_header(data, pos)
    assert header is not None
    attributes = header.attributes
    if attributes & CONTROL_BIT or not header.record_count:
        return b""
    reencode = (
        header.base_offset < position
        or attributes & TIMESTAMP_TYPE_BIT
        or header.record_count != header.last_offset_delta + 1
    )
    stripped = (
        header.producer_id == record_batch.NO_PRODUCER_ID
        and header.producer_epoch == record_batch.NO_PRODUCER_EPOCH
        and header.base_sequence == record_batch.NO_SEQUENCE
        and not attributes & TRANSACTIONAL_BIT
    )
    if not crc_checked and (reencode or not stripped):
        record_batch.check_crc(data, header, pos)
    if reencode:
        records = record_batch.decode_records(data, header, pos)
        kept = [(r.key, r.value, r.timestamp, r.headers) for r in records if r.offset >= position]
        if not kept:
            return b""
        # based at its first record, so that the set's batches keep ascending offsets
        return record_batch.encode_batch(kept, codec=header.codec,
                                         base_offset=records[len(records) - len(kept)].offset)
    if stripped:
        return data[pos : pos + header.size]
    return record_batch.without_producer(data, pos)


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
