"""``benchmarks.run --compare``: every figure more than 20% worse than in a saved run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import benchmarks
from benchmarks import compare, run
from benchmarks.measurements import Measurement
from tests.benchmarks.test_run import FAKE_AREAS


def saved_line(name: str, value: float, unit: str, **extra: object) -> dict[str, object]:
    return {"area": "a", "name": name, "params": {"n": 1}, "value": value, "unit": unit, **extra}


def now(name: str, value: float, unit: str, peers: dict[str, float] | None = None) -> Measurement:
    return Measurement("a", name, {"n": 1}, value, unit, peers=peers or {})


def listed(saved: list[dict[str, object]], current: list[Measurement]) -> list[str]:
    return [c.what for c in compare.changes(saved, current) if c.worse]


@pytest.mark.parametrize(
    ("unit", "before", "after", "worse"),
    [
        ("msg/s", 100_000, 79_000, True),
        ("msg/s", 100_000, 81_000, False),
        ("msg/s", 100_000, 300_000, False),
        ("x", 0.9, 0.7, True),  # a fraction of the machine's limit
        ("ms", 10.0, 12.5, True),
        ("ms", 10.0, 11.5, False),
        ("ms", 10.0, 2.0, False),
        ("MB", 40.0, 50.0, True),
    ],
)
def test_a_figure_is_worse_past_20_percent_the_wrong_way(
    unit: str, before: float, after: float, worse: bool
) -> None:
    assert listed([saved_line("f", before, unit)], [now("f", after, unit)]) == (
        ["a f"] if worse else []
    )


def test_the_ratio_to_a_peer_is_compared_too() -> None:
    """The machine got faster and so did the peer, more: the ratio shows it."""
    saved = [saved_line("f", 100, "msg/s", peers={"redis": {"value": 50, "ratio": 2.0}})]
    assert listed(saved, [now("f", 110, "msg/s", peers={"redis": 100})]) == ["a f / redis"]
    saved = [saved_line("p99", 10, "ms", peers={"redis": {"value": 10, "ratio": 1.0}})]
    assert listed(saved, [now("p99", 11, "ms", peers={"redis": 8})]) == ["a p99 / redis"]


def test_figures_in_one_run_only_and_peer_lines_are_left_out() -> None:
    saved = [saved_line("gone", 1, "msg/s"), saved_line("f", 1, "msg/s", system="redis")]
    assert compare.changes(saved, [now("new", 1, "msg/s"), now("f", 0.1, "msg/s")]) == []


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report without plots: quicker, and matplotlib stays unimported for other tests."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "benchmarks.plots", raising=False)
    monkeypatch.delattr(benchmarks, "plots", raising=False)  # else `from benchmarks import plots`


@pytest.mark.usefixtures("no_plots")
def test_run_saves_a_baseline_and_lists_what_got_worse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.jsonl"
    report = str(tmp_path / "r.md")
    run.main(["--quick", "--json", "--report", report, "--save", str(baseline)], areas=FAKE_AREAS)
    lines = [json.loads(line) for line in baseline.read_text().splitlines()]
    assert lines == [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for line in lines:
        if line.get("name") == "producer.msgs_per_s":
            line["value"] *= 2  # it was twice as fast then, against the same Redis
            line["peers"]["redis"]["ratio"] *= 2
    baseline.write_text("".join(json.dumps(line) + "\n" for line in lines))

    run.main(["--quick", "--report", report, "--compare", str(baseline)], areas=FAKE_AREAS)
    out = capsys.readouterr().out
    text = out[out.index(f"compared with {baseline}"):]
    assert "2 more than 20% worse" in text
    assert "throughput producer.msgs_per_s [codec=none acks=1 messages=1000 value_bytes=100]: " \
           "100,000 -> 50,000 msg/s (0.50x, higher is better)" in text
    assert "throughput producer.msgs_per_s / redis [codec=none acks=1 messages=1000 " \
           "value_bytes=100]: 4 -> 2 x (0.50x, higher is better)" in text


@pytest.mark.usefixtures("no_plots")
def test_a_file_that_is_not_json_lines_is_named() -> None:
    with pytest.raises(SystemExit, match="not a JSON line"):
        run.main(["--compare", __file__], areas=FAKE_AREAS)
