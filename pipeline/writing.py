"""Writing rows to topics, in batch and streaming queries: every Spark task is a producer.

Rows need ``value`` (binary or string) and may carry ``key`` (binary or string), ``topic``
(string; the option ``topic`` overrides it) and ``partition`` (int; else the producer's
partitioner picks by key). Other columns are ignored, as Spark's Kafka sink does.

Delivery is at least once. A task sends its rows and returns only when the broker has
acknowledged every one; a failed send fails the task, and Spark runs it again, sending its rows
again. So ``commit`` on the driver has nothing left to do but count, and ``abort`` cannot take
back what was acknowledged: after an aborted job (or a stream batch replayed after a crash),
the topic may hold some rows twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, DataType, IntegerType, StringType, StructType

from client.batch import RecordFuture
from client.producer import Producer
from pipeline.options import WriteOptions

log = logging.getLogger("odradek.pipeline")

# Column name -> the Spark types it may have.
_COLUMN_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "value": (BinaryType, StringType),
    "key": (BinaryType, StringType),
    "topic": (StringType,),
    "partition": (IntegerType,),
}


class SinkSchemaError(ValueError):
    """The rows to write lack a column the sink needs, or have one of the wrong type."""


@dataclass(frozen=True)
class SinkColumns:
    """Which of the sink's columns the rows carry."""

    key: bool
    topic: bool
    partition: bool

    @classmethod
    def from_schema(cls, schema: StructType, options: WriteOptions) -> SinkColumns:
        fields = {f.name: f.dataType for f in schema.fields}
        for name, allowed in _COLUMN_TYPES.items():
            if name in fields and not isinstance(fields[name], allowed):
                kinds = " or ".join(t.typeName() for t in allowed)
                raise SinkSchemaError(
                    f"column '{name}' is {fields[name].simpleString()}; it must be {kinds}"
                )
        if "value" not in fields:
            raise SinkSchemaError("column 'value' is required to write to odradek")
        if options.topic is None and "topic" not in fields:
            raise SinkSchemaError("give the option 'topic' or a column 'topic' to write to")
        return cls(key="key" in fields, topic="topic" in fields, partition="partition" in fields)


@dataclass
class SentMessages(WriterCommitMessage):
    count: int


def produce(
    options: WriteOptions, columns: SinkColumns, batches: Iterable[pa.RecordBatch]
) -> SentMessages:
    """Send every row; return once all are acknowledged, or raise the first failure."""
    count = 0
    with Producer(
        options.bootstrap,
        client_id="odradek-spark",
        acks=options.acks,
        compression=options.compression,
        linger_ms=options.linger_ms,
        batch_bytes=options.batch_bytes,
        **options.security.options(),
    ) as producer:
        waiting: list[RecordFuture] = []
        send = producer.send
        for batch in batches:
            rows = zip(
                _topics(batch, options),
                _bytes(batch, "value"),
                _bytes(batch, "key") if columns.key else repeat(None),
                batch.column("partition").to_pylist() if columns.partition else repeat(None),
                strict=False,
            )
            for topic, value, key, partition in rows:
                waiting.append(send(topic, value, key, partition))
            count += batch.num_rows
            waiting = _unsettled(waiting)
        producer.flush()
        _unsettled(waiting)
    return SentMessages(count)


def _topics(batch: pa.RecordBatch, options: WriteOptions) -> Iterator[str]:
    if options.topic is not None:
        return repeat(options.topic, batch.num_rows)
    topics: list[Any] = batch.column("topic").to_pylist()
    if None in topics:
        raise SinkSchemaError("a row has a null 'topic' and the option 'topic' is not set")
    return iter(topics)


def _bytes(batch: pa.RecordBatch, name: str) -> list[bytes | None]:
    column = batch.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def _unsettled(futures: list[RecordFuture]) -> list[RecordFuture]:
    """The futures still waiting; raises the first failure among the settled ones."""
    for future in futures:
        if future.failed():
            error = future.exception()
            assert error is not None
            raise error
    return [f for f in futures if not f.done()]


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return produce(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("wrote %d messages", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning(
            "write aborted; %d messages acknowledged by finished tasks stay in their topics",
            _total(messages),
        )


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return produce(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("batch %d: wrote %d messages", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "batch %d aborted; %d messages acknowledged by finished tasks stay in their topics",
            batchId,
            _total(messages),
        )


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.count for m in messages if isinstance(m, SentMessages))
