"""Durations as a person reads them, in messages and in tables.

A timeout left over from a deadline is a float such as 0.09349452899994048: printed as it is,
an error message reads like a memory dump. Every message that names a duration goes through
``seconds_text``; the groups tables' compact column through ``duration_text``.
"""

from __future__ import annotations


def seconds_text(seconds: float) -> str:
    """``0.25 ms``, ``93 ms``, ``1.5 s``, ``12.3 s``, ``300 s``: milliseconds below a second (at
    most two decimals below 10 ms, whole ones above), seconds with at most two decimals below
    10 s, one below a minute, whole ones above."""
    ms = seconds * 1000
    if abs(ms) < 9.995:  # not "10.00 ms"
        return f"{_trimmed(f'{ms:.2f}')} ms"
    if abs(ms) < 999.5:  # not "1000 ms"
        return f"{ms:.0f} ms"
    if abs(seconds) < 9.995:  # not "10.00 s"
        return f"{_trimmed(f'{seconds:.2f}')} s"
    if abs(seconds) < 59.95:
        return f"{_trimmed(f'{seconds:.1f}')} s"
    return f"{seconds:.0f} s"


def _trimmed(number: str) -> str:
    """``1.50`` -> ``1.5``, ``2.00`` -> ``2``."""
    return number.rstrip("0").rstrip(".") if "." in number else number


def duration_text(ms: int | None) -> str:
    """``850ms``, ``12.3s``, ``4m05s``, ``2h03m``, ``3d04h``; ``-`` for None (a table column:
    compact, no spaces)."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 59_950:  # not "60.0s"
        return f"{ms / 1000:.1f}s"
    seconds = (ms + 500) // 1000  # rounded: 59,950 ms is 1m00s, not 0m59s
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86_400}d{seconds % 86_400 // 3600:02d}h"
