"""A peer's own benchmark tool as a reference line: ``redis-benchmark`` XADD of 100-byte values.

redis-benchmark ships with redis-server: a C client with next to no cost per request. Against a
redis-server started the way the peers' is (127.0.0.1, a port of its own, no persistence) it
sends XADDs of one 100-byte value, like the Redis peer's, over one connection (the peer has one),
not pipelined and in pipelines of the peer's batch. The line (``peer_reference``, system
``redis``) shows what the server takes, not what a Python program gets: a reference, not a
like-for-like peer, and the report keeps it out of the ratios. Missing when redis-benchmark or
redis-server is not installed.
"""

from __future__ import annotations

import csv
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchmarks.areas import RawLine
from benchmarks.servers import find_program, start_redis
from benchmarks.workloads import sample_values

VALUE_BYTES = 100
PIPELINES = (1, 1_000)  # not pipelined; the Redis peer's pipeline (redis_streams.BATCH)
TOOL_TIMEOUT_S = 120.0


def redis_reference(quick: bool) -> Iterator[RawLine]:
    """The reference lines, or one ``missing`` or ``failed`` line saying why there are none."""
    program = find_program("redis-benchmark")
    if program is None or find_program("redis-server") is None:
        absent = "redis-benchmark" if program is None else "redis-server"
        yield {"status": "missing", "name": "redis-benchmark",
               "reason": f"{absent} is not installed (redis-benchmark ships with redis-server; "
                         "scripts/bench installs it): no native reference line for Redis"}
        return
    requests = 20_000 if quick else 200_000
    try:
        lines = measure(program, requests)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        yield {"status": "failed", "name": "redis-benchmark",
               "reason": f"{type(exc).__name__}: {exc}"}
        return
    yield from lines


def measure(program: str, requests: int) -> list[RawLine]:
    value = sample_values(VALUE_BYTES, 1)[0].decode()
    lines = []
    with tempfile.TemporaryDirectory(prefix="odradek-bench-redis-benchmark-") as tmp, \
            start_redis(Path(tmp)) as server:
        port = server.address.rsplit(":", 1)[1]
        for pipeline in PIPELINES:
            command = [program, "-h", "127.0.0.1", "-p", port, "-c", "1", "-n", str(requests),
                       "-P", str(pipeline), "--csv",
                       "XADD", f"bench-{uuid.uuid4().hex[:8]}", "*", "v", value]
            lines.append({
                "bench": "peer_reference", "system": "redis", "tool": "redis-benchmark",
                "client": "native C", "command": "XADD", "connections": 1, "pipeline": pipeline,
                "requests": requests, "value_bytes": VALUE_BYTES,
                "msgs_per_s": round(requests_per_s(run_tool(command))),
            })
    return lines


def run_tool(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-benchmark exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def requests_per_s(csv_output: str) -> float:
    """The ``rps`` column of redis-benchmark's ``--csv`` output (a header, then one row)."""
    rows = list(csv.DictReader(line for line in csv_output.splitlines() if line.strip()))
    if not rows or "rps" not in rows[-1]:
        raise RuntimeError(f"redis-benchmark printed no rps: {csv_output.strip()[:200]!r}")
    return float(rows[-1]["rps"])
