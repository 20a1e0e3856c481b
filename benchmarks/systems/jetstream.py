"""NATS JetStream as a peer: publish with acks in async batches; a pull consumer with acks.

The stream uses JetStream's file store (like odradek's log, written to the page cache and synced
later). Publishing keeps two batches of ``BATCH`` asynchronous publishes in flight and checks
every acknowledgement. The pull consumer acknowledges with ``AckPolicy.ALL``: one ack for the
last message of each fetched batch covers the batch, as one XACK does for Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import nats
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from benchmarks.pacing import PacedSchedule, intended_of, stamped_value
from benchmarks.servers import start_nats

T = TypeVar("T")
LABEL = "NATS JetStream"
start = start_nats

BATCH = 1_000  # publishes per batch; also the fetch size and the sender's largest batch
DEADLINE_S = 600.0


def produce(address: str, target: str, values: Sequence[bytes], count: int) -> float:
    """Publish ``count`` values with acks; return the seconds it took."""

    async def run(js: Any) -> float:
        await js.add_stream(name=target, subjects=[target])
        start_s = time.perf_counter()
        await _publish(js, target, (values[i % len(values)] for i in range(count)))
        return time.perf_counter() - start_s

    return asyncio.run(_with_jetstream(address, run))


def consume(address: str, target: str, count: int) -> float:
    """Read ``count`` messages of a filled stream with a new pull consumer; the seconds it took."""

    async def run(js: Any) -> float:
        sub = await js.pull_subscribe(target, durable="bench", config=_consumer_config())
        seen = 0
        start_s = time.perf_counter()
        deadline = time.monotonic() + DEADLINE_S
        while seen < count:
            msgs = await _fetch(sub, timeout=1.0)
            if msgs:
                seen += len(msgs)
                # The last batch's ack waits for the server, so the time covers every ack.
                await (msgs[-1].ack_sync() if seen >= count else msgs[-1].ack())
            elif time.monotonic() > deadline:
                raise TimeoutError(f"consumed {seen} of {count} messages")
        return time.perf_counter() - start_s

    return asyncio.run(_with_jetstream(address, run))


def receive_latencies(
    address: str, target: str, count: int, timeout: float, started: Callable[[], None]
) -> list[int]:
    """Create the stream and a pull consumer for new messages, call ``started``, then fetch until
    ``count`` arrived or ``timeout`` passed; the latency of each in ns."""

    async def run(js: Any) -> list[int]:
        await js.add_stream(name=target, subjects=[target])
        config = _consumer_config(deliver_policy=DeliverPolicy.NEW)
        sub = await js.pull_subscribe(target, durable="latency", config=config)
        started()
        latencies: list[int] = []
        deadline = time.monotonic() + timeout
        while len(latencies) < count and time.monotonic() < deadline:
            msgs = await _fetch(sub, timeout=0.1)
            now = time.monotonic_ns()
            latencies.extend(now - intended_of(msg.data) for msg in msgs)
            if msgs:
                await msgs[-1].ack()
        return latencies

    return asyncio.run(_with_jetstream(address, run))


def send_paced(address: str, target: str, schedule: PacedSchedule, value_bytes: int) -> None:
    """Publish each message when it is due, with acks checked batch by batch."""

    async def run(js: Any) -> None:
        await js.stream_info(target)
        schedule.start(time.monotonic_ns())
        in_flight: list[asyncio.Future[Any]] = []
        while not schedule.done:
            due = schedule.take(time.monotonic_ns(), BATCH)
            if not due:
                await asyncio.sleep(schedule.wait_s(time.monotonic_ns()))
                continue
            for intended in due:
                value = stamped_value(intended, value_bytes)
                in_flight.append(await js.publish_async(target, value))
            if len(in_flight) >= BATCH:
                await asyncio.gather(*in_flight)
                in_flight = []
        await asyncio.gather(*in_flight)

    asyncio.run(_with_jetstream(address, run))


async def _with_jetstream(address: str, work: Callable[[Any], Awaitable[T]]) -> T:
    nc = await nats.connect(f"nats://{address}", connect_timeout=10, allow_reconnect=False)
    try:
        return await work(nc.jetstream(timeout=30))
    finally:
        await nc.close()


async def _publish(js: Any, target: str, values: Any) -> None:
    """Publish asynchronously, a batch at a time, awaiting a batch's acks once the next batch is
    out (two batches in flight); any failed ack raises."""
    previous: list[asyncio.Future[Any]] = []
    current: list[asyncio.Future[Any]] = []
    for value in values:
        current.append(await js.publish_async(target, value))
        if len(current) == BATCH:
            await asyncio.gather(*previous)
            previous, current = current, []
    await asyncio.gather(*previous, *current)


async def _fetch(sub: Any, timeout: float) -> list[Any]:
    try:
        return list(await sub.fetch(BATCH, timeout=timeout))
    except NatsTimeoutError:
        return []


def _consumer_config(deliver_policy: DeliverPolicy = DeliverPolicy.ALL) -> ConsumerConfig:
    return ConsumerConfig(
        ack_policy=AckPolicy.ALL, deliver_policy=deliver_policy, max_ack_pending=4 * BATCH
    )
