"""What machine a run was on, for the top of the report: numbers mean little without it."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from benchmarks.servers import program_version
from protocol import speedups


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def describe() -> dict[str, str]:
    memory = memory_gib()
    return {
        "CPU": cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": "unknown" if memory is None else f"{memory} GiB",
        "Python": f"{platform.python_version()} ({platform.python_implementation()})",
        "message-set code": speedups.IMPLEMENTATION,  # protocol.speedups: the C accelerator?
        "OS": platform.platform(),
        "redis-server": program_version("redis-server") or "not installed",
        "nats-server": program_version("nats-server") or "not installed",
    }
