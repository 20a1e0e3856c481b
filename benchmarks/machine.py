"""What machine a run was on, and which client each system was driven through, for the top of
the report: numbers mean little without them (redis-py without its C parser, hiredis, runs the
Redis peer 2.5-3x slower)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import tomllib
from pathlib import Path

from benchmarks.servers import REPO_ROOT, program_version
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


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def hiredis_in_use() -> bool:
    """Whether redis-py parses replies with hiredis (installed, and a version it accepts)."""
    from redis.utils import HIREDIS_AVAILABLE

    return bool(HIREDIS_AVAILABLE)


def redis_client() -> str:
    redis = package_version("redis")
    if redis is None:
        return "redis-py not installed"
    hiredis = package_version("hiredis")
    if hiredis is not None and hiredis_in_use():
        return f"redis-py {redis} with hiredis {hiredis} (C parser)"
    why = "not installed" if hiredis is None else f"{hiredis} not usable by this redis-py"
    return f"redis-py {redis}, Python parser (hiredis {why})"


def nats_client() -> str:
    nats = package_version("nats-py")
    return "nats-py not installed" if nats is None else f"nats-py {nats}"


def odradek_version() -> str:
    """The version of this checkout (its pyproject.toml), whose client/ the benchmarks run."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def describe() -> dict[str, str]:
    memory = memory_gib()
    return {
        "CPU": cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": "unknown" if memory is None else f"{memory} GiB",
        "Python": f"{platform.python_version()} ({platform.python_implementation()})",
        "OS": platform.platform(),
        "redis-server": program_version("redis-server") or "not installed",
        "Redis Streams client": redis_client(),
        "redis-benchmark": program_version("redis-benchmark") or "not installed",
        "nats-server": program_version("nats-server") or "not installed",
        "NATS JetStream client": nats_client(),
        "odradek client": f"odradek {odradek_version()} (client/, this checkout)",
        "odradek message-set code": speedups.IMPLEMENTATION,  # the C accelerator, or Python
    }
