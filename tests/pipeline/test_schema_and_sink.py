"""The row schema Spark is given, and the columns a write needs (no JVM needed)."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from client import ConsumerRecord
from pipeline.options import WriteOptions
from pipeline.schema import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    SCHEMA,
    SCHEMA_WITH_HEADERS,
    read_schema,
    record_batch,
)
from pipeline.writing import SinkColumns, SinkSchemaError


def test_batches_have_exactly_the_arrow_schema_spark_expects() -> None:
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)
    assert SCHEMA.fieldNames() == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"
    ]


def test_record_batch_columns() -> None:
    records = [
        ConsumerRecord("t", 3, 7, timestamp=1_700_000_000_123, timestamp_type=1, key=b"k",
                       value=b"v"),
        ConsumerRecord("t", 3, 9, timestamp=-1, timestamp_type=0, key=None, value=None),
    ]
    batch = record_batch("t", 3, records)
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestampType"])
            for r in rows] == [(b"k", b"v", "t", 3, 7, 1), (None, None, "t", 3, 9, 0)]
    assert rows[0]["timestamp"].timestamp() == 1_700_000_000.123
    assert rows[1]["timestamp"] is None  # v0 messages carry no timestamp


def test_include_headers_adds_sparks_headers_column() -> None:
    assert to_arrow_schema(SCHEMA_WITH_HEADERS, timezone="UTC").equals(ARROW_SCHEMA_WITH_HEADERS)
    assert SCHEMA_WITH_HEADERS.simpleString().endswith(
        ",headers:array<struct<key:string,value:binary>>>")
    assert read_schema({"includeHeaders": "true"}) == SCHEMA_WITH_HEADERS
    assert read_schema({"INCLUDEHEADERS": "True"}) == SCHEMA_WITH_HEADERS
    assert read_schema({"includeHeaders": "false"}) == read_schema({}) == SCHEMA


def test_record_batch_headers_column() -> None:
    records = [
        ConsumerRecord("t", 0, 1, 5, 0, None, b"v", (("a", b"1"), ("a", None), ("b", b""))),
        ConsumerRecord("t", 0, 2, 5, 0, None, b"w"),
    ]
    batch = record_batch("t", 0, records, headers=True)
    assert batch.schema.equals(ARROW_SCHEMA_WITH_HEADERS)
    assert batch.column("headers").to_pylist() == [
        [{"key": "a", "value": b"1"}, {"key": "a", "value": None}, {"key": "b", "value": b""}],
        None,  # no headers: null, as Spark's Kafka source gives
    ]
    assert record_batch("t", 0, records).schema.equals(ARROW_SCHEMA)


TYPES = {
    "binary": BinaryType(), "string": StringType(), "int": IntegerType(), "bigint": LongType(),
    "double": DoubleType(),
}


def schema(ddl: str) -> StructType:
    """A StructType from ``"name type, ..."`` (without a JVM, which StructType.fromDDL needs)."""
    fields = [column.split() for column in ddl.split(",")]
    return StructType([StructField(name, TYPES[kind]) for name, kind in fields])


def test_sink_columns() -> None:
    to_topic = WriteOptions("h:1", topic="out")
    columns = SinkColumns.from_schema(schema("value binary, key string, partition int"), to_topic)
    assert columns == SinkColumns(key=True, topic=False, partition=True)
    columns = SinkColumns.from_schema(schema("topic string, value string, extra int"),
                                      WriteOptions("h:1"))
    assert columns == SinkColumns(key=False, topic=True, partition=False)


@pytest.mark.parametrize(
    ("ddl", "topic", "problem"),
    [
        ("key string", "out", "column 'value' is required"),
        ("value int", "out", "column 'value' is int; it must be binary or string"),
        ("value string, key double", "out", "column 'key' is double"),
        ("value string, partition bigint", "out", "column 'partition' is bigint"),
        ("value string", None, "give the option 'topic' or a column 'topic'"),
    ],
)
def test_sink_column_problems(ddl: str, topic: str | None, problem: str) -> None:
    with pytest.raises(SinkSchemaError, match=problem):
        SinkColumns.from_schema(schema(ddl), WriteOptions("h:1", topic=topic))
