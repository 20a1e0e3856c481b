"""A producer batch -- the messages bound for one partition in one message set -- and the
futures ``Producer.send`` returns for its messages.

A batch settles once for all its messages: one base offset or one error. Each message's future
is just (batch, index), so completing a batch of thousands costs the same as completing one, and
``RecordMetadata`` is only built for the futures someone asks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from client.errors import ClientTimeoutError, IllegalStateError
from client.records import RecordMetadata, TopicPartition
from protocol.compression import Codec
from protocol.messageset import encode_message_set

Drive = Callable[[float], object]
log = logging.getLogger("odradek.producer")


class ProducerBatch:
    __slots__ = (
        "_callbacks",
        "_drive",
        "_encoded",
        "attempts",
        "base_offset",
        "created",
        "error",
        "records",
        "retry_at",
        "size",
        "tp",
    )

    def __init__(self, tp: TopicPartition, created: float, drive: Drive) -> None:
        self.tp = tp
        self.created = created
        self.records: list[tuple[bytes | None, bytes | None, int]] = []
        self.size = 0  # bytes the uncompressed message set takes
        self.attempts = 0
        self.retry_at = 0.0
        self.base_offset: int | None = None
        self.error: BaseException | None = None
        self._encoded: bytes | None = None
        self._callbacks: list[tuple[int, Callable[[RecordFuture], None]]] = []
        self._drive = drive

    @property
    def done(self) -> bool:
        return self.base_offset is not None or self.error is not None

    def encode(self, codec: Codec) -> bytes:
        """The message set, built once: a retry sends the very same bytes."""
        if self._encoded is None:
            self._encoded = encode_message_set(self.records, codec=codec)
        return self._encoded

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


class RecordFuture:
    """The outcome of one ``send``: ``result()`` gives ``RecordMetadata(topic, partition,
    offset)`` or raises the typed error. Waiting drives the producer's I/O."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def succeeded(self) -> bool:
        return self._batch.base_offset is not None

    def failed(self) -> bool:
        return self._batch.error is not None

    def exception(self) -> BaseException | None:
        return self._batch.error

    @property
    def attempts(self) -> int:
        """How many times the message's batch has been sent (more than 1 after retries)."""
        return self._batch.attempts

    @property
    def value(self) -> RecordMetadata:
        batch = self._batch
        if batch.base_offset is None:
            raise IllegalStateError("future has no value (pending or failed)")
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait (driving I/O) up to ``timeout`` seconds, then return or raise."""
        batch = self._batch
        if not batch.done:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not batch.done:
                remaining = 1.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    raise ClientTimeoutError(f"send to {batch.tp} not acknowledged in {timeout} s")
                batch._drive(remaining)
        if batch.error is not None:
            raise batch.error
        return self.value

    get = result

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        """Call ``fn(future)`` when the batch settles (at once if it has). Callbacks run inside
        whichever producer call completes the batch."""
        if self._batch.done:
            fn(self)
        else:
            self._batch.add_callback(self._index, fn)
