"""End-to-end latency at fixed rates, odradek and its peers alike: ``latency`` area of the suite.

For each system and each rate (``RATES``) a sender process sends 100-byte values at that rate
for a few seconds while this process receives them; latency runs from each message's *intended*
send time to its arrival at the receiver (benchmarks/pacing.py: no coordinated omission, so a
system that cannot keep the rate shows the queue it builds). Reported: p50 / p99 / p99.9 / max in
ms and the server's peak RSS during the run; messages that never arrive are reported as a
problem.

The sending half runs as ``python -m benchmarks.latency send SYSTEM ADDRESS TARGET COUNT RATE
VALUE_BYTES`` so it does not share an interpreter (and its GIL) with the receiver.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from benchmarks import systems
from benchmarks.areas import Earlier, RawLine
from benchmarks.pacing import PacedSchedule, latency_summary
from benchmarks.servers import REPO_ROOT, ServerProcess

RATES = (1_000, 10_000, 100_000)
VALUE_BYTES = 100
DRAIN_S = 30.0  # how long after the last intended send time the receiver still waits


def run(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    seconds = 1.0 if quick else 5.0

    def each_rate(name: str, system: ModuleType) -> Iterator[RawLine]:
        with (
            tempfile.TemporaryDirectory(prefix=f"odradek-bench-latency-{name}-") as tmp,
            system.start(Path(tmp)) as server,
        ):
            for rate in RATES:
                yield from measure(name, system, server, rate, seconds)

    return systems.measure_each(systems.SYSTEMS, each_rate)


def measure(
    name: str, system: ModuleType, server: ServerProcess, rate: int, seconds: float
) -> Iterator[RawLine]:
    """The latency line of one run, and a problem line if messages went missing (the
    percentiles are then over the messages that arrived)."""
    count = round(rate * seconds)
    target = f"latency-{rate}-{uuid.uuid4().hex[:8]}"
    senders: list[subprocess.Popen[bytes]] = []

    def start_sender() -> None:
        senders.append(subprocess.Popen(
            [sys.executable, "-m", "benchmarks.latency", "send", name, server.address, target,
             str(count), str(rate), str(VALUE_BYTES)],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        ))

    server.reset_peak_rss()
    try:
        latencies = system.receive_latencies(
            server.address, target, count, seconds + DRAIN_S, start_sender
        )
    finally:
        for sender in senders:
            _reap(sender)
    if not latencies:
        raise RuntimeError(f"no message arrived at {rate}/s")
    yield {
        "bench": "e2e_latency",
        "system": name,
        "rate_per_s": rate,
        "value_bytes": VALUE_BYTES,
        "messages": count,
        **latency_summary(latencies),
        "peak_rss_mb": server.peak_rss_mb(),
    }
    if len(latencies) < count:
        yield {"status": "failed", "name": f"{name} at {rate}/s", "reason": (
            f"{count - len(latencies)} of {count} messages had not arrived "
            f"{DRAIN_S:.0f} s after the last was due"
        )}


def _reap(sender: subprocess.Popen[bytes]) -> None:
    try:
        status = sender.wait(DRAIN_S)
    except subprocess.TimeoutExpired:
        sender.kill()
        sender.wait()
        raise RuntimeError("the sender did not finish") from None
    if status != 0:
        raise RuntimeError(f"the sender exited with status {status}")


def send(name: str, address: str, target: str, count: int, rate: float, value_bytes: int) -> None:
    systems.load(name).send_paced(address, target, PacedSchedule(count, rate), value_bytes)


if __name__ == "__main__":
    if len(sys.argv) != 8 or sys.argv[1] != "send":
        sys.exit(__doc__)
    _, _, system_name, address, target, count, rate, value_bytes = sys.argv
    send(system_name, address, target, int(count), float(rate), int(value_bytes))
