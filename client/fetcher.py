"""Fetching: turning positions into Fetch requests and Fetch responses into records.

One fetch is in flight per broker at a time, covering every assigned partition it leads that
has a position and no records still buffered -- so the next chunk is already on its way while
the caller works through the last one. Responses are decoded when they arrive (inside the
network poll) and buffered; ``take`` hands records out and moves positions. A response for a
position that has since moved (a ``seek``) is dropped.

Per partition, a response may

- end in a partial message: dropped, fetched again from the next offset;
- hold only part of its first message (larger than the fetch size): fetched again with a
  fetch size big enough for it, up to ``max_partition_fetch_bytes``, else ``RecordTooLargeError``
  naming the partition and offset;
- start inside a compressed wrapper (the broker sends whole wrappers): messages before the
  position are skipped;
- say OFFSET_OUT_OF_RANGE: the position is reset per ``auto_offset_reset``, or with ``none`` the
  error is raised from ``poll``;
- hold a damaged entry (bad CRC, malformed): the records before it are handed out, then
  ``CorruptRecordError`` naming its offset is raised -- at each poll until a ``seek`` past it,
  as Kafka's consumer does.

With ``message_sets`` the chunks are not decoded: each becomes one ``FetchedSet`` of stored
entries (client.message_sets says how its ends are cut), under the same rules.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from client.errors import CorruptRecordError, RecordTooLargeError, partition_error
from client.fetched_records import decode_chunk
from client.future import Future
from client.message_sets import FetchedSet, cut_from
from client.metadata import STALE_METADATA_ERRORS, MetadataTracker
from client.offsets import EARLIEST, LATEST, list_offsets_body, read_list_offsets
from client.positions import FetchPositions, OffsetReset
from client.records import ConsumerRecord, TopicPartition
from client.throttle import ThrottleStats
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ErrorCode,
    OdradekError,
    OffsetOutOfRangeError,
)
from protocol.messageset import LOG_OVERHEAD

log = logging.getLogger("odradek.consumer")
#: the Fetch versions this consumer speaks: from v2 the response says how long the broker held
#: it back for the fetch quota; from v4 it carries record batches (magic 2) as stored, headers
#: and all, where below v4 the broker converts them to magic 1. The highest the leader speaks is
#: used (client/api_versions.py).
#: A mirror's stored message sets (``message_sets``) take the same versions: from v4 it gets
#: record batches as stored, to pass on with their headers and codec (client.message_sets).
FETCH_VERSIONS = (2, 4)


@dataclass(frozen=True)
class FetchConfig:
    min_bytes: int = 1
    max_wait_ms: int = 500
    max_bytes: int = 50 * 1024 * 1024  # the whole response
    partition_bytes: int = 1024 * 1024  # the usual fetch size per partition
    max_partition_bytes: int = 16 * 1024 * 1024  # the most a single message may need
    check_crcs: bool = True
    retry_backoff_ms: int = 100
    message_sets: bool = False  # hand out stored message sets, not records


@dataclass
class _Buffered:
    """A decoded chunk of one partition (records, or one message set), handed out by
    ``take``."""

    tp: TopicPartition
    records: list[Any]
    expected_position: int  # the partition's position if nobody has seeked meanwhile
    next_offset: int  # its position once every record here is taken
    taken: int = 0
    error: CorruptRecordError | None = None  # raised once the records before it are taken


class Fetcher:
    def __init__(
        self, metadata: MetadataTracker, positions: FetchPositions, config: FetchConfig
    ) -> None:
        self._metadata = metadata
        self._network = metadata.network
        self._positions = positions
        self._config = config
        self._buffered: deque[_Buffered] = deque()
        self._fetching_nodes: set[int] = set()
        self._node_retry_at: dict[int, float] = {}
        self._fetch_bytes: dict[TopicPartition, int] = {}
        self._resetting: set[TopicPartition] = set()
        self._reset_retry_at = 0.0
        self._errors: deque[BaseException] = deque()
        # per partition, a position this fetcher moved to the end of a message set: an entry
        # starts there, so the next set is cut without opening its first wrapper
        self._set_ends: dict[TopicPartition, int] = {}
        self._backoff = config.retry_backoff_ms / 1000
        self.message_sets = config.message_sets
        self.throttle_stats = ThrottleStats()

    # --------------------------------------------------------------------------- records

    def raise_error(self) -> None:
        """Raise the oldest error a fetch or reset ran into (each is raised once)."""
        if self._errors:
            raise self._errors.popleft()

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records, in fetch order; positions move past them."""
        out: list[ConsumerRecord] = []
        positions = self._positions
        while self._buffered and len(out) < max_records:
            chunk = self._buffered[0]
            tp = chunk.tp
            if (
                not positions.is_assigned(tp)
                or positions.position(tp) != chunk.expected_position
            ):
                self._buffered.popleft()  # seeked or unassigned since it was fetched
                continue
            if chunk.error is not None and chunk.taken >= len(chunk.records):
                if out:
                    break  # the records before the damage first, the error at the next poll
                self._buffered.popleft()  # the next fetch finds it again, until a seek past it
                raise chunk.error
            want = max_records - len(out)
            if chunk.taken == 0 and len(chunk.records) <= want:
                part = chunk.records
            else:
                part = chunk.records[chunk.taken : chunk.taken + want]
            out.extend(part)
            chunk.taken += len(part)
            if chunk.taken >= len(chunk.records):
                if chunk.error is None:
                    self._buffered.popleft()
                new_position = chunk.next_offset
            else:
                new_position = part[-1].offset + 1
            positions.seek(tp, new_position)
            chunk.expected_position = new_position
        return out

    def take_sets(self, max_sets: int) -> list[FetchedSet]:
        """``take`` for a fetcher of ``message_sets``: whole sets, positions moved past them."""
        sets = cast(list[FetchedSet], self.take(max_sets))
        for s in sets:
            self._set_ends[TopicPartition(s.topic, s.partition)] = s.next_offset
        return sets

    # --------------------------------------------------------------------------- fetches

    def send_fetches(self) -> None:
        """Send a Fetch to each leader that has none in flight, for its fetchable partitions."""
        buffered = {c.tp for c in self._buffered}
        metadata = self._metadata.current
        now = time.monotonic()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp in self._positions.fetchable():
            if tp in buffered:
                continue
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._metadata.request_update()
                continue
            if leader in self._fetching_nodes or self._node_retry_at.get(leader, 0.0) > now:
                continue
            position = self._positions.position(tp)
            assert position is not None
            by_node.setdefault(leader, {})[tp] = position
        for node, requested in by_node.items():
            try:
                version = self._network.api_version(node, ApiKey.FETCH, *FETCH_VERSIONS)
            except OdradekError as exc:  # as a failed fetch: the leader may have moved
                self._node_retry_at[node] = now + self._backoff
                if getattr(exc, "retriable", False):
                    self._metadata.request_update()
                else:
                    self._errors.append(exc)
                continue
            if version is not None:  # else the leader is asked what it speaks first
                self._send_fetch(node, requested, version)

    def _send_fetch(self, node: int, requested: dict[TopicPartition, int], version: int) -> None:
        config = self._config
        topics: dict[str, list[dict[str, int]]] = {}
        largest = 0
        for tp, offset in requested.items():
            size = self._fetch_bytes.get(tp, config.partition_bytes)
            largest = max(largest, size)
            partition = {"partition": tp.partition, "fetch_offset": offset, "max_bytes": size}
            if version >= 3:
                partition["log_start_offset"] = -1  # a follower's field
            topics.setdefault(tp.topic, []).append(partition)
        body = {
            "replica_id": -1,
            "max_wait_ms": config.max_wait_ms,
            "min_bytes": config.min_bytes,
            "max_bytes": max(config.max_bytes, largest),
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        self._fetching_nodes.add(node)
        timeout = self._network.request_timeout + config.max_wait_ms / 1000
        future = self._network.send(node, ApiKey.FETCH, body, api_version=version,
                                    timeout=timeout)
        future.add_done_callback(partial(self._on_fetch, node, requested))

    def _on_fetch(
        self, node: int, requested: dict[TopicPartition, int], future: Future[dict[str, Any]]
    ) -> None:
        self._fetching_nodes.discard(node)
        error = future.exception()
        if error is not None:
            self._node_retry_at[node] = time.monotonic() + self._backoff
            if getattr(error, "retriable", False):
                self._metadata.request_update()
            else:
                self._errors.append(error)
            return
        self.throttle_stats.record(future.value["throttle_time_ms"], log, "fetch")
        for topic in future.value["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition"])
                offset = requested.get(tp)
                if (
                    offset is None
                    or not self._positions.is_assigned(tp)
                    or self._positions.position(tp) != offset
                ):
                    continue  # not asked for, or seeked while the fetch was out
                self._handle_partition(tp, offset, p)

    def _handle_partition(self, tp: TopicPartition, offset: int, result: dict[str, Any]) -> None:
        code = result["error_code"]
        state = self._positions.state(tp)
        state.high_watermark = result["high_watermark"]
        state.log_start_offset = result["log_start_offset"]
        if code == ErrorCode.NONE:
            self._handle_records(tp, offset, result["records"])
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, offset, state.log_start_offset, state.high_watermark)
        elif code in STALE_METADATA_ERRORS:
            self._metadata.request_update()
        else:
            self._errors.append(partition_error(f"{tp} fetch at offset {offset}", code))

    def _out_of_range(self, tp: TopicPartition, offset: int, start: int, end: int) -> None:
        reset = self._positions.default_reset
        if reset is OffsetReset.NONE:
            # -1 is "unknown" on the wire (a broker that does not say): no made-up range then
            where = f" [{start}, {end}]" if start >= 0 and end >= 0 else ""
            self._errors.append(
                OffsetOutOfRangeError(
                    f"{tp}: offset {offset} is out of range{where} and "
                    "auto_offset_reset is none"
                )
            )
        else:
            self._positions.request_reset(tp, reset)

    def _handle_records(self, tp: TopicPartition, offset: int, data: bytes) -> None:
        if not data:
            return
        if self._config.message_sets:
            self._handle_set(tp, offset, data)
            return
        records, whole, next_offset, damage = decode_chunk(
            tp, data, offset, verify_crc=self._config.check_crcs)
        error = None
        if damage is not None:
            if damage.offset is None:  # nowhere to seek past (the codec always says, though)
                self._errors.append(damage)
                return
            # never behind the position, so a seek past it always moves on
            error = CorruptRecordError(tp, damage, max(damage.offset, offset))
        elif whole == 0:
            self._grow_fetch(tp, offset, data)
            return
        self._fetch_bytes.pop(tp, None)
        self._buffered.append(_Buffered(tp, records, offset, next_offset, error=error))

    def _handle_set(self, tp: TopicPartition, offset: int, data: bytes) -> None:
        cut = cut_from(
            data, offset, aligned=self._set_ends.get(tp) == offset,
            verify_crc=self._config.check_crcs,
        )
        error = None
        if cut.damage is not None:
            error = CorruptRecordError(tp, cut.damage, max(cut.damage.offset or 0, offset))
        elif cut.whole == 0:
            self._grow_fetch(tp, offset, data)
            return
        self._fetch_bytes.pop(tp, None)
        sets = [FetchedSet(tp.topic, tp.partition, offset, cut.next_offset, cut.data)]
        self._buffered.append(
            _Buffered(tp, sets if cut.data else [], offset, cut.next_offset, error=error)
        )

    def _grow_fetch(self, tp: TopicPartition, offset: int, data: bytes) -> None:
        """The first message did not fit in the fetch: ask for enough to hold it."""
        current = self._fetch_bytes.get(tp, self._config.partition_bytes)
        if len(data) >= LOG_OVERHEAD:
            needed = LOG_OVERHEAD + int.from_bytes(data[8:12], "big", signed=True)
        else:
            needed = current * 2
        limit = self._config.max_partition_bytes
        if needed > limit:
            self._errors.append(RecordTooLargeError(tp.topic, tp.partition, offset, needed, limit))
            return
        self._fetch_bytes[tp] = max(current, needed)

    # ---------------------------------------------------------------------------- resets

    def send_resets(self) -> None:
        """Look up positions for partitions that need one (ListOffsets to their leaders)."""
        now = time.monotonic()
        if now < self._reset_retry_at:
            return
        wanted = {
            tp: reset
            for tp, reset in self._positions.awaiting_reset().items()
            if tp not in self._resetting
        }
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, reset in wanted.items():
            leader = self._metadata.current.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._metadata.request_update()
                continue
            when = EARLIEST if reset is OffsetReset.EARLIEST else LATEST
            by_node.setdefault(leader, {})[tp] = when
        for node, specs in by_node.items():
            self._resetting.update(specs)
            future = self._network.send(node, ApiKey.LIST_OFFSETS, list_offsets_body(specs))
            future.add_done_callback(partial(self._on_reset, specs))

    def _on_reset(self, specs: dict[TopicPartition, int], future: Future[dict[str, Any]]) -> None:
        self._resetting.difference_update(specs)
        error = future.exception()
        if error is not None:
            self._reset_retry_at = time.monotonic() + self._backoff
            if not getattr(error, "retriable", False):
                self._errors.append(error)
            return
        for tp, answer in read_list_offsets(future.value).items():
            when = specs.get(tp)
            if when is None or not self._positions.is_assigned(tp):
                continue
            state = self._positions.state(tp)
            wanted = state.reset or self._positions.default_reset
            if state.position is not None or when != (
                EARLIEST if wanted is OffsetReset.EARLIEST else LATEST
            ):
                continue  # seeked, or asked to reset elsewhere, meanwhile
            if isinstance(answer, BrokerError):
                self._reset_retry_at = time.monotonic() + self._backoff
                if answer.code in STALE_METADATA_ERRORS:
                    self._metadata.request_update()
                elif not answer.retriable:
                    self._errors.append(answer)
                continue
            self._positions.seek(tp, answer.offset)
