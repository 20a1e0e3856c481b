"""The Kafka-clients benchmark (``python -m benchmarks.kafka_clients``): registered as an area,
and run small through the suite's script runner -- librdkafka's lines beside the native ones."""

from __future__ import annotations

import sys

import pytest

from benchmarks import run
from benchmarks.areas import run_script
from benchmarks.measurements import normalise


def test_the_kafka_clients_area_is_registered() -> None:
    (area,) = run.select(["kafka_clients"])
    assert area.name == "kafka_clients"


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_librdkafka_lines_stand_beside_the_native_ones() -> None:
    lines = list(run_script(
        [sys.executable, "-m", "benchmarks.kafka_clients", "--messages", "2000"], time_limit=170))
    ours = [line for line in lines
            if "bench" in line and line.get("system", "odradek") == "odradek"]
    cases = {(line["bench"], line["client"], line.get("codec"), line.get("acks"))
             for line in ours}
    for codec in ("none", "lz4"):
        for acks in (1, -1):
            for client in ("odradek", "confluent-kafka"):
                assert ("producer", client, codec, acks) in cases
    assert ("consumer", "confluent-kafka", "none", None) in cases
    for line in ours:
        assert line["messages"] == 2000 and line["msgs_per_s"] > 0
        if line["client"] == "confluent-kafka":
            assert isinstance(line["ratio_to_native"], float)  # tiny counts: any value
        measured = normalise("kafka_clients", line)
        assert isinstance(measured, list)
        assert {m.name for m in measured} >= {f"{line['bench']}.msgs_per_s"}
    # Redis Streams is measured in the same run when redis-server is installed, else reported
    redis = [line for line in lines if line.get("system") == "redis" or
             line.get("name") == "redis"]
    assert redis
