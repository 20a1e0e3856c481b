"""The systems measured side by side: odradek and its peers, one module each.

Every module has ``LABEL``, ``start(workdir) -> ServerProcess`` and the latency pair
``receive_latencies(address, target, count, timeout, started) -> [ns]`` /
``send_paced(address, target, schedule, value_bytes)``. The peers also have
``produce(address, target, values, count) -> seconds`` and ``consume(address, target, count) ->
seconds`` (odradek's producer and consumer are measured by benchmarks/throughput.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from benchmarks.servers import find_program

SYSTEMS = {
    "odradek": ("benchmarks.systems.odradek", None),
    "redis": ("benchmarks.systems.redis_streams", "redis-server"),
    "nats": ("benchmarks.systems.jetstream", "nats-server"),
}
PEERS = ("redis", "nats")


class SystemMissing(Exception):
    """The system cannot run here; the message says what to install."""


def load(name: str) -> ModuleType:
    """The system's module, or ``SystemMissing`` if its server or Python client is absent."""
    module_name, program = SYSTEMS[name]
    if program is not None and find_program(program) is None:
        raise SystemMissing(f"{program} is not installed (scripts/bench installs it)")
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemMissing(
            f"Python package {exc.name} is not installed (pip install -e '.[bench]')"
        ) from None


def measure_each(
    names: Iterable[str], measure: Callable[[str, ModuleType], Iterable[dict[str, Any]]]
) -> Iterator[dict[str, Any]]:
    """The lines ``measure(name, module)`` yields for each system; a system that is missing or
    breaks becomes a status line (``missing`` / ``failed`` with the reason) and the rest go on."""
    for name in names:
        try:
            system = load(name)
        except SystemMissing as exc:
            yield {"status": "missing", "name": name, "reason": str(exc)}
            continue
        try:
            yield from measure(name, system)
        except Exception as exc:
            yield {"status": "failed", "name": name, "reason": f"{type(exc).__name__}: {exc}"}
