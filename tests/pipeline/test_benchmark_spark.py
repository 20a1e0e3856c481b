"""The Spark benchmark's cases run and print their JSON lines (figures are not checked)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from benchmarks.spark import consumer_read, fill, spark_read
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(180)


def test_cases_print_a_json_line_each(
    spark: SparkSession, broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(broker.bootstrap, "bench", 2_000)
    spark_read(spark, broker.bootstrap, "bench", 2_000, "local[2]")
    consumer_read(broker.bootstrap, "bench", 2_000)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["bench"] for line in lines] == ["spark_batch_read", "consumer_read"]
    assert all(line["messages"] == 2_000 and line["rows_per_s"] > 0 for line in lines)
