"""The rows a read produces: Spark's Kafka source schema, built as Arrow record batches.

Readers hand Spark whole Arrow batches rather than a tuple per row: Spark then skips its
per-value Python conversion, which would otherwise cost more than fetching and decoding.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client.records import ConsumerRecord

# Column for column Spark's Kafka source; every column is nullable there too.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

# What Spark expects a batch to be for SCHEMA (it compares the two exactly).
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)

_MICROS_PER_MILLI = 1000


def record_batch(topic: str, partition: int, records: Sequence[ConsumerRecord]) -> pa.RecordBatch:
    """One partition's records (at least one) as a batch. A message without a timestamp
    (format v0 stores none, -1 on the wire) gets a null ``timestamp``."""
    count = len(records)
    millis = pa.array([r.timestamp for r in records], pa.int64())
    micros = pc.if_else(
        pc.less(millis, 0), None, pc.multiply(millis, _MICROS_PER_MILLI)
    ).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([topic] * count, pa.string()),
            pa.array([partition] * count, pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            micros,
            pa.array([r.timestamp_type for r in records], pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )
