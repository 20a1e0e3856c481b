"""The security benchmark (``python -m benchmarks.security``): registered as an area, and its
``failed_logins`` case run small -- 200 failed logins -- through the suite's script runner."""

from __future__ import annotations

import sys

import pytest

from benchmarks import run, security
from benchmarks.areas import run_script
from benchmarks.measurements import normalise


def test_the_security_area_is_registered() -> None:
    (area,) = run.select(["security"])
    assert area.name == "security"


def test_an_unknown_case_is_refused_naming_the_known_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        security.main(["--cases", "failed_logins,nope"])
    assert "unknown cases ['nope']: choose from producer, consumer, logins, failed_logins" in (
        capsys.readouterr().err)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_failed_logins_line_sets_the_producer_alone_beside_it_under_the_flood() -> None:
    (line,) = run_script([sys.executable, "-m", "benchmarks.security", "--cases",
                          "failed_logins", "--failed-logins", "200"], time_limit=110)
    assert (line["bench"], line["logins"], line["in_flight"]) == ("failed_logins", 200, 25)
    assert line["round_messages"] == 200 and line["value_bytes"] == 100
    assert line["alone_median_ms"] > 0 and line["failed_logins_per_s"] > 0
    # rounds were acknowledged while the flood was on; the ratio is their speed over alone's
    assert line["attacked_median_ms"] > 0
    assert line["ratio"] == pytest.approx(
        line["alone_median_ms"] / line["attacked_median_ms"], abs=0.01)
    measured = normalise("security", line)
    assert isinstance(measured, list)
    units = {m.name: m.unit for m in measured}
    assert units["failed_logins.alone_median_ms"] == "ms"
    assert units["failed_logins.failed_logins_per_s"] == "logins/s"
    assert all(m.params["mechanism"] == "PLAIN" for m in measured)
