"""The ``odradek`` data source: Spark's entry point to reading and writing topics."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from pipeline.batch_reader import BatchReader
from pipeline.options import parse_read_options, parse_write_options
from pipeline.schema import read_schema
from pipeline.stream_reader import StreamReader
from pipeline.writing import BatchWriter, SinkColumns, StreamWriter


class OdradekDataSource(DataSource):
    """``spark.read.format("odradek")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        return read_schema(self.options)

    def reader(self, schema: StructType) -> BatchReader:
        _check_read_schema(schema, read_schema(self.options))
        return BatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> StreamReader:
        _check_read_schema(schema, read_schema(self.options))
        return StreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if overwrite:
            raise ValueError("a topic is append-only: write with mode('append'), not overwrite")
        options = parse_write_options(self.options)
        return BatchWriter(options, SinkColumns.from_schema(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = parse_write_options(self.options)
        return StreamWriter(options, SinkColumns.from_schema(schema, options))


def _check_read_schema(schema: StructType, expected: StructType) -> None:
    if schema != expected:
        raise ValueError(
            f"the odradek source has a fixed schema, {expected.simpleString()} (the headers "
            f"column with includeHeaders=true); do not give it another ({schema.simpleString()})"
        )
