"""A producer batch -- the messages bound for one partition in one message set -- and the
futures ``Producer.send`` returns for its messages.

A batch is encoded when it is sent, in the format the partition's leader speaks: a v1 message
set (Produce v1) or a record batch, magic 2 (Produce v2: headers, zstd). Records are ``(key,
value, timestamp)`` tuples, or ``(key, value, timestamp, headers)`` for a message sent with
headers, which only a record batch can carry (``encode_for``).

A batch settles once for all its messages: one base offset or one error. Each message's future
is just (batch, index), so completing a batch of thousands costs the same as completing one, and
``RecordMetadata`` is only built for the futures someone asks.

A batch the broker refuses as too large is split into two (``split``), each settling on its own;
a future of the split batch follows its message into the part that holds it.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import Any, overload

from client.durations import seconds_text
from client.errors import ClientTimeoutError, IllegalStateError
from client.records import RecordMetadata, TopicPartition
from protocol.compression import BatchCodec, Codec
from protocol.down_conversion import ZstdPolicy, down_convert
from protocol.errors import MessageFormatError, ProtocolError, UnsupportedVersionError
from protocol.messageset import HEADER_V1, encode_message_set
from protocol.record_batch import (
    MAGIC,
    MAGIC_AT,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    encode_batch,
)

Drive = Callable[[float], object]
log = logging.getLogger("odradek.producer")


class ProducerBatch:
    #: a stored message set (``SetBatch``): due at once, and always sent alone
    whole = False
    __slots__ = (
        "_callbacks",
        "_drive",
        "_encoded",
        "_encoded_magic",
        "attempts",
        "base_offset",
        "base_sequence",
        "created",
        "error",
        "has_headers",
        "open",
        "parts",
        "producer_epoch",
        "producer_id",
        "records",
        "retry_at",
        "size",
        "tp",
    )

    def __init__(self, tp: TopicPartition, created: float, drive: Drive) -> None:
        self.tp = tp
        self.created = created
        # (key, value, timestamp), or (key, value, timestamp, headers) for a message with headers
        self.records: list[tuple[Any, ...]] = []
        self.has_headers = False
        # Messages may still be added: the last batch of its partition's queue, never sent
        # (the accumulator clears it when another batch follows, or it is drained or dropped).
        self.open = True
        self.size = 0  # bytes the uncompressed message set takes
        self.attempts = 0
        self.retry_at = 0.0
        self.base_offset: int | None = None
        self.error: BaseException | None = None
        self.parts: list[ProducerBatch] | None = None  # set once split: it never settles itself
        self._encoded: bytes | None = None
        self._encoded_magic = -1
        # what an idempotent producer stamps on its record batch; none yet
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self._callbacks: list[tuple[int, Callable[[RecordFuture], None]]] = []
        self._drive = drive

    @property
    def done(self) -> bool:
        return self.base_offset is not None or self.error is not None

    def encode(self, codec: BatchCodec, magic: int) -> bytes:
        """The batch as a v1 message set or (``magic`` 2) one record batch, built once: a
        retry to a leader of the same format sends the very same bytes. A format that cannot
        carry the batch (headers or zstd below magic 2) raises UnsupportedVersionError naming
        the partition."""
        if self._encoded is None or self._encoded_magic != magic:
            if magic == MAGIC:
                self._encoded = encode_batch(
                    self.records, codec=codec, producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch, base_sequence=self.base_sequence)
            else:
                self._encoded = encode_message_set(self.records, codec=_v1_codec(codec, self))
            self._encoded_magic = magic
        return self._encoded

    def number(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamp the idempotent producer's numbers (client/idempotence.py) before the batch is
        first encoded; a retry sends them unchanged."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence = base_sequence
        self._encoded = None

    def unnumber(self) -> None:
        """Drop the numbers of a batch that was not written, to be numbered again."""
        self.number(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)

    def split(self) -> list[ProducerBatch]:
        """Two batches holding this one's messages, first half and second half (at least two
        messages), to send in its place; its callbacks and futures move to them."""
        half = len(self.records) // 2
        parts = []
        for records in (self.records[:half], self.records[half:]):
            part = ProducerBatch(self.tp, self.created, self._drive)
            part.records = records
            part.has_headers = self.has_headers
            part.size = sum(HEADER_V1 + len(r[0] or b"") + len(r[1] or b"") for r in records)
            part.attempts = self.attempts  # sent before: not merged with other batches again
            part.open = False
            parts.append(part)
        parts[1].size = self.size - parts[0].size  # the buffer accounting stays exact
        for index, fn in self._callbacks:
            if index < half:
                parts[0].add_callback(index, fn)
            else:
                parts[1].add_callback(index - half, fn)
        self._callbacks = []
        self._encoded = None
        self.parts = parts
        return parts

    def complete(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._run_callbacks()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._run_callbacks()

    def add_callback(self, index: int, fn: Callable[[RecordFuture], None]) -> None:
        self._callbacks.append((index, fn))

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for index, fn in callbacks:
            try:
                fn(RecordFuture(self, index))
            except Exception:  # a user's callback must never break the producer's I/O
                log.exception("a send callback raised", extra={"partition": str(self.tp)})


class SetBatch(ProducerBatch):
    """A stored message set, from ``Producer.send_set``: its bytes go out as they are -- not
    merged with other batches, re-encoded with the producer's codec, or split -- and its one
    future resolves to the offset of its first message."""

    whole = True
    __slots__ = ()

    def __init__(self, tp: TopicPartition, created: float, drive: Drive, data: bytes) -> None:
        super().__init__(tp, created, drive)
        self.records = [(None, None, -1)]  # one future, for the whole set
        self.size = len(data)
        self.open = False
        self._encoded = data

    def encode(self, codec: BatchCodec, magic: int) -> bytes:
        """The set as it is; record batches for a leader that takes v1 message sets only
        are down-converted, as the source's broker would have served them to a reader of v1:
        headers dropped (v1 cannot carry them), zstd batches written uncompressed. A set that
        cannot be read so raises MessageFormatError naming the partition (its future fails;
        a leader of today's format would have refused it itself)."""
        assert self._encoded is not None
        data = self._encoded
        if magic < MAGIC and data[MAGIC_AT] == MAGIC:  # one format a set (client.message_sets)
            try:
                return down_convert(data, to_magic=magic, fetch_offset=0,
                                    zstd=ZstdPolicy.DECOMPRESS, verify_crc=False).records
            except ProtocolError as exc:
                raise MessageFormatError(
                    f"{self.tp}: the set cannot be converted for a leader of message format "
                    f"v{magic}: {exc}") from exc
        return data


def _v1_codec(codec: BatchCodec, batch: ProducerBatch) -> Codec:
    """The v1 codec of ``codec``, for a batch to a leader that speaks Produce v1 only; records
    with headers, or zstd, cannot go there."""
    if batch.has_headers:
        raise UnsupportedVersionError(
            f"{batch.tp}: messages with headers need a broker that takes record batches "
            f"(Produce v2); the leader of topic {batch.tp.topic!r} speaks Produce v1 only")
    if codec is BatchCodec.ZSTD:
        raise UnsupportedVersionError(
            f"{batch.tp}: compression zstd needs a broker that takes record batches "
            f"(Produce v2); the leader of topic {batch.tp.topic!r} speaks Produce v1 only")
    return Codec(int(codec))


def encode_for(batches: Sequence[ProducerBatch], codec: BatchCodec, magic: int) -> bytes:
    """The ``records`` of one partition of a Produce request: each batch as a message set
    (v1) or as one record batch (magic 2), concatenated. Each is encoded once, so the record
    batches stay those an idempotent producer numbers one by one (producer id, epoch, base
    sequence per batch)."""
    return b"".join([b.encode(codec, magic) for b in batches])


class RecordFuture:
    """The outcome of one ``send``: ``result()`` gives ``RecordMetadata(topic, partition,
    offset)`` or raises the typed error. Waiting drives the producer's I/O."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def _current(self) -> ProducerBatch:
        """The batch holding the message now: its own, or the part of it a split put it in."""
        batch = self._batch
        while (parts := batch.parts) is not None:
            first = parts[0]
            if self._index < len(first.records):
                batch = first
            else:
                self._index -= len(first.records)
                batch = parts[1]
            self._batch = batch
        return batch

    def done(self) -> bool:
        return self._current().done

    def succeeded(self) -> bool:
        return self._current().base_offset is not None

    def failed(self) -> bool:
        return self._current().error is not None

    def exception(self) -> BaseException | None:
        return self._current().error

    @property
    def attempts(self) -> int:
        """How many times the message's batch has been sent (more than 1 after retries)."""
        return self._current().attempts

    @property
    def value(self) -> RecordMetadata:
        batch = self._current()
        if batch.base_offset is None:
            raise IllegalStateError("future has no value (pending or failed)")
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait (driving I/O) up to ``timeout`` seconds, then return or raise."""
        batch = self._current()
        if not batch.done:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not batch.done:
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    assert timeout is not None  # only a deadline runs out
                    raise ClientTimeoutError(
                        f"send to {batch.tp} not acknowledged in {seconds_text(timeout)}"
                    )
                batch._drive(remaining)
                batch = self._current()  # a split moves the message to a part
        if batch.error is not None:
            raise batch.error
        return self.value

    get = result

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        """Call ``fn(future)`` when the batch settles (at once if it has). Callbacks run inside
        whichever producer call completes the batch."""
        batch = self._current()
        if batch.done:
            fn(self)
        else:
            batch.add_callback(self._index, fn)


class RecordFutures(Sequence[RecordFuture]):
    """The futures of ``send_many``'s messages, in order, each built when it is asked for: the
    messages lie in a few runs of consecutive places in a few batches, so a thousand futures
    are a few (batch, first index, count) spans, not a thousand objects made up front."""

    __slots__ = ("_batches", "_ends", "_firsts")

    def __init__(self) -> None:
        self._batches: list[ProducerBatch] = []
        self._firsts: list[int] = []  # the index in its batch of each span's first message
        self._ends: list[int] = []  # how many messages the spans up to this one hold

    def add(self, batch: ProducerBatch, first: int, count: int) -> None:
        """The next ``count`` messages are ``batch``'s from index ``first`` on."""
        end = self._ends[-1] if self._ends else 0
        if self._batches and self._batches[-1] is batch:
            start = self._ends[-2] if len(self._ends) > 1 else 0
            if self._firsts[-1] + end - start == first:  # right after the last span
                self._ends[-1] = end + count
                return
        self._batches.append(batch)
        self._firsts.append(first)
        self._ends.append(end + count)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, i: int) -> RecordFuture: ...

    @overload
    def __getitem__(self, i: slice) -> list[RecordFuture]: ...

    def __getitem__(self, i: int | slice) -> RecordFuture | list[RecordFuture]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"future {i} of {n}")
        span = bisect_right(self._ends, i)
        start = self._ends[span - 1] if span else 0
        return RecordFuture(self._batches[span], self._firsts[span] + i - start)

    def __iter__(self) -> Iterator[RecordFuture]:
        start = 0
        for batch, first, end in zip(self._batches, self._firsts, self._ends, strict=True):
            yield from map(RecordFuture, repeat(batch), range(first, first + end - start))
            start = end
