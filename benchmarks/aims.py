"""The aims of issue #15 (and of ``odradek mirror`` and of rebalancing) and whether a run
reached them: the table at the top of the report.

Each aim names the figures it reads from the run's own measurements (``Figure``: the area, the
measurement and the parameters its line must have; with ``peer``, the figure is odradek's value
÷ that peer's on the same workload in the same run), a threshold and a direction. An aim is
reached (``yes``) when every one of its figures is on the right side of the threshold, not
reached (``no``) when one of them is not, and ``not measured in this run`` when a figure is
missing (its area did not run or its peer was missing) and none of those measured missed. A
figure measured at a smaller size than the aim's (the scale aims in a quick run) says which
size it is from, and so does the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.measurements import ODRADEK, Measurement, fmt, ratio

YES, NO, NOT_MEASURED = "yes", "no", "not measured in this run"
VALUES_100B = {"value_bytes": 100}


@dataclass(frozen=True)
class Size:
    """The parameter of a line that says how big the measured case was, and the aim's size."""

    param: str
    aim: int
    noun: str  # "groups rebalancing": "with 100 groups rebalancing"


@dataclass(frozen=True)
class Figure:
    """One figure an aim reads: an odradek measurement of the run, or its ratio to a peer."""

    label: str  # which case of the aim ("lz4", "1 KiB"); "" when the aim has one figure
    area: str
    name: str
    params: Mapping[str, Any]  # every one must equal the line's
    peer: str | None = None
    beside: tuple[tuple[str, str], ...] = ()  # (label, measurement name) of the same line, shown
    size: Size | None = None


@dataclass(frozen=True)
class Aim:
    what: str
    filed: str  # the figure when the issue was filed
    aim: str
    at_least: bool  # the figure must be >= threshold (else <=)
    threshold: float
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Reading:
    figure: Figure
    value: float | None  # None: not measured in this run
    text: str
    smaller: bool = False  # measured at a smaller size than the aim's


@dataclass(frozen=True)
class Outcome:
    aim: Aim
    readings: Sequence[Reading]

    @property
    def reached(self) -> str:
        values = [r.value for r in self.readings]
        if any(v is not None and not self._holds(v) for v in values):
            return NO
        return NOT_MEASURED if None in values else YES

    @property
    def smaller(self) -> bool:
        return any(r.smaller for r in self.readings)

    def _holds(self, value: float) -> bool:
        return value >= self.aim.threshold if self.aim.at_least else value <= self.aim.threshold


def _producer(codec: str, **api: str) -> Figure:
    """``send()``'s lines carry no ``api`` parameter and come first in a run: without ``api``
    the figure is the first line of the codec, ``send()``'s."""
    return Figure(codec, "throughput", "producer.msgs_per_s",
                  {"codec": codec, "acks": 1, **VALUES_100B, **api}, peer="redis")


def _append(label: str, value_bytes: int) -> Figure:
    return Figure(label, "log", "log.append.ratio_with_crc",
                  {"value_bytes": value_bytes, "flush_messages": None},
                  beside=(("raw write alone", "log.append.ratio"),))


def _mirror(label: str, codec: str, value_bytes: int, name: str) -> Figure:
    """A ratio on the pass-through mirror's line, its msgs/s beside it."""
    return Figure(label, "mirror", f"mirror.{name}",
                  {"mode": "passthrough", "codec": codec, "value_bytes": value_bytes},
                  beside=(("msgs/s", "mirror.msgs_per_s"),))


