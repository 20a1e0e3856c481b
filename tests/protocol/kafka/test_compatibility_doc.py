"""docs/kafka-compatibility.md's API table is the table ApiVersions advertises, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from protocol.kafka.api_versions import advertised_versions

DOC = Path(__file__).resolve().parents[3] / "docs" / "kafka-compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+)[^|]* \| (\d+)(?:-(\d+))? \|$", re.MULTILINE)


def test_the_documented_table_is_the_advertised_one() -> None:
    documented = [
        (int(key), int(low), int(high or low)) for key, _, low, high in ROW.findall(DOC.read_text())
    ]
    advertised = [(r["api_key"], r["min_version"], r["max_version"]) for r in advertised_versions()]
    assert documented == advertised
