"""Fetch: stored bytes by offset, long-polling in the purgatory until ``min_bytes`` are there.

Each partition reads up to its own ``max_bytes`` from the entry holding ``fetch_offset``, up to
the high watermark; the chunk may end in a partial entry (the client drops it). The request's
``max_bytes`` bounds the sum, softly as in Kafka: the first partition with data may take its
whole ``max_bytes`` even past that bound, so that a response always makes progress.

When fewer than ``min_bytes`` are available and no partition has an error, the fetch parks
until an append to one of its partitions, its ``max_wait_ms``, or shutdown, then reads again;
or until its client closes the connection, which ends the fetch at once. A follower's fetch
(v3) is also answered at once when the leader's log start is above the one the follower
reported: DeleteRecords waits for the follower to move its own (the low watermark), and wakes
the fetches parked on the partition.

A consumer's fetch below v4 cannot take record batches (magic 2): a range holding one is
down-converted to magic 1 (broker/handlers/fetch_conversion.py), or to magic 0 when the Kafka
listener sets ``READER_MAGIC`` so for its Fetch v0-1 readers. Followers and v4 readers get the
stored bytes.

A debugging read (replica_id -2, Kafka's ``DebuggingConsumerId``) is answered from this
broker's own replica, leader or follower, up to that replica's high watermark: replica
verification (tooling/replica_verification.py) reads every replica of a partition so.

With an authorizer, a consumer's fetch needs Read on each topic (TOPIC_AUTHORIZATION_FAILED in
the partitions of the others) and a follower's ClusterAction on the cluster; a debugging read
needs what a consumer's does, as in Kafka (only replica ids >= 0 are followers). A consumer's
fetched bytes count against its fetch quota: over it, the response (v2: with
``throttle_time_ms``) is held back, and the connection with it.
"""

from __future__ import annotations

from contextvars import ContextVar
from functools import partial
from typing import Any

import structlog
import trio

from broker.client_connection import CLIENT_CONNECTION
from broker.context import BrokerContext
from broker.error_codes import error_code_for
from broker.frames import WithFileSlices, sendable
from broker.handlers.fetch_conversion import for_reader
from broker.log import ReadResult
from broker.security.quotas import CONSUMER_BYTE_RATE
from protocol.acls import ResourceType
from protocol.apis import DEBUGGING_REPLICA_ID, ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.partitions import TopicPartition
from protocol.wire import Request

log = structlog.get_logger(__name__)

NO_DATA = ReadResult(None, 0, 0, -1)
#: the magic a reader below Fetch v4 takes record batches in: 1, but 0 for Kafka's Fetch v0-1,
#: which the Kafka listener sets around those requests (no native request can ask for it)
READER_MAGIC: ContextVar[int] = ContextVar("fetch_reader_magic", default=1)
#: the first Fetch version whose readers take record batches as stored
BATCHES_FROM_VERSION = 4


async def fetch(ctx: BrokerContext, request: Request) -> dict[str, Any] | WithFileSlices:
    body = request.body
    version = request.header.api_version
    replica_id = body["replica_id"]
    if replica_id >= 0:
        ctx.security.require_cluster(ApiKey.FETCH, f"a replica fetch from broker {replica_id}")
        denied: set[str] = set()
    else:
        denied = {t["name"] for t in body["topics"]
                  if not ctx.security.allowed(ApiKey.FETCH, ResourceType.TOPIC, t["name"])}
    deadline = trio.current_time() + max(0, body["max_wait_ms"]) / 1000
    partitions = [TopicPartition(t["name"], p["partition"])
                  for t in body["topics"] for p in t["partitions"]]
    to_magic = (None if replica_id >= 0 or version >= BATCHES_FROM_VERSION
                else READER_MAGIC.get())
    while True:
        topics, available, failed = _read(ctx, body["topics"], max(0, body["max_bytes"]),
                                          replica_id, version, denied, to_magic)
        if (
            available >= body["min_bytes"]
            or failed
            or (replica_id >= 0 and _behind_log_start(body["topics"], topics))
            or ctx.stopping
            or trio.current_time() >= deadline
        ):
            break
        log.debug("fetch.parked", partitions=len(partitions), available=available)
        if await _park(ctx, partitions, deadline):
            # nobody is left to answer: release the fetch now rather than at max_wait_ms
            log.debug("fetch.released", reason="peer closed")
            break
    throttle_ms = 0 if replica_id >= 0 else ctx.security.record_bytes(
        CONSUMER_BYTE_RATE, available)
    if throttle_ms:
        await trio.sleep(throttle_ms / 1000)
    return _response(topics, throttle_ms if version >= 2 else None)


async def _park(ctx: BrokerContext, partitions: list[TopicPartition], deadline: float) -> bool:
    """Wait in the purgatory; True if the client closed its connection meanwhile."""
    client = CLIENT_CONNECTION.get()
    if client is None:
        return await ctx.purgatory.wait(partitions, deadline)
    return await ctx.purgatory.wait(partitions, deadline, until=client.peer_closed)


