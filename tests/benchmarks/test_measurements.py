"""From the areas' raw lines to measurement lines with peers and ratios."""

from __future__ import annotations

import json

import pytest

from benchmarks.measurements import Measurement, Problem, join, json_line, normalise, unit_of


@pytest.mark.parametrize(
    ("key", "unit"),
    [
        ("mb_per_s", "MB/s"),
        ("raw_write_mb_per_s", "MB/s"),
        ("msgs_per_s", "msg/s"),
        ("messages_per_s", "msg/s"),
        ("heartbeats_per_s", "heartbeats/s"),
        ("p50_ms", "ms"),
        ("p999_ms", "ms"),
        ("rebalance_s", "s"),
        ("peak_rss_mb", "MB"),
        ("ratio", "x"),
        ("ratio_with_crc", "x"),
        ("coordinator_bytes_per_member", "B/member"),
        ("join_time_s", "s"),
        # settings of a run, not results
        ("linger_ms", None),
        ("rate_per_s", None),
        ("session_timeout_ms", None),
        ("total_mb", None),
        ("min_cleanable_dirty_ratio", None),
        ("value_bytes", None),
        ("messages", None),
    ],
)
def test_unit_of_tells_results_from_parameters(key: str, unit: str | None) -> None:
    assert unit_of(key) == unit


def test_a_line_becomes_one_measurement_per_result_field() -> None:
    line = {"bench": "latency", "rate_per_s": 1000, "linger_ms": 0, "p50_ms": 0.5, "p99_ms": 3.0,
            "max_ms": None}
    found = normalise("throughput", line)
    assert isinstance(found, list)
    assert [(m.name, m.value, m.unit) for m in found] == [
        ("latency.p50_ms", 0.5, "ms"), ("latency.p99_ms", 3.0, "ms")
    ]
    assert found[0].params == {"rate_per_s": 1000, "linger_ms": 0}
    assert found[0].system == "odradek"


def test_a_line_already_in_measurement_form_is_kept() -> None:
    found = normalise("group", {"name": "rebalance.p50", "value": 1.5, "unit": "s",
                                "params": {"consumers": 10}})
    assert isinstance(found, list)
    assert found == [Measurement("group", "rebalance.p50", {"consumers": 10}, 1.5, "s")]


def test_a_status_line_is_a_problem() -> None:
    found = normalise("peers", {"status": "missing", "name": "nats", "reason": "not installed"})
    assert found == Problem("peers", "nats", "missing", "not installed")
    assert json.loads(json_line(found)) == {
        "area": "peers", "name": "nats", "status": "missing", "reason": "not installed"
    }


def _measurements(area: str, *lines: dict[str, object]) -> list[Measurement]:
    out: list[Measurement] = []
    for line in lines:
        found = normalise(area, line)
        assert isinstance(found, list)
        out += found
    return out


def test_peers_join_odradek_on_the_same_workload_with_ratios() -> None:
    ours = _measurements(
        "throughput",
        {"bench": "producer", "codec": "lz4", "acks": 1, "messages": 20000, "value_bytes": 100,
         "msgs_per_s": 60000, "mb_per_s": 6.0},
        # the consumer line does not state its value size: any peer value size matches
        {"bench": "consumer", "messages": 20000, "msgs_per_s": 300000},
    )
    theirs = _measurements(
        "peers",
        {"bench": "producer", "system": "redis", "messages": 20000, "value_bytes": 100,
         "msgs_per_s": 50000, "mb_per_s": 5.0},
        {"bench": "producer", "system": "limit", "messages": 20000, "value_bytes": 100,
         "mb_per_s": 3000.0, "bound_by": "file_write"},
        {"bench": "consumer", "system": "nats", "messages": 20000, "value_bytes": 100,
         "msgs_per_s": 30000},
        # another workload: stands alone
        {"bench": "producer", "system": "redis", "messages": 500, "value_bytes": 1024,
         "msgs_per_s": 9000},
    )
    joined = join(ours + theirs)
    lines = [json.loads(json_line(m)) for m in joined]
    by_name = {(line["name"], line.get("system")): line for line in lines}
    produced = by_name["producer.msgs_per_s", None]
    assert produced["params"] == {"codec": "lz4", "acks": 1, "messages": 20000, "value_bytes": 100}
    assert produced["value"] == 60000 and produced["unit"] == "msg/s"
    assert produced["peers"] == {"redis": {"value": 50000, "ratio": 1.2}}
    assert by_name["producer.mb_per_s", None]["peers"] == {
        "redis": {"value": 5.0, "ratio": 1.2},
        "limit": {"value": 3000.0, "ratio": 0.002},
    }
    consumed = by_name["consumer.msgs_per_s", None]
    assert consumed["peers"] == {"nats": {"value": 30000, "ratio": 10.0}}
    alone = by_name["producer.msgs_per_s", "redis"]
    assert alone["params"] == {"messages": 500, "value_bytes": 1024} and "peers" not in alone
    assert len(lines) == 4  # the joined peer measurements are not repeated on their own


def test_a_peer_with_a_different_rate_does_not_join() -> None:
    ours = _measurements("latency", {"bench": "e2e_latency", "system": "odradek",
                                     "rate_per_s": 1000, "p99_ms": 2.0})
    theirs = _measurements("latency", {"bench": "e2e_latency", "system": "redis",
                                       "rate_per_s": 10000, "p99_ms": 1.0})
    joined = join(ours + theirs)
    assert joined[0].peers == {}
    assert [m.system for m in joined] == ["odradek", "redis"]
