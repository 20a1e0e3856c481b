"""Checking produced record batches (magic 2) and assigning their offsets, as Kafka's
LogValidator does for a client's batches.

The batch is stored as it came but for three header fields the broker owns: the base offset,
the partition leader epoch -- neither covered by the CRC -- and, with LogAppendTime, the max
timestamp and the timestamp-type bit, after which the header's CRC is recomputed over the
unchanged records. Records are never re-encoded. Every batch's records are read (decompressed
if need be) once, to check them: their count, offset deltas 0..n-1 (only compaction leaves
gaps), lengths, and keys for a compacted topic.

Refused, as Kafka refuses them (a set mixing batches and older entries is ``validation``'s to
refuse): a control batch (only the broker writes them); a transactional batch (transactions
are not supported); a batch of no records; an idempotent batch (producer id >= 0) without a
sequence; a set of an idempotent producer's batches that are not one producer's and epoch,
numbered on from each other (the producer state checks the first, the rest follow from it); a
batch claiming LogAppendTime.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.log.errors import (
    InvalidMessageError,
    KeylessMessageError,
    ProducerSequenceError,
    ProducerTimestampTypeError,
)
from broker.log.producer_state import in_sequence
from protocol import record_batch
from protocol.entry_scan import Scan
from protocol.errors import ErrorCode, MessageFormatError
from protocol.record_batch import BatchHeader

_KEYLESS = "a compacted log cannot accept a record without a key"


def prepare_batches(
    message_set: bytes | bytearray | memoryview,
    scan: Scan,
    *,
    next_offset: int,
    keys_required: bool,
    log_append_time: int | None,
    leader_epoch: int,
) -> tuple[bytearray, Scan, list[BatchHeader]]:
    """The batches of ``message_set`` (found by ``scan``, all magic 2) with offsets from
    ``next_offset`` written in, the scan of them as stored, and their headers as written."""
    data = bytearray(message_set)
    headers: list[BatchHeader] = []
    offsets: list[int] = []
    timestamps: list[int] = list(scan.timestamps)
    base = next_offset
    for i, pos in enumerate(scan.positions):
        header = record_batch.read_batch_header(data, pos)
        assert header is not None  # the scan found it whole
        _check(header, pos)
        try:
            records = record_batch.decode_records(data, header, pos)
        except MessageFormatError as exc:
            raise InvalidMessageError.wrapping(exc) from None
        if header.last_offset_delta != header.record_count - 1 or (
            records[-1].offset != header.last_offset
        ):  # only compaction leaves gaps: a producer's offsets are 0..n-1
            raise InvalidMessageError(
                f"a produced batch's offset deltas must be 0..{header.record_count - 1}; "
                f"lastOffsetDelta is {header.last_offset_delta} and the last record's "
                f"{records[-1].offset - header.base_offset} (the batch at byte position {pos})",
                position=pos)
        if keys_required and any(record.key is None for record in records):
            raise KeylessMessageError(f"{_KEYLESS} (the batch at byte position {pos})")
        record_batch.set_base_offset(data, base, pos)
        record_batch.set_partition_leader_epoch(data, leader_epoch, pos)
        if log_append_time is not None:
            record_batch.set_log_append_time(data, log_append_time, pos)
            timestamps[i] = log_append_time
        written = record_batch.read_batch_header(data, pos)
        assert written is not None
        headers.append(written)
        offsets.append(written.last_offset)
        base = written.last_offset + 1
    if len(headers) > 1 and any(header.producer_id >= 0 for header in headers):
        _check_sequences(headers, scan.positions)
    entries = scan._replace(offsets=offsets, timestamps=timestamps)
    return data, entries, headers


def _check(header: BatchHeader, pos: int) -> None:
    where = f"(the batch at byte position {pos})"
    if header.is_control:
        raise InvalidMessageError(f"clients must not write control batches {where}",
                                  position=pos)
    if header.is_transactional:
        raise InvalidMessageError(
            f"transactional batches are not supported: odradek has no transactions {where}",
            position=pos)
    if not header.record_count:
        raise InvalidMessageError(f"a produced batch must hold at least one record {where}",
                                  position=pos)
    if header.attributes & record_batch.TIMESTAMP_TYPE_BIT:
        raise ProducerTimestampTypeError(
            f"a producer must not set the timestamp type LogAppendTime (attributes bit 3) {where}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidMessageError(
            f"producer id {header.producer_id} sent base sequence {header.base_sequence}: "
            f"an idempotent batch needs a sequence number {where}", position=pos)


def _check_sequences(headers: list[BatchHeader], positions: Sequence[int]) -> None:
    """Several batches of an idempotent producer in one set (a producer sending what queued
    for a partition in one request) must be one producer's, of one epoch, numbered on from
    each other: the producer state checks the first, and the rest follow from it."""
    first = headers[0]
    for previous, header, pos in zip(headers, headers[1:], positions[1:], strict=False):
        if (header.producer_id, header.producer_epoch) != (first.producer_id,
                                                           first.producer_epoch):
            raise InvalidMessageError(
                f"the batches of one produced set must be one producer's: producer id "
                f"{header.producer_id} epoch {header.producer_epoch} follows producer id "
                f"{first.producer_id} epoch {first.producer_epoch} (the batch at byte position "
                f"{pos})", position=pos)
        if not in_sequence(previous.last_sequence, header.base_sequence):
            raise ProducerSequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {header.producer_id}: sequence {header.base_sequence} does not follow "
                f"{previous.last_sequence} within one produced set (the batch at byte position "
                f"{pos})")

