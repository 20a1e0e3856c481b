"""``Producer``: batches messages per partition and sends them to partition leaders.

Single-threaded: there is no background sender. Batches go out only inside the producer's own
calls, so it is worth knowing exactly which:

- ``send()`` appends the message to its partition's open batch. When the message starts a new
  batch that is due at once (a full one is queued before it, or ``linger_ms=0``), or a
  millisecond has passed since the producer last did I/O, it also writes every *sendable* batch
  (full, or ``linger_ms`` old -- with the default ``linger_ms=0`` that is at once) and reads the
  responses that have arrived, settling their futures. ``send_many()`` does the same for a run
  of messages.
- ``poll(timeout)`` does the same, waiting up to ``timeout`` seconds for responses and for
  lingering batches to come due (returning at once when nothing is queued or in flight).
- ``flush(timeout)`` sends every batch at once, linger or not, and waits for all answers.
- ``future.result(timeout)`` drives I/O until that message is acknowledged.
- ``close(timeout)`` flushes, then closes the sockets.

So a program that sends with ``linger_ms > 0`` and then stops calling the producer leaves its
last batch unsent until the next call: end with ``flush()`` or ``close()`` (the context manager
does).

Ordering: at most one produce request per partition is in flight, and a failed batch goes back
to the head of its partition's queue, so each partition receives messages in ``send`` order even
when requests are retried. With acks=all the producer is idempotent by default
(client/idempotence.py): its batches are numbered and a retry after a lost response is answered
with the first write's offsets, not stored twice. Without idempotence such a retry may store a
batch twice (the first copy was written but not acknowledged); an acknowledged offset always
holds its message.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import accumulate, repeat
from time import time_ns as _time_ns
from types import TracebackType
from typing import Any, TypeGuard, Unpack

from client.accumulator import RecordAccumulator
from client.batch import ProducerBatch, RecordFuture, RecordFutures, encode_for
from client.durations import seconds_text
from client.errors import (
    ClientTimeoutError,
    ConfigError,
    IllegalStateError,
    PrecedingSetFailedError,
    partition_error,
)
from client.future import Future
from client.idempotence import MAX_BATCHES_PER_REQUEST, RESET_ERRORS, Idempotence
from client.metadata import STALE_METADATA_ERRORS, MetadataTracker, TopicInfo
from client.network import NetworkClient
from client.partitioner import DefaultPartitioner, Partitioner
from client.records import TopicPartition
from client.security import SecurityConfig, SecurityOptions
from client.throttle import ThrottleStats
from protocol.apis import ApiKey
from protocol.compression import BatchCodec, Codec
from protocol.errors import (
    ErrorCode,
    MessageFormatError,
    MessageTooLargeError,
    OdradekError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from protocol.messageset import HEADER_V1
from protocol.record_batch import MAGIC

log = logging.getLogger("odradek.producer")
#: the Produce versions this producer speaks: v1's response says how long the broker held it
#: back for the produce quota; v2 carries a record batch (magic 2: headers, zstd). The highest
#: the leader speaks is used (client/api_versions.py), and the format with it.
PRODUCE_VERSIONS = (1, 2)
#: Produce v2 and later carry record batches
RECORD_BATCH_PRODUCE_VERSION = 2

Header = tuple[str, bytes | None]

_IO_INTERVAL = 0.001  # send() reads responses at least this often (seconds)
#: A refused message set that may fit once split (the whole set, or its share of a segment).
_TOO_LARGE_ERRORS = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


def parse_acks(acks: int | str) -> int:
    """``0``, ``1``, ``-1`` or ``"all"`` (the same as -1)."""
    if acks in ("all", "-1", -1):
        return -1
    if acks in (0, 1, "0", "1"):
        return int(acks)
    raise ConfigError(f"acks={acks!r} is invalid; use 0, 1 or all")


class Producer:
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "127.0.0.1:9092",
        *,
        client_id: str = "odradek-producer",
        acks: int | str = 1,
        compression: str | Codec | BatchCodec = BatchCodec.NONE,
        linger_ms: float = 0,
        batch_bytes: int = 16_384,
        buffer_bytes: int = 32 * 1024 * 1024,
        max_request_bytes: int = 1024 * 1024,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1_000,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        max_block_ms: int = 60_000,
        max_in_flight_requests_per_connection: int = 5,
        enable_idempotence: bool | None = None,
        metadata_max_age_ms: int = 300_000,
        partitioner: Partitioner | None = None,
        **security: Unpack[SecurityOptions],
    ) -> None:
        self.acks = parse_acks(acks)
        try:
            self.codec = BatchCodec.parse(compression)
        except ValueError as exc:
            raise ConfigError(f"compression: {exc}") from None
        for name, value, low in (
            ("linger_ms", linger_ms, 0),
            ("batch_bytes", batch_bytes, 1),
            ("buffer_bytes", buffer_bytes, 1),
            ("max_request_bytes", max_request_bytes, 1),
            ("retries", retries, 0),
            ("retry_backoff_ms", retry_backoff_ms, 0),
            ("request_timeout_ms", request_timeout_ms, 1),
            ("delivery_timeout_ms", delivery_timeout_ms, 1),
            ("max_block_ms", max_block_ms, 0),
            ("max_in_flight_requests_per_connection", max_in_flight_requests_per_connection, 1),
        ):
            if value < low:
                raise ConfigError(f"{name}={value} is invalid; it must be at least {low}")
        self.retries = retries
        self._idempotence = _idempotence_for(
            enable_idempotence, self.acks, retries, max_in_flight_requests_per_connection)
        self._idempotence_default = enable_idempotence is None
        self._backoff = retry_backoff_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout = delivery_timeout_ms / 1000
        self._max_block = max_block_ms / 1000
        self._max_request_bytes = max_request_bytes
        self._buffer_bytes = buffer_bytes
        self._max_in_flight = max_in_flight_requests_per_connection
        self._clock = time.monotonic
        self._network = NetworkClient(
            bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            security=SecurityConfig(**security),
        )
        self._metadata = MetadataTracker(
            self._network,
            allow_auto_topic_creation=True,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._accumulator = RecordAccumulator(
            batch_bytes=batch_bytes, linger_ms=linger_ms, drive=self.poll
        )
        default = DefaultPartitioner()
        self._sticky = default if partitioner is None else None
        self._partitioner: Partitioner = partitioner or default
        self._topics: dict[str, _KnownTopic] = {}
        # the batch the last null-keyed message went into, and its topic
        self._sticky_topic: str | None = None
        self._sticky_batch: ProducerBatch | None = None
        self._busy: set[TopicPartition] = set()  # partitions with a request in flight
        # batches are sendable but a leader has not said yet which Produce versions it speaks
        self._asking_versions = False
        # leaders that have said it once: asked again on a new connection, never waited for
        self._versions_heard: set[int] = set()
        self._flushing = 0
        self._next_io = 0.0
        self._closed = False
        #: how long brokers held produce responses back for this client's quota
        self.throttle_stats = ThrottleStats()

    # ------------------------------------------------------------------------------ public

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordFuture:
        """Queue one message; the future resolves to ``RecordMetadata(topic, partition,
        offset)`` or raises the typed error. Blocks only to learn an unknown topic's partitions
        or while ``buffer_bytes`` are already waiting (each at most ``max_block_ms``).
        ``headers``: ``(str key, bytes | None value)`` pairs, kept in order; they need a leader
        that takes record batches (Produce v2), else the future fails with
        UnsupportedVersionError naming the topic."""
        # The hot path of the producer: keep per-message work to a few dict and list operations.
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        known = self._topics.get(topic)
        if known is None or known.version != self._metadata.updates:
            known = self._learn_topic(topic)
        size = HEADER_V1 + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            headers = _checked_headers(headers)
            size += sum(len(k) + len(v or b"") + 2 for k, v in headers)
        if size > self._max_request_bytes:
            raise MessageTooLargeError(
                f"message of {size} bytes for topic {topic!r} exceeds "
                f"max_request_bytes={self._max_request_bytes}"
            )
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        accumulator = self._accumulator
        if accumulator.buffered_bytes + size > self._buffer_bytes:
            self._wait_for_room(size)
        now = self._clock()
        sticky = self._sticky
        if partition is None and key is None and sticky is not None:
            # Null keys stay on their partition while its open batch has room (partitioner.py).
            # The last such batch is remembered, so the common case is one list append.
            batch = self._sticky_batch
            if (
                batch is not None
                and batch.open
                and batch.size + size <= accumulator.batch_bytes
                and self._sticky_topic == topic
            ):
                batch.records.append((None, value, timestamp))
                batch.size += size
                accumulator.buffered_bytes += size
            else:
                tp = known.tps[sticky(topic, None, known.partitions)]
                batch = accumulator.append_if_room(tp, None, value, timestamp, size)
                if batch is None:
                    sticky.batch_closed(topic, tp.partition, known.partitions)
                    tp = known.tps[sticky(topic, None, known.partitions)]
                    batch = accumulator.append(tp, None, value, timestamp, size, now)
                self._sticky_topic, self._sticky_batch = topic, batch
        else:
            if partition is None:
                partition = self._partitioner(topic, key, known.partitions)
            found = known.tps.get(partition)
            if found is None:
                found = self._wait_for_partition(topic, partition)
            batch = accumulator.append(found, key, value, timestamp, size, now)
        index = len(batch.records) - 1
        if headers:
            # rare enough to patch in after the fact, sparing the common path an argument
            batch.records[index] = (key, value, timestamp, headers)
            batch.has_headers = True
        # Time to send and read: every millisecond, and when a new batch is due at once -- it
        # has a full one queued before it, or linger_ms=0. A partition's first batch, lingering,
        # is not: a producer spreading messages over many partitions starts a batch with nearly
        # every message, and each round costs a look at every partition with batches queued.
        if now >= self._next_io or (index == 0 and accumulator.due_at_once(batch)):
            self._run_once(0.0)
        return RecordFuture(batch, index)

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp: int | None = None,
    ) -> Sequence[RecordFuture]:
        """``send(topic, value, key)`` for each value (and key) in order, all with one
        timestamp (now unless given); the futures in the same order. Null-keyed values go to
        the sticky partition's open batch a run at a time, not one by one: the same messages
        in the same order as calling ``send`` for each, with less work per message (their
        futures are made when they are asked for)."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"send_many: {len(keys)} keys for {len(values)} values")
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        send = self.send
        if (
            keys is not None
            or self._sticky is None
            or not _all_bytes(values)
            or HEADER_V1 + max(map(len, values), default=0) > self._max_request_bytes
        ):
            pairs = zip(values, repeat(None) if keys is None else keys)  # noqa: B905 (checked)
            return [send(topic, value, key, None, timestamp) for value, key in pairs]
        return self._send_null_keyed(topic, values, timestamp)

    def _send_null_keyed(
        self, topic: str, values: Sequence[bytes], timestamp: int
    ) -> RecordFutures:
        """``send_many`` for values that are all bytes, with the sticky partitioner."""
        send = self.send
        accumulator = self._accumulator
        futures = RecordFutures()
        left = HEADER_V1 * len(values) + sum(map(len, values))  # as the accumulator counts
        ends: list[int] | None = None  # message i ends ends[i] bytes in; made only if needed
        done = 0
        while done < len(values):
            # The first message of a run goes through send(): it picks (or starts) the batch,
            # waits for buffer room and does the I/O that is due, as it would alone.
            future = send(topic, values[done], None, None, timestamp)
            batch = future._batch
            futures.add(batch, future._index, 1)
            left -= HEADER_V1 + len(values[done])
            done += 1
            if not batch.open:  # send() sent it already (linger_ms=0): the next one starts anew
                continue
            room = min(
                accumulator.batch_bytes - batch.size,
                self._buffer_bytes - accumulator.buffered_bytes,
            )
            if left <= room:  # the rest fits: no need to know where each message ends
                stop, size = len(values), left
            else:
                if ends is None:
                    ends = list(accumulate(map(HEADER_V1.__add__, map(len, values))))
                start = ends[done - 1]
                stop = bisect_right(ends, start + room, lo=done)
                size = ends[stop - 1] - start if stop > done else 0
            if stop > done:
                index = len(batch.records)
                accumulator.extend(
                    batch, zip(repeat(None), values[done:stop], repeat(timestamp)), size
                )
                futures.add(batch, index, stop - done)
                left -= size
                done = stop
        return futures

    def send_set(self, topic: str, partition: int, data: bytes) -> RecordFuture:
        """Queue a stored message set -- whole entries, as ``Consumer.poll_sets`` hands them
        out -- for one partition, to be appended as it is: compressed wrappers are not opened
        and the producer's ``compression`` does not apply (a mirror's pass-through). The
        broker checks it and assigns its offsets; the future resolves to the offset of its
        first message. The set keeps its place among the partition's other sends; if it fails
        for good, those queued after it fail too (``PrecedingSetFailedError``), so the target
        log never holds later sets without it."""
        if type(data) is not bytes:
            data = _as_bytes(data, "data")
        if not data:
            raise ValueError(f"send_set: an empty message set for {topic}-{partition}")
        known = self._topics.get(topic)
        if known is None or known.version != self._metadata.updates:
            known = self._learn_topic(topic)
        tp = known.tps.get(partition)
        if tp is None:
            tp = self._wait_for_partition(topic, partition)
        if len(data) > self._max_request_bytes:
            raise MessageTooLargeError(
                f"message set of {len(data)} bytes for {tp} exceeds "
                f"max_request_bytes={self._max_request_bytes}"
            )
        if self._accumulator.buffered_bytes + len(data) > self._buffer_bytes:
            self._wait_for_room(len(data))
        batch = self._accumulator.append_set(tp, data, self._clock())
        self._run_once(0.0)
        return RecordFuture(batch, 0)

    def poll(self, timeout: float = 0.0) -> None:
        """Send what is due, read responses (settling futures), waiting up to ``timeout`` s."""
        if self._closed:
            raise IllegalStateError("producer is closed")
        self._run_once(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every request is answered (or failed).
        Raises ``ClientTimeoutError`` if that takes longer than ``timeout`` seconds."""
        if self._closed:
            raise IllegalStateError("producer is closed")
        deadline = None if timeout is None else self._clock() + timeout
        self._flushing += 1
        try:
            while self._accumulator.queued_batches() or self._busy:
                remaining = 1.0 if deadline is None else deadline - self._clock()
                if remaining <= 0:
                    assert timeout is not None  # only a deadline runs out
                    raise ClientTimeoutError(
                        f"flush: {self._accumulator.queued_batches()} batches queued and "
                        f"{len(self._busy)} partitions in flight after {seconds_text(timeout)}"
                    )
                self._run_once(min(remaining, 1.0))
        finally:
            self._flushing -= 1

    @property
    def buffered_bytes(self) -> int:
        """Bytes of messages sent to this producer and not yet acknowledged (or failed): at
        ``buffer_bytes``, ``send`` blocks."""
        return self._accumulator.buffered_bytes

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions (blocks up to ``max_block_ms`` for metadata)."""
        return list(self._learn_topic(topic).partitions)

    def close(self, timeout: float | None = None) -> None:
        """Flush for up to ``timeout`` seconds, then close. Messages still unsent fail with
        ``IllegalStateError``."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        except ClientTimeoutError:
            log.warning("closing with unsent messages", extra={"timeout": timeout})
        finally:
            self._closed = True
            self._topics.clear()  # so a later send() learns the topic again, which refuses it
            closed = IllegalStateError("producer closed before the message was acknowledged")
            aborted = self._accumulator.abort_all()
            self._settle_failed(aborted, closed)
            self._network.flush_writes(1.0 if timeout is None else max(timeout, 0.0))
            self._network.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---------------------------------------------------------------------------- internals

    def _learn_topic(self, topic: str) -> _KnownTopic:
        """The topic's partitions as of the latest metadata (waiting for it if unknown)."""
        if self._closed:
            raise IllegalStateError("producer is closed")
        known = self._topics.get(topic)
        info = self._metadata.current.topics.get(topic)
        if known is not None and info is known.info:
            # Another topic's update: this one's metadata is the same object, so unchanged.
            known = replace(known, version=self._metadata.updates)
            self._topics[topic] = known
            return known
        partitions = self._metadata.current.partitions_for(topic)
        if partitions is None:
            self._metadata.wait_for_topic(topic, self._max_block)
            partitions = self._metadata.current.partitions_for(topic)
            assert partitions is not None
        known = _KnownTopic(
            self._metadata.updates,
            self._metadata.current.topics[topic],
            partitions,
            {p: TopicPartition(topic, p) for p in partitions},
        )
        self._topics[topic] = known
        return known

    def _wait_for_partition(self, topic: str, partition: int) -> TopicPartition:
        """A partition the producer's metadata does not show: asked for again until it
        appears, for up to ``max_block_ms`` (as Kafka's producer waits) -- a topic that just
        grew has partitions its producers learn of only from fresh metadata."""
        deadline = self._clock() + self._max_block
        while True:
            self._metadata.request_update([topic])
            updates = self._metadata.updates
            while self._metadata.updates == updates and self._clock() < deadline:
                self._run_once(min(self._backoff, max(deadline - self._clock(), 0.0)))
            known = self._learn_topic(topic)
            found = known.tps.get(partition)
            if found is not None:
                return found
            if self._clock() >= deadline:
                raise UnknownTopicOrPartitionError(
                    f"{topic}-{partition}: topic {topic!r} has partitions "
                    f"0..{len(known.tps) - 1}"
                )

    def _wait_for_room(self, size: int) -> None:
        deadline = self._clock() + self._max_block
        while self._accumulator.buffered_bytes + size > self._buffer_bytes:
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise ClientTimeoutError(
                    f"buffer_bytes={self._buffer_bytes} still full after max_block_ms"
                )
            self._flushing += 1  # a full buffer is no time to linger
            try:
                self._run_once(min(remaining, 0.1))
            finally:
                self._flushing -= 1

    def _run_once(self, timeout: float) -> None:
        now = self._clock()
        self._metadata.poll()
        self._expire(now)
        self._send_sendable(now)
        if not self._busy and not self._accumulator.queued_batches():
            wait = 0.0  # nothing is queued or awaits an answer: no reason to wait
        elif self._asking_versions:
            wait = timeout  # sendable batches wait for a leader's ApiVersions answer
        else:
            due = self._accumulator.next_deadline(self._busy)
            wait = timeout if due is None else min(timeout, max(due - now, 0.0))
        self._network.poll(wait)
        self._send_sendable(self._clock())
        self._next_io = self._clock() + _IO_INTERVAL

    def _expire(self, now: float) -> None:
        expired = self._accumulator.expired(now, self._delivery_timeout)
        for batch in expired:
            self._settle_failed(
                [batch],
                ClientTimeoutError(
                    f"{batch.tp}: not acknowledged within delivery_timeout_ms="
                    f"{int(self._delivery_timeout * 1000)}"
                ),
            )

    def _send_sendable(self, now: float, *, await_versions: bool = True) -> None:
        ready = self._accumulator.sendable(
            now, flushing=self._flushing > 0, busy=self._busy
        )
        if not ready:
            return
        by_node: dict[int, list[TopicPartition]] = {}
        metadata = self._metadata.current
        for tp in ready:
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._metadata.request_update([tp.topic])
                continue
            by_node.setdefault(leader, []).append(tp)
        self._asking_versions = False
        asked_before = self._network.asking_versions
        versions: dict[int, int] = {}
        for node, tps in by_node.items():
            if self._network.in_flight(node) >= self._max_in_flight:
                continue
            try:
                version = self._network.api_version(node, ApiKey.PRODUCE, *PRODUCE_VERSIONS)
            except OdradekError as exc:
                if getattr(exc, "retriable", False):
                    # as a failed request: the leader may be gone, so ask where it is now
                    self._metadata.request_update()
                else:
                    for tp in tps:
                        self._settle_failed(self._accumulator.take_queue(tp), exc)
                continue
            if version is None:
                self._asking_versions = True  # sent once the leader says what it speaks
            else:
                versions[node] = version
                self._versions_heard.add(node)
        first_contact = self._network.asking_versions - asked_before - self._versions_heard
        if (first_contact and await_versions and not self._busy
                and self._versions_answered(first_contact)):
            self._send_sendable(self._clock(), await_versions=False)
            return
        for node, version in versions.items():
            self._send_produce(node, by_node[node], now, version)

    def _versions_answered(self, nodes: frozenset[int]) -> bool:
        """The first contact with leaders, while nothing else is in flight: wait (one round
        trip; at most request_timeout_ms) for what they speak, so that a batch due now goes out
        in this call -- a program that blocks between calls, as ``odradek produce`` waiting for
        its next input line, would otherwise leave it unsent until then. Nothing else is
        driven meanwhile, so only the first contact waits: a producer with requests in flight,
        or reconnecting to a leader it spoke with before (which may be cut off, and then no
        longer the leader), goes on at once; answers and fresh metadata drive its next sends.
        Whether every answer (or failure) came."""
        deadline = self._clock() + self._request_timeout_ms / 1000
        while (nodes & self._network.asking_versions
               and (remaining := deadline - self._clock()) > 0):
            self._network.poll(min(remaining, 0.05))
        return not nodes & self._network.asking_versions

    def _numbering_for(self, node: int, tps: list[TopicPartition], version: int) -> bool:
        """Whether batches for ``node`` may go out: without idempotence, always; with it, once
        the producer has its producer id (asked of the cluster the first time, up to
        ``max_block_ms``). A leader without record batches (Produce below v2) cannot take
        numbered batches: idempotence by default is then given up, as Kafka's producer gives
        it up for a broker that lacks it; asked for explicitly, the batches fail. So do they
        when no producer id can be had, with the reason."""
        if self._idempotence is None:
            return True
        error: BaseException
        if version < RECORD_BATCH_PRODUCE_VERSION:
            if self._idempotence_default:
                log.warning("broker %d takes Produce v%d, without record batches: this "
                            "producer is not idempotent", node, version)
                self._idempotence = None
                return True
            error = UnsupportedVersionError(
                f"broker {node} takes Produce v{version}: the idempotent producer needs record "
                f"batches (Produce v{RECORD_BATCH_PRODUCE_VERSION}); set enable_idempotence="
                "False to write to it")
        else:
            try:
                self._idempotence.ensure(self._network, self._max_block)
                return True
            except (OdradekError, ClientTimeoutError) as exc:
                error = exc
        for tp in tps:
            self._settle_failed(self._accumulator.take_queue(tp), error)
        return False

    def _send_produce(
        self, node: int, tps: list[TopicPartition], now: float, version: int
    ) -> None:
        if not self._numbering_for(node, tps, version):
            return
        budget = self._max_request_bytes
        magic = MAGIC if version >= RECORD_BATCH_PRODUCE_VERSION else 1
        idempotence = self._idempotence
        drained: dict[TopicPartition, list[ProducerBatch]] = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            if budget <= 0:
                break
            batches = self._accumulator.drain(
                tp, budget, now, flushing=self._flushing > 0,
                max_batches=None if idempotence is None else MAX_BATCHES_PER_REQUEST)
            if idempotence is not None:
                numbered = idempotence.number(batches)
                if len(numbered) < len(batches):  # after a retry, or older numbers: later
                    self._accumulator.reenqueue(batches[len(numbered):], now)
                    batches = numbered
            try:
                records = encode_for(batches, self.codec, magic)
            except (UnsupportedVersionError, MessageFormatError) as exc:  # and a v1 leader
                self._settle_failed(batches, exc)
                continue
            drained[tp] = batches
            budget -= len(records)
            for b in batches:
                b.attempts += 1
            topics.setdefault(tp.topic, []).append({"partition": tp.partition, "records": records})
        if not drained:
            return
        self._busy.update(drained)
        body = {
            "acks": self.acks,
            "timeout_ms": self._request_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        future = self._network.send(
            node,
            ApiKey.PRODUCE,
            body,
            api_version=version,
            expect_response=self.acks != 0,
            # The broker itself waits up to timeout_ms for acks=all: leave it room to answer.
            timeout=self._request_timeout_ms / 1000 * 1.25,
        )
        future.add_done_callback(partial(self._on_response, drained))

    def _on_response(
        self, drained: dict[TopicPartition, list[ProducerBatch]], future: Future[dict[str, Any]]
    ) -> None:
        self._busy.difference_update(drained)
        error = future.exception()
        if error is not None:
            self._metadata.request_update()  # the connection is gone: anything may have moved
            for batches in drained.values():
                self._retry_or_fail(batches, error)
            return
        if self.acks == 0:
            for batches in drained.values():
                self._settle_ok(batches, -1)
            return
        self.throttle_stats.record(future.value["throttle_time_ms"], log, "produce")
        results = {
            (t["name"], p["partition"]): p for t in future.value["topics"] for p in t["partitions"]
        }
        for tp, batches in drained.items():
            result = results.get(tp)
            if result is None:
                self._settle_failed(batches, UnknownServerError(f"{tp}: missing from the response"))
                continue
            code = result["error_code"]
            if code == 0:
                self._settle_ok(batches, result["base_offset"])
                continue
            error = partition_error(tp, code, result["error_message"])
            if code in _TOO_LARGE_ERRORS:
                self._split_or_fail(batches, error)
                continue
            if self._idempotence is not None and code in RESET_ERRORS:
                self._numbering_refused(batches, code, error)
                continue
            if code in STALE_METADATA_ERRORS:
                self._metadata.request_update([tp.topic])  # that topic only: cost O(1)
            self._retry_or_fail(batches, error)

    def _retry_or_fail(self, batches: list[ProducerBatch], error: BaseException) -> None:
        now = self._clock()
        first = batches[0]
        if (
            not self._closed
            and getattr(error, "retriable", False)
            and first.attempts <= self.retries
            and now - first.created < self._delivery_timeout
        ):
            self._accumulator.reenqueue(batches, now + self._backoff)
        else:
            self._settle_failed(batches, error)

    def _numbering_refused(
        self, batches: list[ProducerBatch], code: int, error: BaseException
    ) -> None:
        """The leader refused the idempotent producer's numbers (client/idempotence.py): start
        over under a new producer id; a producer the leader forgot is numbered again and
        retried, anything else fails."""
        assert self._idempotence is not None
        log.warning("%s: %s; asking for a new producer id", batches[0].tp, error)
        self._idempotence.reset()
        if code == ErrorCode.UNKNOWN_PRODUCER_ID and not self._closed:
            for batch in batches:
                batch.unnumber()
            self._retry_or_fail(batches, _Renumbered(str(error)))
        else:
            self._settle_failed(batches, error)

    def _split_or_fail(self, batches: list[ProducerBatch], error: BaseException) -> None:
        """The broker refused the message set as too large: as Kafka's producer does, send
        each batch alone and each batch of several messages as two halves, at once (no retry
        is spent: the same bytes would fail again). A single message fails with the error."""
        if self._closed or (len(batches) == 1 and len(batches[0].records) == 1):
            self._settle_failed(batches, error)
            return
        if self._idempotence is not None:  # nothing was written: number the parts afresh
            self._idempotence.rewind(batches)
        parts = [p for b in batches for p in (b.split() if len(b.records) > 1 else [b])]
        log.info("%s: %s; sending %d batches of %d messages in its place", batches[0].tp,
                 error, len(parts), sum(len(b.records) for b in batches))
        self._accumulator.reenqueue(parts, self._clock())

    def _settle_ok(self, batches: list[ProducerBatch], base_offset: int) -> None:
        self._accumulator.release(batches)
        for batch in batches:
            batch.complete(base_offset)
            if base_offset >= 0:
                base_offset += len(batch.records)

    def _settle_failed(self, batches: list[ProducerBatch], error: BaseException) -> None:
        self._accumulator.release(batches)
        for batch in batches:
            batch.fail(error)
        if batches and batches[-1].whole:
            # a stored set is log data: what was queued after it in its partition fails with
            # it, so nothing lands beyond the gap it leaves (they are at the head now)
            tp = batches[-1].tp
            later = self._accumulator.take_queue(tp)
            if later:
                cause = PrecedingSetFailedError(f"{tp}: a message set sent before it failed: "
                                                f"{error}")
                cause.__cause__ = error
                self._settle_failed(later, cause)


@dataclass(frozen=True, slots=True)
class _KnownTopic:
    version: int  # the metadata update it was last checked against (a cheap test per send)
    info: TopicInfo  # the metadata it was read from; a new object when the topic changed
    partitions: list[int]
    tps: dict[int, TopicPartition]


class _Renumbered(OdradekError):
    """A batch numbered again under a new producer id: retried as any retriable error."""

    retriable = True


def _idempotence_for(
    enabled: bool | None, acks: int, retries: int, max_in_flight: int
) -> Idempotence | None:
    """The producer's numbering, or None. By default on with acks=all (Kafka 3.0+), off
    otherwise; asked for explicitly, it needs acks=all, retries and at most 5 requests in
    flight, as Kafka's producer requires."""
    if enabled is None:
        enabled = acks == -1 and retries > 0 and max_in_flight <= MAX_BATCHES_PER_REQUEST
    elif enabled:
        for wrong, why in (
            (acks != -1, f"acks={acks}: it needs acks='all'"),
            (retries < 1, f"retries={retries}: it needs retries"),
            (max_in_flight > MAX_BATCHES_PER_REQUEST,
             f"max_in_flight_requests_per_connection={max_in_flight}: it needs at most "
             f"{MAX_BATCHES_PER_REQUEST}"),
        ):
            if wrong:
                raise ConfigError(f"enable_idempotence=True with {why}")
    return Idempotence() if enabled else None


def _checked_headers(headers: Sequence[Header]) -> tuple[Header, ...]:
    """``headers`` as the record keeps them: a tuple of ``(str, bytes | None)`` pairs."""
    out = tuple(headers)
    for pair in out:
        if (
            type(pair) is not tuple
            or len(pair) != 2
            or type(pair[0]) is not str
            or not (pair[1] is None or isinstance(pair[1], bytes))
        ):
            raise TypeError(f"headers must be (str, bytes | None) pairs, not {pair!r}")
    return out


def _all_bytes(values: Sequence[bytes | None]) -> TypeGuard[Sequence[bytes]]:
    """Whether every value is ``bytes`` (checked in C)."""
    return set(map(type, values)) <= {bytes}


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__}")
