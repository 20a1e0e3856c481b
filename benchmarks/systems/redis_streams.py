"""Redis Streams as a peer: XADD in pipelined batches; XREADGROUP with a consumer group, XACK.

Redis keeps the stream in memory and here persists nothing (``--save '' --appendonly no``), so
it is the "no disk at all" end of the comparison; each entry is one field ``v`` holding the value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.utils import HIREDIS_AVAILABLE

from benchmarks.pacing import PacedSchedule, intended_of, stamped_value
from benchmarks.servers import start_redis

LABEL = "Redis Streams"
start = start_redis

BATCH = 1_000  # XADDs per pipeline; also the sender's largest batch of due messages
READ_COUNT = 10_000  # XREADGROUP COUNT when consuming a filled stream
GROUP = "bench"
DEADLINE_S = 600.0


def _connect(address: str) -> redis.Redis:
    if not HIREDIS_AVAILABLE:  # without its C parser redis-py is 2.5-3x slower: no fair peer
        raise RuntimeError("the Redis Streams peer needs hiredis: pip install 'redis[hiredis]' "
                           "(the bench extra)")
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=60)


def produce(address: str, target: str, values: Sequence[bytes], count: int) -> float:
    """XADD ``count`` values in pipelines of ``BATCH``; return the seconds it took."""
    client = _connect(address)
    try:
        client.ping()
        start_s = time.perf_counter()
        for base in range(0, count, BATCH):
            pipe = client.pipeline(transaction=False)
            for i in range(base, min(count, base + BATCH)):
                pipe.xadd(target, {"v": values[i % len(values)]})
            pipe.execute()
        return time.perf_counter() - start_s
    finally:
        client.close()


def consume(address: str, target: str, count: int) -> float:
    """Read ``count`` entries of a filled stream through a new consumer group, acknowledging
    each batch; return the seconds it took."""
    client = _connect(address)
    try:
        client.xgroup_create(target, GROUP, id="0")
        seen = 0
        start_s = time.perf_counter()
        deadline = time.monotonic() + DEADLINE_S
        while seen < count:
            entries = _read(client, target, READ_COUNT, block_ms=1_000)
            if entries:
                client.xack(target, GROUP, *[entry_id for entry_id, _ in entries])
                seen += len(entries)
            elif time.monotonic() > deadline:
                raise TimeoutError(f"consumed {seen} of {count} entries")
        return time.perf_counter() - start_s
    finally:
        client.close()


def receive_latencies(
    address: str, target: str, count: int, timeout: float, started: Callable[[], None]
) -> list[int]:
    """Join a new group at the stream's end, call ``started`` (the sender may go), then read
    until ``count`` entries arrived or ``timeout`` passed; the latency of each in ns."""
    client = _connect(address)
    try:
        client.xgroup_create(target, GROUP, id="$", mkstream=True)
        started()
        latencies: list[int] = []
        deadline = time.monotonic() + timeout
        while len(latencies) < count and time.monotonic() < deadline:
            entries = _read(client, target, BATCH, block_ms=100)
            now = time.monotonic_ns()
            latencies.extend(now - intended_of(fields[b"v"]) for _, fields in entries)
            if entries:
                client.xack(target, GROUP, *[entry_id for entry_id, _ in entries])
        return latencies
    finally:
        client.close()


def send_paced(address: str, target: str, schedule: PacedSchedule, value_bytes: int) -> None:
    """Send each message when it is due, every due one in one pipeline."""
    client = _connect(address)
    try:
        client.ping()
        schedule.start(time.monotonic_ns())
        while not schedule.done:
            due = schedule.take(time.monotonic_ns(), BATCH)
            if not due:
                time.sleep(schedule.wait_s(time.monotonic_ns()))
                continue
            pipe = client.pipeline(transaction=False)
            for intended in due:
                pipe.xadd(target, {"v": stamped_value(intended, value_bytes)})
            pipe.execute()
    finally:
        client.close()


def _read(client: redis.Redis, target: str, count: int, block_ms: int) -> list[Any]:
    reply: Any = client.xreadgroup(GROUP, "c1", {target: ">"}, count=count, block=block_ms)
    return list(reply[0][1]) if reply else []  # RESP2: [[stream, [(id, {field: value})]]]
