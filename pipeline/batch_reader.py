"""Batch reads: the offset ranges are fixed when Spark plans the query.

Planning runs on the driver: resolve the subscription to partitions, ``startingOffsets`` and
``endingOffsets`` to offsets, and cut the ranges (``minPartitions``). Each range is then read
by one Spark task (``pipeline.range_reader``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pipeline.offset_reader import OffsetReader
from pipeline.options import OptionError, ReadOptions
from pipeline.planning import OffsetRange, plan_ranges
from pipeline.range_reader import read_range


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        offsets = OffsetReader(self.options)
        try:
            tps = offsets.partitions()
            start = offsets.resolve(self.options.starting, tps, "startingOffsets")
            end = offsets.resolve(self.options.ending, tps, "endingOffsets")
            if isinstance(self.options.ending, Mapping):
                for tp, latest in offsets.latest(tps).items():
                    if end[tp] > latest:
                        raise OptionError(
                            "endingOffsets", f"{tp}: offset {end[tp]} is past its end ({latest})"
                        )
        finally:
            offsets.close()
        for tp in tps:
            if start[tp] > end[tp]:
                raise OptionError(
                    "startingOffsets",
                    f"{tp}: starting offset {start[tp]} is after the ending offset {end[tp]}",
                )
        return plan_ranges(start, end, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # With nothing to read Spark still runs one task, with a partition of its own making.
        if not isinstance(partition, OffsetRange):
            return iter(())
        return read_range(self.options, partition)
