"""``failOnDataLoss`` against a real broker whose retention deletes segments a read planned on.

The topic has small segments and ``retention.bytes=0``: every closed segment is deleted by the
broker's next maintenance pass (every 100 ms here), the active one never is. So the first few
messages -- all in the one active segment -- stay put while a read is planned on them; producing
more rolls segments, and retention then deletes everything but the newest segment. The tests
wait (polling, with a deadline) for that fixed point: the partition directory holds one segment
and ListOffsets' earliest offset is its base offset. Nothing is produced afterwards, so what is
stored cannot change while Spark reads.

Batch: the ranges start at offsets given before the deletion (``startingOffsets`` JSON).
Streaming: an ``availableNow`` query reads the first messages and records its offsets in the
checkpoint; the deletion happens between that run and the next one, which starts from them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from broker.log import layout
from client import Admin, TopicPartition
from client.offsets import EARLIEST, LATEST
from pipeline.options import parse_read_options
from pipeline.planning import OffsetRange
from pipeline.range_reader import read_range
from tests.broker_process import BrokerProcess
from tests.pipeline.support import Sent, produce, row_to_sent, rows_of

pytestmark = pytest.mark.timeout(240)

TOPIC = "shrinking"
TP = TopicPartition(TOPIC, 0)
FIRST = 20  # messages produced before the read is planned; they fit one segment
MORE_CHUNKS = 10  # then this many produce calls (separate batches) of CHUNK messages each
CHUNK = 40
SEGMENT_BYTES = 2048
RETENTION_DEADLINE_S = 30.0
QUERY_TIMEOUT_S = 120
LOSS = r"Some data may have been lost; set the option failOnDataLoss to false"


@pytest.fixture
def retention_broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    broker = make_broker(settings={"maintenance_interval_ms": 100})
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(
            TOPIC,
            1,
            configs={"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": "0"},
        )
    return broker


def _offsets(bootstrap: str) -> tuple[int, int]:
    """ListOffsets: the partition's (earliest, latest) offsets."""
    with Admin(bootstrap) as admin:
        earliest = admin.list_offsets({TP: EARLIEST})[TP].offset
        latest = admin.list_offsets({TP: LATEST})[TP].offset
    return earliest, latest


def _segment_bases(broker: BrokerProcess) -> list[int]:
    dirs = list(broker.data_dir.rglob(layout.partition_dir_name(TOPIC, 0)))
    assert len(dirs) == 1, dirs
    bases = []
    for path in dirs[0].iterdir():
        parsed = layout.parse_segment_name(path.name)
        if parsed is not None and parsed[1] == layout.LOG:
            bases.append(parsed[0])
    return sorted(bases)


def _produce_until_early_segments_deleted(broker: BrokerProcess, planned: int) -> int:
    """Produce more (rolling segments), then wait until retention has deleted every closed
    segment: one segment left and the earliest offset is its base, past ``planned``.
    Returns that earliest offset."""
    for chunk in range(MORE_CHUNKS):
        produce(broker.bootstrap, TOPIC, CHUNK, partitions=1, first=FIRST + chunk * CHUNK)
    deadline = time.monotonic() + RETENTION_DEADLINE_S
    while True:
        bases = _segment_bases(broker)
        earliest, _ = _offsets(broker.bootstrap)
        if len(bases) == 1 and earliest == bases[0] and earliest > planned:
            return earliest
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"retention did not settle in {RETENTION_DEADLINE_S} s: segments {bases}, "
                f"earliest offset {earliest}\n{broker.log_text()}"
            )
        time.sleep(0.05)  # polling interval, not a stand-in for synchronisation


def _all_sent() -> list[Sent]:
    """What ``produce`` stored, by offset (one partition: offset i holds message i)."""
    return [
        Sent(TOPIC, 0, i, None if i % 7 == 0 else b"k%d" % (i % 5), b"v%d" % i,
             1_700_000_000_000 + i * 1000)
        for i in range(FIRST + MORE_CHUNKS * CHUNK)
    ]


# ------------------------------------------------------------------------------------ batch


