"""Reading one offset range in an executor: the loader that owns it.

A group-less ``Consumer`` assigned the one partition and seeked to the range's start fetches
from the partition's leader; compressed batches are opened here, in the executor, never by
the broker. Records past the range's end are dropped (a fetch may return more).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from operator import attrgetter

import pyarrow as pa

from client.consumer import Consumer
from client.records import TopicPartition
from pipeline.data_loss import report_data_loss
from pipeline.options import ReadOptions
from pipeline.planning import OffsetRange
from pipeline.schema import record_batch
from protocol.errors import OffsetOutOfRangeError

_MAX_POLL_RECORDS = 20_000  # rows per Arrow batch handed to Spark, at most
_POLL_MS = 1_000
_offset = attrgetter("offset")


def read_range(options: ReadOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``r`` as Arrow batches, in offset order."""
    tp = TopicPartition(r.topic, r.partition)
    stall_limit = options.poll_timeout_ms / 1000
    with Consumer(
        options.bootstrap,
        client_id="odradek-spark",
        auto_offset_reset="none",
        max_poll_records=_MAX_POLL_RECORDS,
        partition_fetch_bytes=4 * 1024 * 1024,
        **options.security.options(),
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        last_progress = time.monotonic()
        while position < r.end:
            try:
                records = consumer.poll(_POLL_MS)
            except OffsetOutOfRangeError:
                position = _skip_lost(consumer, tp, position, r, options.fail_on_data_loss)
                continue
            if not records:
                if time.monotonic() - last_progress > stall_limit:
                    highwater = consumer.highwater(tp)
                    if highwater is not None and position >= highwater:
                        # The log ended before the range for the whole wait: it was truncated
                        # since planning (an unclean election). Not at the first empty poll: a
                        # new leader's high watermark can trail the old one's for a moment.
                        report_data_loss(
                            f"{tp} ends at offset {highwater}, before the planned range "
                            f"[{r.start}, {r.end}) was read",
                            fail=options.fail_on_data_loss,
                        )
                        return
                    raise TimeoutError(
                        f"{tp}: no messages from offset {position} within "
                        f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}"
                    )
                continue
            last_progress = time.monotonic()
            if records[-1].offset >= r.end:
                records = records[: bisect_left(records, r.end, key=_offset)]
            if records:
                yield record_batch(r.topic, r.partition, records,
                                   headers=options.include_headers)
            position = consumer.position(tp)


def _skip_lost(
    consumer: Consumer, tp: TopicPartition, position: int, r: OffsetRange, fail: bool
) -> int:
    """After OFFSET_OUT_OF_RANGE at ``position``: report the loss, then go on from the earliest
    offset still stored, or stop if the range's remainder is gone entirely."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if earliest > position:
        report_data_loss(
            f"{tp}: offsets {position} to {min(earliest, r.end) - 1} were deleted before "
            "they could be read",
            fail=fail,
        )
        consumer.seek(tp, earliest)
        return earliest
    report_data_loss(
        f"{tp}: offset {position} is past the end of the log; the planned range "
        f"[{r.start}, {r.end}) is no longer there",
        fail=fail,
    )
    return r.end
