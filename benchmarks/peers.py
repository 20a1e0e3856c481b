"""The peers under odradek's producer and consumer workloads: ``peers`` area of the suite.

For each workload of benchmarks/workloads.py each peer gets a fresh server (so its peak RSS is
that workload's own): the producer case times writing the messages; the consumer case fills a
stream untimed, then times reading it all back with acknowledgements. A peer whose server or
client is not installed is reported as missing, one that breaks as failed; the others go on.
Last, Redis's own ``redis-benchmark`` gives a reference line (benchmarks/native.py).
"""

from __future__ import annotations

import itertools
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from benchmarks import native, systems
from benchmarks.areas import Earlier, RawLine
from benchmarks.workloads import Workload, sample_values, workloads


def run(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    loads = workloads(earlier.get("throughput", ()), quick)

    def each_workload(name: str, system: ModuleType) -> Iterator[RawLine]:
        for workload in loads:
            yield measure(name, system, workload)

    return itertools.chain(systems.measure_each(systems.PEERS, each_workload),
                           native.redis_reference(quick))


def measure(name: str, system: ModuleType, workload: Workload) -> RawLine:
    values = sample_values(workload.value_bytes)
    target = f"bench-{workload.kind}-{uuid.uuid4().hex[:8]}"
    with (
        tempfile.TemporaryDirectory(prefix=f"odradek-bench-{name}-") as tmp,
        system.start(Path(tmp)) as server,
    ):
        if workload.kind == "consumer":
            system.produce(server.address, target, values, workload.messages)
            server.reset_peak_rss()
            seconds = system.consume(server.address, target, workload.messages)
        else:
            seconds = system.produce(server.address, target, values, workload.messages)
        return {
            "bench": workload.kind,
            "system": name,
            "messages": workload.messages,
            "value_bytes": workload.value_bytes,
            "msgs_per_s": round(workload.messages / seconds),
            "mb_per_s": round(workload.total_bytes / seconds / 1e6, 1),
            "peak_rss_mb": server.peak_rss_mb(),
        }
