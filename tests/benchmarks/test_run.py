"""The suite's orchestration on fake areas and fake measurements: no broker, no peers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import benchmarks
from benchmarks import aims, limits, native, peers, report, run, systems
from benchmarks.areas import (
    Area,
    AreaMissing,
    Earlier,
    RawLine,
    run_area,
    run_script,
    script,
)
from benchmarks.processes import descendants
from benchmarks.workloads import Workload, workloads

FAKE = [sys.executable, "-m", "tests.benchmarks.fake_area"]


# ------------------------------------------------------------------------- script areas


def test_a_script_s_json_lines_come_through() -> None:
    lines = list(run_script([*FAKE, "ok"], time_limit=60))
    assert [line["bench"] for line in lines] == ["producer", "consumer"]  # "warming up" skipped
    assert "peak_rss_mb" not in lines[0]  # no broker, no broker memory


def test_lines_carry_the_broker_s_peak_rss_and_a_dropped_script_stops_its_broker() -> None:
    lines = run_script([*FAKE, "broker"], time_limit=60)
    first = next(lines)
    assert first["peak_rss_mb"] > 10  # MB: a broker process
    lines.close()  # the caller gives up: the script is interrupted and stops its broker
    with pytest.raises(ProcessLookupError):
        os.kill(first["broker"], 0)


def test_a_failing_script_fails_with_its_stderr_and_keeps_its_lines() -> None:
    area = Area("fake", "a fake", lambda quick, earlier: run_script([*FAKE, "fail"], 60))
    result = run_area(area, quick=True, earlier={})
    assert result.status == "failed"
    assert "exit status 3" in result.reason and "the broker went away" in result.reason
    assert [line["bench"] for line in result.lines] == ["producer"]


def test_a_script_over_its_time_limit_is_stopped() -> None:
    area = Area("fake", "a fake", lambda quick, earlier: run_script([*FAKE, "hang"], 3))
    result = run_area(area, quick=True, earlier={})
    assert result.status == "failed" and "timed out after 3 s" in result.reason
    (line,) = result.lines
    with pytest.raises(ProcessLookupError):
        os.kill(line["pid"], 0)


def test_a_script_that_needs_a_package_not_installed_is_missing() -> None:
    needs = script("tests.benchmarks.fake_area", quick_args=["needs-package"])
    area = Area("fake", "a fake", needs)
    result = run_area(area, quick=True, earlier={})
    assert result.status == "missing"
    assert result.reason == "Python package odradek_bench_no_such_package is not installed"


def test_a_script_that_does_not_exist_is_missing() -> None:
    area = Area("nothing", "not written yet", script("benchmarks.not_written_yet"))
    result = run_area(area, quick=True, earlier={})
    assert result.status == "missing"
    assert result.reason == "benchmarks/not_written_yet.py does not exist in this checkout"


def test_descendants_finds_children_from_proc() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()


# -------------------------------------------------------------------- the whole command


def _odradek(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    yield {"bench": "producer", "codec": "none", "acks": 1, "messages": 1000, "value_bytes": 100,
           "msgs_per_s": 50_000, "mb_per_s": 5.0, "peak_rss_mb": 40.0}


def _peer(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    # the peers take their workload from the lines of the areas before them
    (workload,) = workloads(earlier["throughput"], quick)
    yield {"bench": "producer", "system": "redis", "messages": workload.messages,
           "value_bytes": workload.value_bytes, "msgs_per_s": 25_000, "mb_per_s": 2.5}
    yield {"bench": "peer_reference", "system": "redis", "tool": "redis-benchmark",
           "pipeline": 1000, "requests": 20_000, "value_bytes": 100, "msgs_per_s": 600_000}
    yield {"status": "missing", "name": "nats", "reason": "nats-server is not installed"}


def _missing(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    raise AreaMissing("benchmarks/group.py does not exist in this checkout")


def _broken(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    yield {"bench": "heartbeat", "heartbeats_per_s": 9000}
    raise ValueError("boom")


FAKE_AREAS = (
    Area("throughput", "producer and consumer", _odradek),
    Area("peers", "the peers", _peer),
    Area("group", "real consumers", _missing),
    Area("coordinator", "raw coordinator", _broken),
)


def test_run_prints_json_lines_with_peers_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the report copes without plots
    monkeypatch.delitem(sys.modules, "benchmarks.plots", raising=False)
    monkeypatch.delattr(benchmarks, "plots", raising=False)  # else `from benchmarks import plots`
    path = tmp_path / "report.md"
    status = run.main(["--quick", "--json", "--report", str(path)], areas=FAKE_AREAS)
    assert status == 1  # an area failed
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {"area": "throughput", "name": "producer.msgs_per_s",
            "params": {"codec": "none", "acks": 1, "messages": 1000, "value_bytes": 100},
            "value": 50_000, "unit": "msg/s",
            "peers": {"redis": {"value": 25_000, "ratio": 2.0}}} in lines
    assert {"area": "coordinator", "name": "heartbeat.heartbeats_per_s", "params": {},
            "value": 9000, "unit": "heartbeats/s"} in lines
    problems = {(line["name"], line["status"]) for line in lines if "status" in line}
    assert problems == {("nats", "missing"), ("group", "missing"), ("coordinator", "failed")}

    assert {"area": "peers", "name": "peer_reference.msgs_per_s", "system": "redis",
            "params": {"tool": "redis-benchmark", "pipeline": 1000, "requests": 20_000,
                       "value_bytes": 100}, "value": 600_000, "unit": "msg/s"} in lines

    text = path.read_text()
    assert text.startswith("# odradek benchmarks\n")
    # the aims first, then the machine, the summary and the native reference beside it
    assert text.index("## Aims") < text.index(aims.table([])[0]) < text.index("| CPU |") \
        < text.index("## Summary") < text.index("Native reference") \
        < text.index("| peer_reference.msgs_per_s | tool=redis-benchmark pipeline=1000 "
                     "requests=20000 value_bytes=100 | 600,000 | msg/s |")
    assert "python -m benchmarks.run --quick --json --report" in text
    for key in ("| CPU |", "| cores |", "| memory |", "| Python |"):
        assert key in text
    assert "| producer.msgs_per_s | codec=none acks=1 messages=1000 value_bytes=100 | 50,000 | " \
           "25,000 (2x) | msg/s |" in text
    assert "| coordinator | raw coordinator | failed | 1 |" in text
    assert "- coordinator: **failed**: ValueError: boom" in text
    assert "- peers / nats: **missing**: nats-server is not installed" in text
    assert "No plots: matplotlib is not installed" in text
    assert not list(tmp_path.glob("*.png"))


def test_without_json_the_summary_table_follows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run.main(["--report", str(tmp_path / "r.md")], areas=FAKE_AREAS[:2]) == 0
    out = capsys.readouterr().out
    assert "| measurement | parameters | odradek | Redis Streams | unit |" in out
    summary = out[out.index("| measurement |"):]
    assert "peer_reference" not in summary  # a reference, not a like-for-like peer
    assert summary.rstrip().endswith(aims.table(aims.evaluate([]))[-1])  # the aims come last


def test_only_runs_the_named_areas_and_refuses_unknown_ones() -> None:
    assert [a.name for a in run.select(["latency", "codec"])] == ["codec", "latency"]
    with pytest.raises(SystemExit, match="unknown area nope"):
        run.select(["nope"])


def test_plots_are_drawn_when_matplotlib_is_there(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = report.side_by_side(
        run.collect([run_area(area, True, {"throughput": list(_odradek(True, {}))})
                     for area in FAKE_AREAS[:2]])[0]
    )
    rows += [report.Row("latency", f"e2e_latency.{stat}_ms", {"rate_per_s": rate}, "ms",
                        {"odradek": 1.0 * rate, "redis": 2.0 * rate})
             for stat in report.LATENCY_STATS for rate in (1000, 10000)]
    from benchmarks import plots

    written = plots.draw(rows, tmp_path, "report")
    assert [p.name for p in written] == ["report-throughput.png", "report-latency.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


# ------------------------------------------------------------------ peers and limits


def test_peers_that_are_not_installed_are_reported_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(systems, "find_program", lambda name: None)
    monkeypatch.setattr(native, "find_program", lambda name: None)
    lines = list(peers.run(True, {}))
    assert lines == [
        {"status": "missing", "name": "redis",
         "reason": "redis-server is not installed (scripts/bench installs it)"},
        {"status": "missing", "name": "nats",
         "reason": "nats-server is not installed (scripts/bench installs it)"},
        {"status": "missing", "name": "redis-benchmark",
         "reason": "redis-benchmark is not installed (redis-benchmark ships with redis-server; "
                   "scripts/bench installs it): no native reference line for Redis"},
    ]


def test_workloads_follow_odradek_s_lines_or_fall_back_to_its_defaults() -> None:
    lines = [
        {"bench": "producer", "codec": "none", "messages": 500, "value_bytes": 1024},
        {"bench": "producer", "codec": "lz4", "messages": 500, "value_bytes": 1024},
        {"bench": "consumer", "messages": 800},
        {"bench": "latency", "messages": 1000},
    ]
    assert workloads(lines, quick=True) == [
        Workload("consumer", 800, 100), Workload("producer", 500, 1024)
    ]
    assert workloads([], quick=True) == [
        Workload("consumer", 20_000, 100), Workload("producer", 20_000, 100)
    ]


def test_limits_measure_the_bytes_of_each_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MIN_SECONDS", 0.0)
    lines = list(limits.run(True, {"throughput": [
        {"bench": "producer", "messages": 1000, "value_bytes": 100},
        {"bench": "consumer", "messages": 1000, "value_bytes": 100},
    ]}))
    kinds = {line["bench"]: line for line in lines}
    assert set(kinds) == {"limit.file_write", "limit.file_read", "limit.socket_copy",
                          "producer", "consumer"}  # one set of limits for equal byte counts
    assert all(kinds[f"limit.{k}"]["bytes"] == 100_000 for k in ("file_write", "file_read"))
    producer = kinds["producer"]
    assert producer["system"] == "limit" and producer["bound_by"] in ("file_write", "socket_copy")
    assert producer["mb_per_s"] == kinds[f"limit.{producer['bound_by']}"]["mb_per_s"] > 0
