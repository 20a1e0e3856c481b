"""A regression guard for people: this run against a saved one (``benchmarks.run --compare``).

A saved run is the JSON lines ``benchmarks.run --json`` prints (``--save FILE`` writes them);
benchmarks/baseline-quick.jsonl holds the latest quick run, refreshed when a change is meant to
move a figure. Every odradek figure measured in both runs is compared -- same area, name,
parameters and unit -- and, where a peer ran the same workload in both, odradek's ratio to that
peer too: the machine's speed drifts from day to day, the ratio to a peer measured in the same
run much less. A figure is *worse* when it moved the wrong way by more than ``THRESHOLD``: a
rate, or a ratio to a peer or to the machine's limit, fell below 80% of the saved one; a time
or a memory figure rose above 120%. Machines are noisy: this lists what to look at again, it
does not fail a build.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.measurements import Measurement, ratio

THRESHOLD = 0.2
BASELINE = Path(__file__).resolve().parent / "baseline-quick.jsonl"

Key = tuple[str, str, str, str]  # area, name, parameters (JSON), unit


@dataclass(frozen=True)
class Change:
    """One figure in both runs: ``what`` names it (with ``vs <peer>`` for a ratio to a peer)."""

    what: str
    params: str
    unit: str
    saved: float
    now: float
    higher_is_better: bool

    @property
    def factor(self) -> float:
        """How much better (above 1) or worse (below 1) the figure got."""
        if not self.saved or not self.now:
            return 1.0 if self.saved == self.now else 0.0
        moved = self.now / self.saved
        return moved if self.higher_is_better else 1 / moved

    @property
    def worse(self) -> bool:
        limit = 1 - THRESHOLD if self.higher_is_better else 1 / (1 + THRESHOLD)
        return self.factor < limit


def higher_is_better(unit: str) -> bool:
    """Rates (``.../s``) and ratios (``x``) are better higher; times and memory lower."""
    return unit.endswith("/s") or unit == "x"


def load(path: Path) -> list[dict[str, Any]]:
    """The measurement lines of a saved run (problem lines and blank lines left out)."""
    lines = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON line ({exc})") from None
        if {"name", "value", "unit"} <= line.keys():
            lines.append(line)
    return lines


def changes(saved: Iterable[Mapping[str, Any]], now: Iterable[Measurement]) -> list[Change]:
    """Every odradek figure, and ratio to a peer, found in both runs."""
    before = {_key(line): line for line in saved if "system" not in line}
    out = []
    for m in now:
        if m.system != "odradek":
            continue
        key = (m.area, m.name, json.dumps(m.params, sort_keys=True), m.unit)
        old = before.get(key)
        if old is None:
            continue
        params = " ".join(f"{k}={v}" for k, v in m.params.items())
        better = higher_is_better(m.unit)
        out.append(Change(f"{m.area} {m.name}", params, m.unit, old["value"], m.value, better))
        for peer, value in m.peers.items():
            old_ratio = (old.get("peers") or {}).get(peer, {}).get("ratio")
            new_ratio = ratio(m.value, value)
            if old_ratio is not None and new_ratio is not None:
                out.append(Change(f"{m.area} {m.name} / {peer}", params, "x", old_ratio,
                                  new_ratio, better))
    return out


def _key(line: Mapping[str, Any]) -> Key:
    return (line["area"], line["name"], json.dumps(line.get("params") or {}, sort_keys=True),
            line["unit"])


def report(path: Path, found: Sequence[Change]) -> list[str]:
    """The lines to print: how many figures were compared, then each one that got worse."""
    worse = [c for c in found if c.worse]
    lines = [f"compared with {path}: {len(found)} figures in both runs, {len(worse)} more than "
             f"{THRESHOLD:.0%} worse"]
    for c in sorted(worse, key=lambda c: c.factor):
        moved = f"{c.now / c.saved:.2f}x" if c.saved else "from 0"
        lines.append(f"  {c.what} [{c.params}]: {_number(c.saved)} -> {_number(c.now)} "
                     f"{c.unit} ({moved}, {'higher' if c.higher_is_better else 'lower'} is "
                     "better)")
    return lines


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
