"""docs/storage.md documents every storage setting with its default and Kafka's names."""

from __future__ import annotations

import re
from pathlib import Path

from broker.log import SETTINGS, LogConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "storage.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and (m := re.fullmatch(r"`(\w+)`", cells[0])):
            rows[m.group(1)] = cells
    return rows


def test_settings_table_matches_the_code() -> None:
    rows = _rows()
    defaults = LogConfig()
    assert sorted(rows) == sorted(s.name for s in SETTINGS)
    for setting in SETTINGS:
        _, default, kafka, _meaning = rows[setting.name]
        value = getattr(defaults, setting.name)
        assert default == f"`{'none' if value is None else value}`", setting.name
        if setting.topic_name:
            assert f"`{setting.topic_name}`" in kafka, setting.name
        assert f"`{setting.broker_name}`" in kafka, setting.name
