"""The mirror benchmark (``python -m benchmarks.mirror``): registered as an area, its aims read
from the pass-through lines, and one tiny real run (two brokers) through the suite's script
runner -- every case's four lines, the mirrored topics checked complete by the script itself."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from benchmarks import aims, mirror, run
from benchmarks.areas import run_script
from benchmarks.measurements import Measurement, join, normalise, unit_of

CASES = [(size, codec) for size in mirror.VALUE_BYTES for codec in mirror.CODECS]


def test_the_mirror_area_is_registered() -> None:
    (area,) = run.select(["mirror"])
    assert area.name == "mirror"


def test_one_kib_values_get_a_fifth_of_the_messages() -> None:
    assert mirror.counts(None, quick=False) == {100: 1_000_000, 1024: 200_000}
    assert mirror.counts(2_000, quick=True) == {100: 2_000, 1024: 400}


def _passthrough(codec: str, value_bytes: int, to_slower: float, to_recompress: float
                 ) -> dict[str, Any]:
    return {"bench": "mirror", "mode": "passthrough", "codec": codec, "value_bytes": value_bytes,
            "messages": 1_000, "partitions": 4, "rounds": 1, "msgs_per_s": 500_000,
            "mb_per_s": 50.0, "join_time_ms": 300.0, "start_time_ms": 100.0,
            "ratio_to_slower_client": to_slower,
            "ratio_to_recompress": to_recompress}


def _measurements(*lines: dict[str, Any]) -> list[Measurement]:
    found: list[Measurement] = []
    for line in lines:
        item = normalise("mirror", line)
        assert isinstance(item, list)
        found += item
    return join(found)


def _mirror_outcomes(lines: list[Measurement]) -> dict[str, aims.Outcome]:
    return {o.aim.what: o for o in aims.evaluate(lines) if o.aim.what.startswith("mirror")}


def test_the_mirror_aims_read_the_pass_through_lines() -> None:
    recompress = {**_passthrough("lz4", 100, 0.1, 0.1), "mode": "recompress"}
    del recompress["ratio_to_recompress"]
    lines = _measurements(
        recompress,  # the recompressing line comes first: the aims must not read it
        _passthrough("lz4", 100, 0.9, 3.5), _passthrough("none", 100, 0.8, 1.2),
        _passthrough("lz4", 1024, 0.75, 2.5), _passthrough("none", 1024, 0.71, 1.1),
    )
    found = _mirror_outcomes(lines)
    (slower, against) = found.values()
    assert [r.value for r in slower.readings] == [0.9, 0.8, 0.75, 0.71]
    assert slower.reached == aims.YES
    assert "msgs/s 500,000" in slower.readings[0].text
    assert [r.value for r in against.readings] == [3.5, 2.5]
    assert against.reached == aims.NO  # 1 KiB lz4 is 2.5x the recompressing mirror


def test_the_mirror_aims_are_not_measured_without_the_area() -> None:
    found = _mirror_outcomes([])
    assert {o.reached for o in found.values()} == {aims.NOT_MEASURED}


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_tiny_run_prints_every_case() -> None:
    lines = list(run_script(
        [sys.executable, "-m", "benchmarks.mirror", "--messages", "2000", "--rounds", "1"],
        time_limit=170))
    expected = mirror.counts(2_000, quick=False)
    cases: dict[tuple[int, str], list[str]] = {}
    for line in lines:
        cases.setdefault((line["value_bytes"], line["codec"]), []).append(
            line["bench"] + (f".{line['mode']}" if "mode" in line else ""))
        assert line["messages"] == expected[line["value_bytes"]]
        assert line["partitions"] == mirror.PARTITIONS and line["msgs_per_s"] > 0
        measured = normalise("mirror", line)
        assert isinstance(measured, list)
        assert {m.name for m in measured} >= {f"{line['bench']}.msgs_per_s",
                                             f"{line['bench']}.mb_per_s"}
    assert sorted(cases) == sorted(CASES)
    for benches in cases.values():
        assert benches == ["consumer", "producer", "mirror.passthrough", "mirror.recompress"]
    passthrough = [line for line in lines if line.get("mode") == "passthrough"]
    for line in passthrough:  # tiny counts: any value, but a ratio taken
        assert isinstance(line["ratio_to_slower_client"], float)
        assert isinstance(line["ratio_to_recompress"], float)
    for line in lines:
        if line["bench"] == "mirror":  # the join and the set-up, apart from the copy
            assert line.keys() >= {"join_time_ms", "start_time_ms"}
        # its parameters are the same in every run: --compare matches lines by them
        params = {key for key in line if unit_of(key) is None}
        assert params == {"bench", "codec", "value_bytes", "messages", "partitions", "rounds",
                          *(("mode",) if line["bench"] == "mirror" else ()),
                          *(("acks",) if line["bench"] == "producer" else ())}
    readings = _mirror_outcomes(_measurements(*lines))
    assert all(r.value is not None for o in readings.values() for r in o.readings)
