"""The producer and consumer workloads the peers and the machine's limits are measured with.

They are odradek's own: the message counts and value sizes of the ``producer`` and ``consumer``
lines benchmarks/throughput.py printed earlier in the same run, so every system moves the same
bytes. When that area did not run (``--only peers``), throughput.py's default counts stand in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.codec import sample_records

KINDS = ("producer", "consumer")
DEFAULT_VALUE_BYTES = 100  # throughput.py's consumer lines do not state their value size


@dataclass(frozen=True, order=True)
class Workload:
    kind: str  # "producer" or "consumer"
    messages: int
    value_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.messages * self.value_bytes


def workloads(throughput_lines: Iterable[Mapping[str, Any]], quick: bool) -> list[Workload]:
    found = {
        Workload(
            line["bench"], int(line["messages"]), int(line.get("value_bytes", DEFAULT_VALUE_BYTES))
        )
        for line in throughput_lines
        if line.get("bench") in KINDS and "messages" in line
    }
    if found:
        return sorted(found)
    produce, consume = (20_000, 20_000) if quick else (500_000, 1_000_000)
    return [
        Workload("consumer", consume, DEFAULT_VALUE_BYTES),
        Workload("producer", produce, DEFAULT_VALUE_BYTES),
    ]


def sample_values(value_bytes: int, count: int = 1_000) -> list[bytes]:
    """The same log-like values benchmarks/throughput.py sends, cycled through by every peer."""
    return [value or b"" for _, value, _ in sample_records(count, value_bytes)]
