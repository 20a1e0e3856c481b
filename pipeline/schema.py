"""The rows a read produces: Spark's Kafka source schema, built as Arrow record batches.

Readers hand Spark whole Arrow batches rather than a tuple per row: Spark then skips its
per-value Python conversion, which would otherwise cost more than fetching and decoding.

With the option ``includeHeaders`` "true" the rows have a last column ``headers``, as Spark's
Kafka source gives it: ``array<struct<key:string,value:binary>>``, the record's headers in
order, null for a record without any (all of format v0/v1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
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

HEADERS_FIELD = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)
SCHEMA_WITH_HEADERS = StructType([*SCHEMA.fields, HEADERS_FIELD])
_ARROW_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", _ARROW_HEADERS))

_MICROS_PER_MILLI = 1000


def includes_headers(options: Mapping[str, str]) -> bool:
    """Whether the options ask for the ``headers`` column (``includeHeaders``, any case, as
    Spark's options are)."""
    for name, value in options.items():
        if name.lower() == "includeheaders":
            return str(value).strip().lower() == "true"
    return False


def read_schema(options: Mapping[str, str]) -> StructType:
    """The rows a read with these options produces."""
    return SCHEMA_WITH_HEADERS if includes_headers(options) else SCHEMA


def record_batch(
    topic: str, partition: int, records: Sequence[ConsumerRecord], *, headers: bool = False
) -> pa.RecordBatch:
    """One partition's records (at least one) as a batch, with the ``headers`` column if
    asked. A message without a timestamp (format v0 stores none, -1 on the wire) gets a null
    ``timestamp``."""
    count = len(records)
    millis = pa.array([r.timestamp for r in records], pa.int64())
    micros = pc.if_else(
        pc.less(millis, 0), None, pc.multiply(millis, _MICROS_PER_MILLI)
    ).cast(pa.timestamp("us", tz="UTC"))
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * count, pa.string()),
        pa.array([partition] * count, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        micros,
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if not headers:
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    # Spark's Kafka source gives null, not an empty array, to a record without headers
    columns.append(pa.array([r.headers or None for r in records], _ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA_WITH_HEADERS)
