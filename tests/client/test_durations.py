"""Durations in messages read as a person writes them, never as a raw float."""

from __future__ import annotations

import pytest

from client.durations import duration_text, seconds_text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 ms"),
        (0.00025, "0.25 ms"),
        (0.0004, "0.4 ms"),
        (0.009999, "10 ms"),
        (0.09349452899994048, "93 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1 s"),
        (1, "1 s"),
        (1.5, "1.5 s"),
        (2.0, "2 s"),
        (9.994, "9.99 s"),
        (12.345, "12.3 s"),
        (59.96, "60 s"),
        (300, "300 s"),
    ],
)
def test_seconds_text(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (850, "850ms"),
        (12_345, "12.3s"),
        (59_949, "59.9s"),
        (59_950, "1m00s"),
        (245_000, "4m05s"),
        (7_380_000, "2h03m"),
        (273_600_000, "3d04h"),
    ],
)
def test_duration_text_for_table_columns(ms: int | None, text: str) -> None:
    assert duration_text(ms) == text
