"""Streaming reads: each micro-batch reads from the last batch's end to the latest offsets.

The stream's offsets are ``{"topic": {"partition": offset}}`` (Spark stores them in the
checkpoint). ``latestOffset`` asks the leaders (ListOffsets) for every partition the
subscription names now -- new partitions and topics are picked up and read from their
earliest offset -- and caps the answer by ``maxOffsetsPerTrigger``. With
``trigger(availableNow=True)`` the latest offsets are taken once, at the start, and the query
stops when it has read up to them.

With the option ``groupId`` the processed offsets are committed to that consumer group. Spark
calls ``commit(end)`` for a batch only when it plans the next one, so the last batch of an
``availableNow`` run would never be committed; ``latestOffset(start)`` therefore commits
``start`` too (it is always the end of a finished batch). A failed group commit is logged and
the stream carries on: the checkpoint, not the group, is what the stream resumes from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from client.records import TopicPartition
from pipeline.data_loss import report_data_loss
from pipeline.group_commit import GroupCommitter
from pipeline.offset_reader import OffsetReader
from pipeline.offsets import offsets_from_json, offsets_to_json
from pipeline.options import ReadOptions
from pipeline.planning import OffsetRange, cap_offsets, plan_ranges
from pipeline.range_reader import read_range
from protocol.errors import OdradekError

log = logging.getLogger("odradek.pipeline")

JsonOffsets = dict[str, dict[str, int]]


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        # Driver-side state; opened on first use (the planner pickles a fresh reader).
        self._offsets: OffsetReader | None = None
        self._committer: GroupCommitter | None = None
        self._committed: dict[TopicPartition, int] = {}
        self._target: dict[TopicPartition, int] | None = None  # availableNow's end

    @property
    def offsets(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.options)
        return self._offsets

    # ------------------------------------------------------------------------- offsets

    def initialOffset(self) -> JsonOffsets:
        tps = self.offsets.partitions()
        return offsets_to_json(self.offsets.resolve(self.options.starting, tps, "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: Mapping[str, Any], limit: ReadLimit) -> JsonOffsets:
        begin = offsets_from_json(start)
        self._commit_to_group(begin)  # the batch that ended at ``start`` is done
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            begin = {**self.offsets.earliest(new), **begin}
            latest = cap_offsets(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> list[OffsetRange]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        gone = sorted(begin.keys() - until.keys())
        if gone:
            report_data_loss(
                f"partitions {', '.join(map(str, gone))} no longer exist",
                fail=self.options.fail_on_data_loss,
            )
        new = [tp for tp in until if tp not in begin]
        begin.update(self.offsets.earliest(new))
        for tp in sorted(until.keys() & begin.keys()):
            if until[tp] < begin[tp]:
                report_data_loss(
                    f"{tp}: its latest offset went back from {begin[tp]} to {until[tp]} "
                    "(was the topic deleted and created again?)",
                    fail=self.options.fail_on_data_loss,
                )
                del until[tp]
        return plan_ranges(begin, until, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.options, partition)

    # -------------------------------------------------------------------------- commits

    def commit(self, end: Mapping[str, Any]) -> None:
        self._commit_to_group(offsets_from_json(end))

    def _commit_to_group(self, processed: dict[TopicPartition, int]) -> None:
        group_id = self.options.group_id
        if group_id is None or not processed or processed == self._committed:
            return
        if self._committer is None:
            self._committer = GroupCommitter(self.options.bootstrap, group_id,
                                             security=self.options.security)
        try:
            self._committer.commit(processed)
        except OdradekError as exc:
            log.warning("group %r: offsets not committed (%s); carrying on", group_id, exc)
            return
        self._committed = processed

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
        if self._committer is not None:
            self._committer.close()
