"""The raw limits of this machine for the bytes of each workload: ``limits`` area of the suite.

For every producer and consumer workload the same number of bytes is written sequentially to a
file (to the page cache, as the broker writes with its default flush policy), read back from it,
and copied through a TCP connection on 127.0.0.1 to a thread that only receives; each in 1 MiB
chunks, the best of several rounds. A producer cannot beat the slower of the socket and the
file write, a consumer the slower of the socket and the file read: that bound is reported as
the ``limit`` system, so the report shows each odradek figure as a fraction of it.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.areas import Earlier, RawLine
from benchmarks.workloads import Workload, sample_values, workloads

CHUNK = 1 << 20
MIN_ROUNDS = 3
MIN_SECONDS = 0.3
MAX_ROUNDS = 500


def run(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    loads = workloads(earlier.get("throughput", ()), quick)
    measured: dict[int, dict[str, float]] = {}  # by payload size
    with tempfile.TemporaryDirectory(prefix="odradek-bench-limits-") as tmp:
        for workload in loads:
            rates = measured.get(workload.total_bytes)
            if rates is None:
                rates = measured[workload.total_bytes] = limits_for(_payload(workload), Path(tmp))
                for kind, mb_per_s in rates.items():
                    yield {"bench": f"limit.{kind}", "bytes": workload.total_bytes,
                           "mb_per_s": mb_per_s}
            disk = "file_write" if workload.kind == "producer" else "file_read"
            bound = min((disk, "socket_copy"), key=rates.__getitem__)
            yield {
                "bench": workload.kind,
                "system": "limit",
                "messages": workload.messages,
                "value_bytes": workload.value_bytes,
                "mb_per_s": rates[bound],
                "bound_by": bound,
            }


def limits_for(payload: bytes, directory: Path) -> dict[str, float]:
    path = directory / "limit"
    return {  # in this order: the reads find the file the writes left
        "file_write": best_mb_per_s(len(payload), lambda: file_write(path, payload)),
        "file_read": best_mb_per_s(len(payload), lambda: file_read(path, len(payload))),
        "socket_copy": best_mb_per_s(len(payload), lambda: socket_copy(payload)),
    }


def _payload(workload: Workload) -> bytes:
    values = sample_values(workload.value_bytes)
    repeats = -(-workload.messages // len(values))
    return (b"".join(values) * repeats)[: workload.total_bytes]


def best_mb_per_s(size: int, op: Callable[[], float]) -> float:
    """``size`` bytes over the shortest timing ``op`` returns, in MB/s: at least ``MIN_ROUNDS``
    rounds and ``MIN_SECONDS`` in all, so small payloads get enough tries to beat the noise."""
    timings: list[float] = []
    while len(timings) < MIN_ROUNDS or (sum(timings) < MIN_SECONDS and len(timings) < MAX_ROUNDS):
        timings.append(op())
    return round(size / min(timings) / 1e6, 1)


def file_write(path: Path, payload: bytes) -> float:
    """Seconds to write ``payload`` to a new file (opening and closing it included)."""
    view = memoryview(payload)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for offset in range(0, len(view), CHUNK):
            chunk = view[offset : offset + CHUNK]
            while chunk:
                chunk = chunk[os.write(fd, chunk) :]
    finally:
        os.close(fd)
    return time.perf_counter() - start


def file_read(path: Path, size: int) -> float:
    """Seconds to read ``size`` bytes of the file from its start."""
    buf = bytearray(CHUNK)
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        read = 0
        while read < size and (n := os.readv(fd, [buf])):
            read += n
    finally:
        os.close(fd)
    if read < size:
        raise RuntimeError(f"{path} holds {read} bytes, not {size}")
    return time.perf_counter() - start


def socket_copy(payload: bytes) -> float:
    """Seconds from the first byte sent over loopback TCP to the last one received by a
    thread that only receives (the connection is set up before the clock starts)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    received = 0

    def receive() -> None:
        nonlocal received
        buf = bytearray(CHUNK)
        while n := receiver.recv_into(buf):
            received += n

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    with sender, receiver:
        view = memoryview(payload)
        start = time.perf_counter()
        for offset in range(0, len(view), CHUNK):
            sender.sendall(view[offset : offset + CHUNK])
        sender.shutdown(socket.SHUT_WR)
        thread.join()
        seconds = time.perf_counter() - start
    if received != len(payload):
        raise RuntimeError(f"received {received} of {len(payload)} bytes")
    return seconds
