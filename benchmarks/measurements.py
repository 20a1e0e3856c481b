"""From the areas' own JSON lines to one line per measurement, with the peers beside it.

Every benchmark script prints lines in its own shape: ``{"bench": "producer", "codec": "lz4",
"messages": 20000, "msgs_per_s": 61000, "mb_per_s": 6.1}``. Here each numeric field named like a
result (``*_per_s``, ``p99_ms``, ``*_rss_mb``, ...) becomes one ``Measurement`` named
``<bench>.<field>`` with its unit; the other fields are its parameters. A line may instead already
be one measurement (``name``, ``value``, ``unit``, optional ``params``).

Lines with a ``system`` field come from a peer (``redis``, ``nats``) or from the machine's raw
limits (``limit``). ``join`` hangs each of them on odradek's measurement with the same name and
unit whose workload agrees (``JOIN_KEYS``; a key odradek's line does not state matches any
value), and the printed line carries the peer's value and ``ratio`` = odradek / peer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ODRADEK = "odradek"
JOIN_KEYS = ("messages", "value_bytes", "rate_per_s")
_STAT_WORDS = frozenset({
    "p50", "p90", "p95", "p99", "p999", "max", "min", "mean", "median", "avg", "best",
    "time", "elapsed", "duration", "latency", "rebalance",
})
_SETTING_WORDS = frozenset({"rate", "target", "linger", "timeout", "interval"})
_TIME_UNITS = {"ms": "ms", "us": "µs", "s": "s"}
_RATE_UNITS = {"mb": "MB/s", "msgs": "msg/s", "messages": "msg/s"}


def unit_of(key: str) -> str | None:
    """The unit of a result field, or None when the field is a parameter.

    ``mb_per_s`` -> MB/s, ``heartbeats_per_s`` -> heartbeats/s, ``p999_ms`` -> ms,
    ``coordinator_bytes_per_member`` -> B/member,
    ``rebalance_s`` -> s, ``peak_rss_mb`` -> MB, ``ratio`` and ``ratio_with_crc`` -> x; but
    ``min_cleanable_dirty_ratio`` (a setting), ``linger_ms`` or
    ``rate_per_s`` or ``total_mb`` are settings of the run, so parameters.
    """
    words = key.split("_")
    if words[0] == "ratio":
        return "x"
    if words[0] in _SETTING_WORDS:
        return None
    if key.endswith("_per_s"):
        what = key[: -len("_per_s")].rsplit("_", 1)[-1]
        return _RATE_UNITS.get(what, f"{what}/s")
    if "_bytes_per_" in key:  # coordinator_bytes_per_member -> B/member
        return "B/" + key.rsplit("_bytes_per_", 1)[1]
    if words[-1] in _TIME_UNITS and _STAT_WORDS.intersection(words[:-1]):
        return _TIME_UNITS[words[-1]]
    if key == "seconds":
        return "s"
    if key.endswith("rss_mb"):
        return "MB"
    return None


@dataclass
class Measurement:
    area: str
    name: str
    params: dict[str, Any]
    value: float
    unit: str
    system: str = ODRADEK
    peers: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"area": self.area, "name": self.name}
        if self.system != ODRADEK:
            line["system"] = self.system
        line.update(params=self.params, value=self.value, unit=self.unit)
        if self.peers:
            line["peers"] = {
                peer: {"value": value, "ratio": ratio(self.value, value)}
                for peer, value in self.peers.items()
            }
        return line


@dataclass(frozen=True)
class Problem:
    """An area, or a part of one (a peer), that is missing or failed."""

    area: str
    name: str
    status: str  # "missing" or "failed"
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"area": self.area, "name": self.name, "status": self.status, "reason": self.reason}


def ratio(value: float, peer_value: float) -> float | None:
    if not peer_value or math.isnan(peer_value) or math.isnan(value):
        return None
    return round(value / peer_value, 3)


def normalise(area: str, line: Mapping[str, Any]) -> list[Measurement] | Problem:
    """One raw line of an area as measurements (or as the problem it reports)."""
    if line.get("status") in ("missing", "failed"):
        return Problem(area, str(line.get("name", area)), line["status"], str(line.get("reason")))
    system = str(line.get("system", ODRADEK))
    if {"name", "value", "unit"} <= line.keys():
        params = dict(line.get("params") or {})
        return [Measurement(area, line["name"], params, line["value"], line["unit"], system)]
    bench = str(line.get("bench", area))
    results: dict[str, tuple[float, str]] = {}
    params = {}
    for key, value in line.items():
        if key in ("bench", "system"):
            continue
        unit = unit_of(key)
        if unit is not None and _is_number(value):
            results[key] = (value, unit)
        elif unit is None:
            params[key] = value
    return [
        Measurement(area, f"{bench}.{key}", params, value, unit, system)
        for key, (value, unit) in results.items()
    ]


def join(measurements: Iterable[Measurement]) -> list[Measurement]:
    """Odradek's measurements with their peers attached, then the peer and limit measurements
    that found no odradek measurement to stand beside (so nothing measured is dropped)."""
    ours: list[Measurement] = []
    theirs: list[Measurement] = []
    for m in measurements:
        (ours if m.system == ODRADEK else theirs).append(m)
    used: set[int] = set()
    for m in ours:
        for i, peer in enumerate(theirs):
            if _same_workload(m, peer):
                m.peers[peer.system] = peer.value
                used.add(i)
    return ours + [peer for i, peer in enumerate(theirs) if i not in used]


def _same_workload(ours: Measurement, peer: Measurement) -> bool:
    if (ours.name, ours.unit) != (peer.name, peer.unit):
        return False
    return all(
        ours.params.get(key, peer.params[key]) == peer.params[key]
        for key in JOIN_KEYS
        if key in peer.params
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def fmt(value: float) -> str:
    """A figure as the report prints it: thousands separated, three significant digits below
    10, one decimal below 100."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def json_line(item: Measurement | Problem) -> str:
    return json.dumps(item.to_json(), ensure_ascii=False)