def _response(topics: list[dict[str, Any]], throttle_ms: int | None
              ) -> dict[str, Any] | WithFileSlices:
    """The body, with large reads left as file slices for sendfile and small ones as bytes."""
    slices = False
    for entry in topics:
        for partition in entry["partitions"]:
            records = partition["records"]
            if isinstance(records, ReadResult):
                partition["records"] = records = sendable(records)
            slices = slices or isinstance(records, ReadResult)
    body: dict[str, Any] = {"topics": topics}
    if throttle_ms is not None:
        body["throttle_time_ms"] = throttle_ms
    return WithFileSlices(body) if slices else body


def _behind_log_start(asked: list[dict[str, Any]], answered: list[dict[str, Any]]) -> bool:
    """Whether a follower reported a log start below this leader's for one of the partitions
    (``answered`` lists them in the order asked; v0-2 report none: -1)."""
    for asked_topic, answered_topic in zip(asked, answered, strict=True):
        for p, result in zip(asked_topic["partitions"], answered_topic["partitions"],
                             strict=True):
            reported = p.get("log_start_offset", -1)
            if 0 <= reported < result["log_start_offset"]:
                return True
    return False


def _read(
    ctx: BrokerContext, topics: list[dict[str, Any]], budget: int, replica_id: int = -1,
    version: int = 0, denied: set[str] | frozenset[str] = frozenset(),
    to_magic: int | None = None,
) -> tuple[list[dict[str, Any]], int, bool]:
    """Read every partition once: (response topics, bytes available, whether any failed).
    The partitions of ``denied`` topics are answered TOPIC_AUTHORIZATION_FAILED unread; with
    ``to_magic``, ranges holding record batches are down-converted to it."""
    available = 0
    failed = False
    out = []
    for entry in topics:
        name = entry["name"]
        partitions = []
        for p in entry["partitions"]:
            limit = p["max_bytes"]
            if available and limit > 0:  # the first partition with data may exceed the budget
                limit = min(limit, max(0, budget - available))
            if name in denied:
                result = _result(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                result = _read_partition(ctx, name, p["partition"], p["fetch_offset"], limit,
                                         replica_id, p.get("log_start_offset", -1), to_magic)
            if version >= 1:
                result["leader_epochs"] = _epochs_from(ctx, name, p["partition"],
                                                       p["fetch_offset"], replica_id)
            failed = failed or result["error_code"] != ErrorCode.NONE
            records = result["records"]
            available += records.length if isinstance(records, ReadResult) else len(records)
            partitions.append(result)
        out.append({"name": name, "partitions": partitions})
    return out, available, failed


def _read_partition(
    ctx: BrokerContext, topic: str, partition: int, offset: int, max_bytes: int,
    replica_id: int = -1, log_start_offset: int = -1, to_magic: int | None = None,
) -> dict[str, Any]:
    try:
        if replica_id != DEBUGGING_REPLICA_ID:  # which any replica answers, leader or not
            ctx.cluster.check_leader(topic, partition)
        if replica_id >= 0:  # a follower: it has everything from its log start to offset
            ctx.cluster.follower_fetched(replica_id, topic, partition, offset,
                                         log_start_offset)
    except BrokerError as exc:
        return _result(partition, exc.code)
    plog = ctx.topics.log(topic, partition)
    if plog is None:
        return _result(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if max_bytes < 0:
        return _result(partition, ErrorCode.INVALID_FETCH_SIZE)
    high_watermark = log_start = -1
    try:
        high_watermark = plog.high_watermark
        log_start = plog.log_start_offset
        # consumers and debugging reads stop at the high watermark; followers read everything
        max_offset = None if replica_id >= 0 else high_watermark
        read = plog.read(offset, max_bytes, max_offset=max_offset)
        records = read if to_magic is None else for_reader(
            plog, read, to_magic, max_bytes, max_offset,
            None if ctx.metrics is None else partial(ctx.metrics.down_converted, topic))
    except Exception as exc:  # an out-of-range offset, a log deleted meanwhile, a disk error
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("fetch.failed", topic=topic, partition=partition, exc_info=exc)
        # the real range, so an OFFSET_OUT_OF_RANGE answer says what the range is (a
        # follower behind the log start restarts there, a consumer can name it)
        return _result(partition, code, high_watermark, log_start)
    return {
        "partition": partition,
        "error_code": ErrorCode.NONE,
        "high_watermark": high_watermark,
        "log_start_offset": log_start,
        "records": records,
    }


def _epochs_from(
    ctx: BrokerContext, topic: str, partition: int, offset: int, replica_id: int
) -> list[dict[str, int]]:
    """For a follower: the leader epochs covering ``offset`` and after."""
    plog = ctx.topics.log(topic, partition)
    if replica_id < 0 or plog is None:
        return []
    entries = plog.leader_epochs.entries
    return [
        {"epoch": e.epoch, "start_offset": e.start_offset}
        for i, e in enumerate(entries)
        if i + 1 == len(entries) or entries[i + 1].start_offset > offset
    ]


def _result(
    partition: int, code: ErrorCode, high_watermark: int = -1, log_start_offset: int = -1
) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": code,
        "high_watermark": high_watermark,
        "log_start_offset": log_start_offset,
        "records": NO_DATA,
    }