AIMS = (
    Aim("producer `send()`, acks=1, lz4 and none", "534-568k msgs/s; 1.4-2.6x Redis with hiredis",
        ">= 7x Redis Streams with hiredis in the same run", True, 7.0,
        (_producer("none"), _producer("lz4"))),
    # The issue welcomes a batch API "if it is what gets there, as long as send() also improves".
    Aim("producer `send_many()`, acks=1, lz4 and none", "no batch API",
        ">= 7x Redis Streams with hiredis in the same run", True, 7.0,
        (_producer("none", api="send_many"), _producer("lz4", api="send_many"))),
    Aim("consumer `poll()` with CRC checks", "683k msgs/s; about 2x Redis with hiredis",
        ">= 5x Redis XREADGROUP with hiredis", True, 5.0,
        (Figure("", "throughput", "consumer.msgs_per_s", {"codec": "none", **VALUES_100B},
                peer="redis"),)),
    Aim("heartbeats handled by one broker", "27k/s", ">= 50,000/s", True, 50_000,
        (Figure("", "coordinator", "coordinator.heartbeats_per_s", {"case": "heartbeats"}),)),
    Aim("e2e latency p99 at 100k msgs/s", "62 ms (Redis Streams 33 ms)",
        "<= Redis Streams in the same run", False, 1.0,
        (Figure("", "latency", "e2e_latency.p99_ms", {"rate_per_s": 100_000, **VALUES_100B},
                peer="redis"),)),
    Aim("log append, 1 KiB and 10 KiB messages", "0.15 / 0.21 of a raw write",
        ">= 0.8 of (raw write + one CRC pass)", True, 0.8,
        (_append("1 KiB", 1024), _append("10 KiB", 10_240))),
    Aim("broker fetch path", "0.73-0.77 of a raw read", ">= 0.9 of a raw read", True, 0.9,
        (Figure("log.read", "log", "log.read.ratio", {"value_bytes": 1024}),
         Figure("log.sendfile", "log", "log.sendfile.ratio", {"value_bytes": 1024}))),
    Aim("heartbeat p99 while 1,000 groups rebalance", "not measured", "<= 10 ms", False, 10.0,
        (Figure("", "scale", "scale_groups.rebalancing_heartbeat_p99_ms", {},
                size=Size("rebalancing", 1_000, "groups rebalancing")),)),
    Aim("coordinator memory per member", "not measured", "<= 2 KB (2,000 B)", False, 2_000,
        (Figure("", "scale", "scale_groups.coordinator_bytes_per_member", {},
                size=Size("members", 100_000, "members")),)),
    Aim("1,000,000 offset records loaded (Catch-up)", "not measured", "<= 5 s", False, 5_000,
        (Figure("", "group_failover", "offsets_catch_up.catch_up_time_ms", {},
                size=Size("records", 1_000_000, "records")),)),
    # seed 001: no "decompression/recompression in mirror maker"; a mirror is one fetch and
    # one produce of the same bytes, so it should keep up with the slower of the two clients
    Aim("mirror pass-through, 100 B and 1 KiB, lz4 and none", "not measured",
        ">= 0.7 of the slower of Consumer.poll and Producer.send on the same bytes", True, 0.7,
        tuple(_mirror(f"{label} {codec}", codec, size, "ratio_to_slower_client")
              for label, size in (("100 B", 100), ("1 KiB", 1024)) for codec in ("lz4", "none"))),
    Aim("mirror pass-through against --recompress, lz4", "not measured",
        ">= 3x the recompressing mirror", True, 3.0,
        (_mirror("100 B", "lz4", 100, "ratio_to_recompress"),
         _mirror("1 KiB", "lz4", 1024, "ratio_to_recompress"))),
    # the rebalance area's issue: an incremental rebalance must not pause what does not move,
    # and a static member's restart must not rebalance; read at 10 members, in quick runs too
    Aim("unmoved partition's longest pause, incremental rebalance (10 members)", "not measured",
        "<= 2x its steady p99 delivery gap", False, 2.0,
        (Figure("", "rebalance", "rebalance.ratio_unmoved_pause_to_steady_p99",
                {"protocol": "incremental", "members": 10},
                beside=(("pause ms", "rebalance.unmoved_max_pause_ms"),
                        ("steady p99 ms", "rebalance.steady_p99_gap_ms"))),)),
    Aim("rolling restart of 10 static members", "not measured", "0 rebalances", False, 0.0,
        (Figure("", "rebalance", "rebalance_rolling.rebalances",
                {"protocol": "static", "members": 10},
                beside=(("restarted", "rebalance_rolling.restarted"),)),)),
)


def evaluate(measurements: Iterable[Measurement], aims: Sequence[Aim] = AIMS) -> list[Outcome]:
    """Each aim with its figures read from the run's own measurements."""
    ours = [m for m in measurements if m.system == ODRADEK]
    return [Outcome(aim, [read(figure, ours) for figure in aim.figures]) for aim in aims]


def read(figure: Figure, measurements: Sequence[Measurement]) -> Reading:
    found = _find(measurements, figure.area, figure.name, figure.params)
    if found is None:
        return Reading(figure, None, "not measured")
    if figure.peer is None:
        value: float | None = found.value
        text = _with_unit(found.value, found.unit)
    else:
        peer = found.peers.get(figure.peer)
        value = None if peer is None else ratio(found.value, peer)
        if peer is None or value is None:
            return Reading(figure, None, f"{_with_unit(found.value, found.unit)}, no "
                                         f"{figure.peer} figure in this run")
        text = f"{value:.3g}x ({fmt(found.value)} against {fmt(peer)} {found.unit})"
    for label, name in figure.beside:
        other = _find(measurements, found.area, name, found.params)
        if other is not None:
            text += f" ({label} {fmt(other.value)})"
    smaller = False
    if figure.size is not None:
        measured = found.params.get(figure.size.param)
        if isinstance(measured, int | float):
            text += f" with {fmt(measured)} {figure.size.noun}"
            smaller = measured < figure.size.aim
            if smaller:
                text += f" (the aim's size: {fmt(figure.size.aim)})"
    return Reading(figure, value, text, smaller)


def _with_unit(value: float, unit: str) -> str:
    return fmt(value) if unit == "x" else f"{fmt(value)} {unit}"


def _find(measurements: Iterable[Measurement], area: str, name: str,
          params: Mapping[str, Any]) -> Measurement | None:
    """The first measurement of that area and name whose line has every one of ``params``."""
    return next((
        m for m in measurements
        if (m.area, m.name) == (area, name)
        and all(key in m.params and m.params[key] == value for key, value in params.items())
    ), None)


def table(outcomes: Sequence[Outcome]) -> list[str]:
    """The Markdown table: what, the figure when the issue was filed, the aim, this run's
    figures and whether the aim was reached."""
    lines = ["| what | when filed | aim | this run | reached |", "|---|---|---|---|---|"]
    for outcome in outcomes:
        run = "; ".join(f"{r.figure.label}: {r.text}" if r.figure.label else r.text
                        for r in outcome.readings)
        reached = outcome.reached
        if outcome.smaller and reached != NOT_MEASURED:
            reached += ", at a smaller size"
        aim = outcome.aim
        lines.append(f"| {aim.what} | {aim.filed} | {aim.aim} | {run} | {reached} |")
    return lines
