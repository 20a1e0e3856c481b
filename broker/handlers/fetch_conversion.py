"""A consumer's fetched range for a reader that cannot take record batches (magic 2): Fetch
below v4, native or Kafka's.

Nearly every range holds no batch -- its segment has none (``ReadResult.batches`` is False) --
and leaves as stored, by sendfile when large. Otherwise (a segment with batches, or one opened
at start-up and not scanned since) the range is read and its entries' magic bytes looked at;
only one holding a batch is rewritten by ``protocol.down_conversion``
as Kafka rewrites it: to magic 1 (magic 0 for Kafka's Fetch v0-1 readers), whole entries only,
the first however large (KIP-74), a zstd batch refused with UNSUPPORTED_COMPRESSION_TYPE.
A range that converts to nothing (control or empty batches only) is read on past them, so a
reader never waits at an offset nothing will ever be sent for.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from broker.frames import SENDFILE_MIN_BYTES
from broker.log import PartitionLog, ReadResult
from protocol.down_conversion import UnsupportedCompressionError, down_convert
from protocol.errors import UnsupportedCompressionTypeError
from protocol.messageset import LOG_OVERHEAD
from protocol.record_batch import MAGIC

_SIZE = struct.Struct(">i")
_MAGIC_AT = 16  # every magic's entry: offset (8), size (4), then 4 bytes, then the magic


def holds_batch(data: bytes) -> bool:
    """Whether any entry of ``data`` (stored bytes, maybe ending in a partial entry) is a
    record batch: a walk over the entries' size fields, nothing decoded."""
    pos = 0
    end = len(data) - _MAGIC_AT
    while pos < end:
        if data[pos + _MAGIC_AT] == MAGIC:
            return True
        (size,) = _SIZE.unpack_from(data, pos + 8)
        pos += LOG_OVERHEAD + max(size, 0)
    return False


#: told the messages converted and the seconds it took, for the broker's metrics
OnConverted = Callable[[int, float], None]


def for_reader(
    plog: PartitionLog, read: ReadResult, to_magic: int, max_bytes: int,
    max_offset: int | None, on_converted: OnConverted | None = None,
) -> ReadResult | bytes:
    """``read`` as a reader of message format ``to_magic`` (0 or 1) takes it: the same result
    when it holds no batch, else the down-converted message set. Raises
    UnsupportedCompressionTypeError for a zstd batch at the start."""
    if not read.batches or not read.length:
        return read
    data = read.bytes()
    if not holds_batch(data):  # a segment not scanned since the broker started, say
        return read if read.length >= SENDFILE_MIN_BYTES else data
    started = time.perf_counter()
    records = _convert(plog, data, read.offset, to_magic, max_bytes, max_offset)
    if on_converted is not None and records:
        on_converted(records[1], time.perf_counter() - started)
    return records[0] if records else b""


def _convert(
    plog: PartitionLog, data: bytes, offset: int, to_magic: int, max_bytes: int,
    max_offset: int | None,
) -> tuple[bytes, int] | None:
    """The converted message set from ``offset`` and how many messages were converted, or None
    when there is nothing to send yet."""
    try:
        while True:
            converted = down_convert(data, to_magic=to_magic, fetch_offset=offset,
                                     max_bytes=max_bytes)
            if converted.records:
                return converted.records, converted.converted
            if not converted.consumed:
                # the first entry is larger than max_bytes: it goes whole (KIP-74)
                if len(data) < LOG_OVERHEAD:
                    return None
                whole = LOG_OVERHEAD + _SIZE.unpack_from(data, 8)[0]
                if whole <= len(data):
                    return None
                data = plog.read(offset, whole, max_offset=max_offset).bytes()
                continue
            # only entries with nothing for this reader: read on past them
            if converted.next_offset <= offset:
                return None
            offset = converted.next_offset
            data = plog.read(offset, max(max_bytes, 1), max_offset=max_offset).bytes()
            if not data:
                return None
    except UnsupportedCompressionError as exc:
        raise UnsupportedCompressionTypeError(str(exc)) from exc
