"""A fetched chunk of one partition decoded into records, whatever formats it holds.

A log may hold message sets of magic 0 and 1 and record batches of magic 2 in any order (each
entry says which at byte 16), and a Fetch v4 answer carries them as stored. The chunk is walked
in runs: a run of v0/v1 entries is decoded in one call (protocol.messageset, C where built),
each v2 batch with its records at once (protocol.record_batch). So a chunk of one format costs
what it costs today.

- A partial trailing entry or batch ends the chunk (fetched again from its offset).
- A v2 batch is sent whole from its base offset, so its records below the fetch offset are
  left out here; a v1 wrapper's are too.
- Control batches (transaction markers) and empty batches (kept after compaction for the
  producer state they carry) hold nothing to hand out, but the position moves past them.
- Records of v2 batches carry their headers; v0/v1 messages have none: ``()``.
- A damaged entry (CRC, CRC-32C or malformed) ends the records: those before it are handed
  out, and the damage is reported with the offset and position of the entry it was found in.
"""

from __future__ import annotations

from typing import NamedTuple

from client.records import ConsumerRecord, TopicPartition
from protocol.errors import MessageFormatError
from protocol.messageset import decode_as
from protocol.record_batch import (
    CONTROL_BIT,
    MAGIC,
    check_crc,
    decode_records_as,
    peek_magic,
    read_batch_header,
)

_NO_HEADERS = ((),)  # the fields after each v0/v1 message's: ``headers`` is always there


class DecodedChunk(NamedTuple):
    """What a fetched chunk holds from the fetch offset on."""

    records: list[ConsumerRecord]  # in offset order, none below the fetch offset
    whole: int  # bytes of the chunk that were whole entries (0: the first one did not fit)
    next_offset: int  # the position after every whole entry (the fetch offset if none)
    damage: MessageFormatError | None  # the entry after ``whole`` bytes is damaged


def decode_chunk(
    tp: TopicPartition, data: bytes, fetch_offset: int, *, verify_crc: bool = True
) -> DecodedChunk:
    """The records of ``data`` (a Fetch answer's bytes for ``tp``) from ``fetch_offset`` on."""
    records: list[ConsumerRecord] = []
    prefix = (tp.topic, tp.partition)
    next_offset = fetch_offset
    pos = 0
    size = len(data)
    damage: MessageFormatError | None = None
    while pos < size and (magic := peek_magic(data, pos)) is not None:
        try:
            if magic == MAGIC:
                header = read_batch_header(data, pos)
                if header is None or header.end > size:
                    break  # partial trailing batch
                if verify_crc:
                    check_crc(data, header, pos)
                if header.record_count and not header.attributes & CONTROL_BIT:
                    records.extend(decode_records_as(ConsumerRecord, prefix, data, header, pos))
                next_offset = max(next_offset, header.next_offset)
                pos = header.end
            else:
                run, whole = _decode_run(prefix, data, pos, verify_crc)
                if run:
                    records.extend(run)
                    next_offset = max(next_offset, run[-1].offset + 1)
                if whole == 0:
                    break  # partial trailing entry
                pos += whole
        except MessageFormatError as exc:
            damage = exc
            break
    if records and records[0].offset < fetch_offset:
        records = [r for r in records if r.offset >= fetch_offset]
    return DecodedChunk(records, pos, next_offset, damage)


def _decode_run(
    prefix: tuple[str, int], data: bytes, pos: int, verify_crc: bool
) -> tuple[list[ConsumerRecord], int]:
    """The v0/v1 entries from ``pos`` up to the next v2 batch, a partial entry or the end,
    and how many bytes they span. The first entry being damaged raises MessageFormatError."""
    chunk = data if pos == 0 else data[pos:]
    try:
        run, whole = decode_as(
            ConsumerRecord, prefix, chunk, verify_crc=verify_crc, suffix=_NO_HEADERS
        )
    except MessageFormatError as exc:
        # The v1 reader stops at a v2 batch as at an entry it cannot read; and an error names
        # the entry it met, not always the first bad one (wrappers are opened once every entry
        # is read). Either way the bytes before it are decoded on their own: the next run
        # starts at the batch, or meets the damage at once.
        stop = min(exc.position or 0, len(chunk))
        if stop <= 0:
            raise
        return _decode_run(prefix, data[: pos + stop], pos, verify_crc)
    return run, whole
