"""The coordinator benchmark runs end to end and prints its JSON lines (figures not checked)."""

from __future__ import annotations

import json

import pytest

from benchmarks.coordinator import main

pytestmark = pytest.mark.integration


def test_quick_run_prints_heartbeat_and_rebalance_lines(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--quick"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["bench"], line["case"]) for line in lines] == [
        ("coordinator", "heartbeats"), ("coordinator", "rebalance"),
    ]
    assert lines[0]["heartbeats_per_s"] > 0
    assert lines[1]["members"] == 10 and 0 < lines[1]["best_ms"] <= lines[1]["median_ms"]
