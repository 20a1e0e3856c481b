"""The example jobs on small known inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline.jobs import windowed_counts
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.pipeline.support import create_topic, produce

pytestmark = pytest.mark.timeout(240)


def test_windowed_counts_job_counts_events_per_key_and_window(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    create_topic(broker.bootstrap, "counts", 1)
    # 150 events one second apart: windows of one minute (from the epoch) hold 60 at most.
    sent = produce(broker.bootstrap, "events", 150, partitions=2)
    expected = Counter(
        (s.timestamp // 60_000 * 60_000, s.key.decode() if s.key else None) for s in sent
    )
    assert len({window for window, _ in expected}) == 3
    args = windowed_counts.parse_args(
        [
            "--bootstrap", broker.bootstrap, "--source", "events", "--sink", "counts",
            "--checkpoint", str(tmp_path / "checkpoint"), "--available-now",
        ]
    )
    query = windowed_counts.run(spark, args)
    assert query.awaitTermination(120)
    assert query.exception() is None

    counts = (
        spark.read.format("odradek")
        .option("bootstrap.servers", broker.bootstrap)
        .option("subscribe", "counts")
        .load()
        .orderBy("offset")
        .collect()
    )
    final = {}  # the last message per key is the count
    for row in counts:
        final[row.key] = json.loads(row.value)
    got = {(_iso_to_ms(r["window_start"]), r["key"]): r["count"] for r in final.values()}
    assert got == dict(expected)


def _iso_to_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_topic_to_parquet_job_runs_from_the_command_line(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    sent = produce(broker.bootstrap, "events", 40, partitions=2, compression="lz4")
    output = tmp_path / "events-parquet"
    done = subprocess.run(
        [
            sys.executable, "-m", "pipeline.jobs.topic_to_parquet",
            "--bootstrap", broker.bootstrap, "--topic", "events", "--output", str(output),
            "--ending-offsets", json.dumps({"events": {"0": 5, "1": -1}}),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    expected = [s for s in sent if s.partition == 1 or s.offset < 5]
    assert f"wrote {len(expected)} messages to {output}" in done.stdout
    rows = spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == sorted(
        (s.partition, s.offset, s.value) for s in expected
    )