def _batch(spark: SparkSession, bootstrap: str, start: int, **options: str) -> DataFrame:
    reader = (
        spark.read.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", json.dumps({TOPIC: {"0": start}}))
        .option("endingOffsets", "latest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _produce_first(broker: BrokerProcess) -> int:
    sent = produce(broker.bootstrap, TOPIC, FIRST, partitions=1)
    assert [s.offset for s in sent] == list(range(FIRST))
    earliest, latest = _offsets(broker.bootstrap)
    assert (earliest, latest) == (0, FIRST), "the first messages must still be stored"
    return earliest


def test_batch_read_fails_naming_the_lost_offsets(
    spark: SparkSession, retention_broker: BrokerProcess
) -> None:
    planned = _produce_first(retention_broker)
    earliest = _produce_until_early_segments_deleted(retention_broker, planned)

    with pytest.raises(Exception, match=LOSS) as failure:
        _batch(spark, retention_broker.bootstrap, planned).collect()
    assert f"{TOPIC}-0: offsets {planned} to {earliest - 1} were deleted" in str(failure.value)


def test_batch_read_without_fail_on_data_loss_returns_exactly_what_is_stored(
    spark: SparkSession,
    retention_broker: BrokerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    planned = _produce_first(retention_broker)
    earliest = _produce_until_early_segments_deleted(retention_broker, planned)
    _, latest = _offsets(retention_broker.bootstrap)
    assert earliest < latest  # some planned messages are gone, some are still there

    rows = rows_of(_batch(spark, retention_broker.bootstrap, planned, failOnDataLoss="false"))
    assert sorted(rows) == _all_sent()[earliest:latest]
    assert _offsets(retention_broker.bootstrap) == (earliest, latest)  # nothing moved meanwhile

    # The executor logs the loss; read the same range in this process to see the warning.
    options = parse_read_options(
        {"bootstrap.servers": retention_broker.bootstrap, "subscribe": TOPIC,
         "failOnDataLoss": "false"},
        streaming=False,
    )
    with caplog.at_level(logging.WARNING, logger="odradek.pipeline"):
        batches = list(read_range(options, OffsetRange(TOPIC, 0, planned, latest)))
    assert sum(b.num_rows for b in batches) == latest - earliest
    assert any(
        f"{TOPIC}-0: offsets {planned} to {earliest - 1} were deleted" in r.getMessage()
        and "failOnDataLoss is false" in r.getMessage()
        for r in caplog.records
    ), caplog.text


# -------------------------------------------------------------------------------- streaming


def _run_stream(
    spark: SparkSession, bootstrap: str, checkpoint: Path, **options: str
) -> tuple[list[Sent], BaseException | None]:
    collected: list[Sent] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        collected.extend(row_to_sent(row) for row in batch.collect())

    reader = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    except Exception as exc:  # the query failed: awaitTermination raises its error
        return collected, exc
    assert finished, "query did not finish in time"
    return collected, query.exception()


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["fail", "carry-on"])
def test_stream_resuming_after_retention_deleted_its_next_offsets(
    spark: SparkSession,
    retention_broker: BrokerProcess,
    tmp_path: Path,
    fail_on_data_loss: bool,
) -> None:
    _produce_first(retention_broker)
    checkpoint = tmp_path / "checkpoint"
    option = {"failOnDataLoss": str(fail_on_data_loss).lower()}
    rows, error = _run_stream(spark, retention_broker.bootstrap, checkpoint, **option)
    assert error is None
    assert sorted(rows) == _all_sent()[:FIRST]  # the checkpoint now says: resume at FIRST

    earliest = _produce_until_early_segments_deleted(retention_broker, FIRST)
    _, latest = _offsets(retention_broker.bootstrap)
    assert FIRST < earliest < latest
    rows, error = _run_stream(spark, retention_broker.bootstrap, checkpoint, **option)
    if fail_on_data_loss:
        assert error is not None, f"no failure; read {len(rows)} rows"
        assert LOSS in str(error)
        assert f"{TOPIC}-0: offsets {FIRST} to {earliest - 1} were deleted" in str(error)
        assert rows == []
    else:
        assert error is None
        assert sorted(rows) == _all_sent()[earliest:latest]
    assert _offsets(retention_broker.bootstrap) == (earliest, latest)
