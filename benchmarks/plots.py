"""The report's PNG plots (matplotlib, headless): throughput and latency beside the peers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt

from benchmarks.report import LATENCY_STATS, SYSTEM_LABELS, Row, fmt_params, systems_of

THROUGHPUT = ("producer.msgs_per_s", "consumer.msgs_per_s")


def draw(rows: Sequence[Row], directory: Path, stem: str) -> list[Path]:
    written = []
    for name, plot in (("throughput", throughput), ("latency", latency)):
        path = directory / f"{stem}-{name}.png"
        if plot(rows, path):
            written.append(path)
    return written


def throughput(rows: Sequence[Row], path: Path) -> bool:
    """Grouped horizontal bars: messages/s per producer and consumer case, one bar per system."""
    cases = [r for r in rows if r.name in THROUGHPUT and r.unit == "msg/s"]
    systems = [s for s in systems_of(cases) if s != "limit"]
    if not cases:
        return False
    height = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(9, 0.6 + 0.45 * len(cases) * max(1, len(systems)) / 2))
    for i, system in enumerate(systems):
        ys = [n + i * height for n in range(len(cases))]
        ax.barh(ys, [r.values.get(system, 0) for r in cases], height,
                label=SYSTEM_LABELS.get(system, system))
    ax.set_yticks([n + height * (len(systems) - 1) / 2 for n in range(len(cases))])
    ax.set_yticklabels([_label(r) for r in cases], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("messages per second")
    ax.set_title("Producer and consumer throughput")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # grown to the whole of every case's label
    plt.close(fig)
    return True


def latency(rows: Sequence[Row], path: Path) -> bool:
    """Latency from the intended send time against the offered rate, one line per system."""
    cases = [r for r in rows if r.name.startswith("e2e_latency.")]
    if not cases:
        return False
    fig, axes = plt.subplots(1, len(LATENCY_STATS), figsize=(12, 4), sharey=True)
    for ax, stat in zip(axes, LATENCY_STATS, strict=True):
        stat_rows = [r for r in cases if r.name == f"e2e_latency.{stat}_ms"]
        for system in systems_of(stat_rows):
            points = sorted(
                (r.params["rate_per_s"], r.values[system]) for r in stat_rows if system in r.values
            )
            ax.plot(*zip(*points, strict=True), marker="o",
                    label=SYSTEM_LABELS.get(system, system))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered rate (messages/s)")
        ax.set_title(f"{stat} latency")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms from intended send time")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _label(row: Row) -> str:
    """The case's kind and its scalar parameters: a parameter that is a breakdown (a dict, as
    the cluster area's ``where_time_goes``) says nothing about which case a bar is."""
    kind = row.name.split(".", 1)[0]
    params = {k: v for k, v in row.params.items()
              if k != "messages" and not isinstance(v, dict | list)}
    return f"{kind} {fmt_params(params)}"
