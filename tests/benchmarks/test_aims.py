"""The aims table: each aim's figures read from a run's own lines, and whether it was reached."""

from __future__ import annotations

from typing import Any

from benchmarks import aims, compare
from benchmarks.measurements import Measurement, join, normalise


def measurements(*lines: tuple[str, dict[str, Any]]) -> list[Measurement]:
    found: list[Measurement] = []
    for area, line in lines:
        item = normalise(area, line)
        assert isinstance(item, list)
        found += item
    return join(found)


PRODUCER = {"bench": "producer", "acks": 1, "messages": 20_000, "value_bytes": 100}
REDIS = {"system": "redis", "messages": 20_000, "value_bytes": 100}
LINES = measurements(
    ("throughput", {**PRODUCER, "codec": "none", "msgs_per_s": 750_000}),
    ("throughput", {**PRODUCER, "codec": "lz4", "msgs_per_s": 600_000}),
    ("throughput", {**PRODUCER, "api": "send_many", "codec": "none", "msgs_per_s": 900_000}),
    ("throughput", {**PRODUCER, "api": "send_many", "codec": "lz4", "msgs_per_s": 800_000}),
    ("peers", {"bench": "producer", **REDIS, "msgs_per_s": 100_000}),
    ("throughput", {"bench": "consumer", "codec": "none", "messages": 20_000, "value_bytes": 100,
                    "max_poll_records": 10_000, "msgs_per_s": 2_600_000}),
    ("peers", {"bench": "consumer", **REDIS, "msgs_per_s": 500_000}),
    # no Redis line at this rate: the ratio cannot be taken
    ("latency", {"bench": "e2e_latency", "rate_per_s": 100_000, "value_bytes": 100,
                 "messages": 100_000, "p99_ms": 1.5}),
    ("log", {"bench": "log.append", "value_bytes": 1024, "flush_messages": None, "ratio": 0.15,
             "ratio_with_crc": 0.85}),
    ("log", {"bench": "log.append", "value_bytes": 1024, "flush_messages": 10_000,
             "ratio": 0.4, "ratio_with_crc": 0.5}),  # with flushing: not the aim's case
    ("scale", {"bench": "scale_groups", "groups": 1_000, "members": 10_000, "rebalancing": 100,
               "rebalancing_heartbeat_p99_ms": 8.0, "coordinator_bytes_per_member": 2_100}),
    ("group_failover", {"bench": "offsets_catch_up", "records": 1_000_001,
                        "catch_up_time_ms": 1663.0}),
)


def outcomes() -> dict[str, aims.Outcome]:
    return {o.aim.what: o for o in aims.evaluate(LINES)}


def test_an_aim_is_reached_only_when_every_figure_is_on_its_side() -> None:
    found = outcomes()
    producer = found["producer `send()`, acks=1, lz4 and none"]
    assert [r.value for r in producer.readings] == [7.5, 6.0]  # send()'s lines, not send_many's
    assert producer.reached == aims.NO  # none reached 7x, lz4 did not
    send_many = found["producer `send_many()`, acks=1, lz4 and none"]
    assert [r.value for r in send_many.readings] == [9.0, 8.0]
    assert send_many.reached == aims.YES
    assert found["consumer `poll()` with CRC checks"].reached == aims.YES  # 5.2x
    assert found["1,000,000 offset records loaded (Catch-up)"].reached == aims.YES  # <= 5,000 ms


def test_a_figure_missing_from_the_run_is_not_measured() -> None:
    found = outcomes()
    heartbeats = found["heartbeats handled by one broker"]  # no coordinator line
    assert heartbeats.reached == aims.NOT_MEASURED
    assert heartbeats.readings[0].text == "not measured"
    latency = found["e2e latency p99 at 100k msgs/s"]  # odradek's line, but no Redis beside it
    assert latency.reached == aims.NOT_MEASURED
    assert latency.readings[0].text == "1.5 ms, no redis figure in this run"
    append = found["log append, 1 KiB and 10 KiB messages"]  # 1 KiB reached, 10 KiB not run
    assert [r.value for r in append.readings] == [0.85, None]
    assert append.reached == aims.NOT_MEASURED


def test_a_missed_figure_outweighs_a_missing_one() -> None:
    fetch = outcomes()["broker fetch path"]
    assert fetch.reached == aims.NOT_MEASURED
    lines = [*LINES, *measurements(("log", {"bench": "log.read", "value_bytes": 1024,
                                            "ratio": 0.85}))]
    fetch = next(o for o in aims.evaluate(lines) if o.aim.what == "broker fetch path")
    assert fetch.reached == aims.NO  # log.read missed 0.9; log.sendfile did not run


def test_the_table_shows_the_figures_and_the_size_they_are_from() -> None:
    table = aims.table(aims.evaluate(LINES))
    assert table[0] == "| what | when filed | aim | this run | reached |"
    assert len(table) == 2 + len(aims.AIMS)
    rows = {row.split(" | ")[0].removeprefix("| "): row for row in table[2:]}
    assert rows["producer `send()`, acks=1, lz4 and none"].endswith(
        "| none: 7.5x (750,000 against 100,000 msg/s); lz4: 6x (600,000 against 100,000 msg/s) "
        "| no |")
    assert "| 1 KiB: 0.85 (raw write alone 0.15); 10 KiB: not measured | not measured in this " \
           "run |" in rows["log append, 1 KiB and 10 KiB messages"]
    assert rows["heartbeat p99 while 1,000 groups rebalance"].endswith(
        "| 8 ms with 100 groups rebalancing (the aim's size: 1,000) | yes, at a smaller size |")
    assert rows["coordinator memory per member"].endswith(
        "| 2,100 B/member with 10,000 members (the aim's size: 100,000) | no, at a smaller size |")
    assert rows["1,000,000 offset records loaded (Catch-up)"].endswith(
        "| 1,663 ms with 1,000,001 records | yes |")


def test_every_aim_reads_lines_a_quick_run_prints() -> None:
    """The names and parameters the aims look for are those of the saved quick run; only the
    10 KiB append is not in a quick run (its log area writes 1 KiB messages only)."""
    saved = [
        Measurement(line["area"], line["name"], line["params"], line["value"], line["unit"],
                    peers={p: v["value"] for p, v in (line.get("peers") or {}).items()})
        for line in compare.load(compare.BASELINE) if "system" not in line
    ]
    missing = [(o.aim.what, r.figure.label) for o in aims.evaluate(saved) for r in o.readings
               if r.value is None]
    assert missing == [("log append, 1 KiB and 10 KiB messages", "10 KiB")]
