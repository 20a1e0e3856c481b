"""The group coordinator's driver: feeds ``coordinator.GroupCoordinator`` and carries out its
effects with trio, on the event loop's thread.

The coordinator is deterministic and sans-IO (see ``coordinator/__init__`` for the contract);
everything here is what touches the world:

- requests: each group request gets a reply token, and its handler waits for the coordinator's
  ``Respond`` to that token -- a JoinGroup until its round ends, a commit until it is written;
- ``AppendRecords``: appended to ``__consumer_offsets`` before ``on_append_done`` is called, so
  nothing is acknowledged before it is in the log. The topic is created on first use: compacted,
  ``offsets_topic_partitions`` partitions, Kafka's 100 MiB segments (so compaction has closed
  segments to work on);
- timers: one task sleeps until the earliest ``SetTimer`` deadline and calls ``on_timer``;
- leadership: this broker leads every offsets partition. At start each one with records goes to
  Catch-up and is read back in chunks, yielding to the event loop between chunks (its groups'
  requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS). ``resign`` / ``become_leader`` move one
  partition; in a cluster the offsets partitions' LeaderAndIsr calls them;
- topics created or deleted (``Topics.listeners``) and closed connections are reported to it.

Times given to the coordinator are wall-clock milliseconds: they are stored in commits and
compared with them after a restart.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import structlog
import trio

from broker.error_codes import error_code_for
from broker.log import LogOffsetOutOfRangeError, PartitionLog
from broker.purgatory import FetchPurgatory
from broker.topics import Topic, Topics
from coordinator import (
    OFFSETS_TOPIC,
    AppendRecords,
    CancelTimer,
    CoordinatorConfig,
    Effect,
    GroupCoordinator,
    LoaderState,
    RequestContext,
    Respond,
    SetTimer,
    TimerKey,
)
from coordinator.offsets_topic import (
    OffsetsRecordError,
    Record,
)
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, UnknownTopicOrPartitionError
from protocol.messageset import decode_messages, encode_message_set

log = structlog.get_logger(__name__)


class Replication(Protocol):
    """Cluster mode: how the driver knows a record it appended is on the ISR."""

    def appended(self, topic: str, partition: int) -> None: ...

    async def await_replication(self, topic: str, partition: int, last_offset: int,
                                deadline: float) -> None: ...


#: how long a group record may take to reach the ISR (Kafka's offsets.commit.timeout.ms)
OFFSETS_COMMIT_TIMEOUT_S = 5.0


class TopicCatalog(Protocol):
    """What the coordinator needs to know of topics: partition counts, and their changes."""

    listeners: list[Callable[[str, int | None], None]]

    def get(self, name: str) -> Topic | None: ...


#: bytes of __consumer_offsets read per step while loading a partition
LOAD_CHUNK_BYTES = 1 << 20
#: Kafka's offsets.topic.segment.bytes
OFFSETS_SEGMENT_BYTES = 100 * 1024 * 1024


@dataclasses.dataclass(slots=True)
class _Reply:
    body: dict[str, Any] | None = None
    arrived: trio.Event | None = None  # made only when the answer does not come at once


class GroupDriver:
    def __init__(
        self,
        config: CoordinatorConfig,
        topics: Topics,
        purgatory: FetchPurgatory,
        *,
        clock: Callable[[], float] = time.time,
        load_chunk_bytes: int = LOAD_CHUNK_BYTES,
        catalog: TopicCatalog | None = None,
        lead_all: bool = True,
        replication: Replication | None = None,
    ) -> None:
        """``catalog``: where partition counts of subscribed topics come from (the cluster's
        metadata cache in cluster mode; else ``topics``). ``lead_all``: a single broker leads
        every offsets partition from the start; in a cluster LeaderAndIsr says which."""
        existing = topics.get(OFFSETS_TOPIC)
        if existing is not None and existing.partitions != config.offsets_topic_partitions:
            # the partition of a group is a hash modulo the topic's real partition count
            log.warning("coordinator.offsets_partitions_kept",
                        setting=config.offsets_topic_partitions, topic=existing.partitions)
            config = dataclasses.replace(config, offsets_topic_partitions=existing.partitions)
        self.coordinator = GroupCoordinator(config, self._partition_count)
        self._topics = topics
        self._catalog: TopicCatalog = topics if catalog is None else catalog
        self._lead_all = lead_all
        # cluster mode: an append is done once replicated; per partition, in append order
        self._replication = replication
        self._unreplicated: dict[int, deque[tuple[int, int]]] = {}
        self._nursery: trio.Nursery | None = None
        self._purgatory = purgatory
        self._clock = clock
        self._load_chunk_bytes = load_chunk_bytes
        self._tokens = itertools.count(1)
        self._replies: dict[Hashable, _Reply] = {}
        self._queue: deque[Effect] = deque()
        self._applying = False
        # timers: the armed deadline per key, and a heap of (deadline, seq, key) whose entries
        # that no longer match the dict are dropped when they come up
        self._timers: dict[TimerKey, int] = {}
        self._timer_heap: list[tuple[int, int, TimerKey]] = []
        self._timer_seq = itertools.count()
        self._timer_sleep: trio.CancelScope | None = None
        self._sleeping_until_ms = math.inf
        # loading: a partition's epoch changes whenever it is led anew or resigned, which
        # tells a load in progress that it is no longer wanted
        self._epochs = [0] * config.offsets_topic_partitions
        self._loads: deque[tuple[int, int]] = deque()
        self._loads_wanted = trio.Event()
        #: called with (partition, seconds) when a partition with records has been loaded
        self.load_listeners: list[Callable[[int, float], None]] = []
        self._catalog.listeners.append(self._topic_changed)
        if lead_all:
            for partition in range(config.offsets_topic_partitions):
                self.become_leader(partition)

    @property
    def partitions(self) -> int:
        return self.coordinator.config.offsets_topic_partitions

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ============================================================================ tasks

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Timers and loading, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._run_timers)
            nursery.start_soon(self._run_loads)
            task_status.started()

    def close(self) -> None:
        """Shutdown: resign every partition, so held JoinGroups are answered (NOT_COORDINATOR)
        at once instead of holding the connections open until the shutdown deadline."""
        for partition in range(self.partitions):
            self.resign(partition)

    # ========================================================================= requests

    async def request(
        self,
        api_key: ApiKey,
        body: dict[str, Any],
        *,
        client_id: str = "",
        client_host: str = "",
        connection: Hashable | None = None,
    ) -> dict[str, Any]:
        """The coordinator's answer to one group request (validated body), when it comes."""
        token, reply = self._hand(api_key, body, client_id, client_host, connection)
        try:
            if reply.body is None:
                reply.arrived = trio.Event()
                await reply.arrived.wait()
        finally:
            del self._replies[token]
        assert reply.body is not None
        return reply.body

    def heartbeat_now(self, group_id: str, member_id: str, generation: int) -> ErrorCode:
        """A Heartbeat's error code, without an await (the coordinator always answers one at
        once): the idle lane answers it in the same pass as it reads it."""
        code, effects = self.coordinator.heartbeat(group_id, member_id, generation,
                                                   self.now_ms())
        if effects:
            self._apply(effects)
        return code

    def _hand(self, api_key: ApiKey, body: dict[str, Any], client_id: str, client_host: str,
              connection: Hashable | None) -> tuple[int, _Reply]:
        """Hand a request to the coordinator: its token, and its reply (with the body if it
        was answered at once). The caller removes the reply from ``_replies`` when done."""
        token = next(self._tokens)
        reply = self._replies[token] = _Reply()
        try:
            context = RequestContext(token, self.now_ms(), client_id, client_host, connection)
            self._apply(self.coordinator.handle(api_key, body, context))
        except BaseException:
            del self._replies[token]
            raise
        return token, reply

    def coordinates(self, group_id: str) -> bool:
        """Whether this broker leads the group's offsets partition (FindCoordinator)."""
        partition = self.coordinator.partition_for(group_id)
        return self.coordinator.partition_state(partition) is not LoaderState.DOWN

    def connection_closed(self, connection: Hashable) -> None:
        self._call(self.coordinator.on_disconnect, connection, self.now_ms())

    def _topic_changed(self, topic: str, partitions: int | None) -> None:
        self._call(self.coordinator.on_topic_partitions_changed, topic, partitions, self.now_ms())

    def _partition_count(self, topic: str) -> int | None:
        found = self._catalog.get(topic)
        return None if found is None else found.partitions

    # ======================================================================== leadership

    def become_leader(self, partition: int) -> None:
        """Lead ``partition``: Down -> Catch-up, loaded in the background (at once if its log is
        empty). Nothing happens if it is led already."""
        if self.coordinator.partition_state(partition) is not LoaderState.DOWN:
            return
        self._epochs[partition] += 1
        plog = self._topics.log(OFFSETS_TOPIC, partition)
        if plog is None or plog.log_end_offset == plog.log_start_offset:
            self._apply(self.coordinator.become_leader(partition, [], self.now_ms()))
            return
        self._apply(self.coordinator.start_loading(partition))
        self._loads.append((partition, self._epochs[partition]))
        self._loads_wanted.set()

    def loading(self, partition: int) -> bool:
        return self.coordinator.partition_state(partition) is LoaderState.CATCH_UP

    def resign(self, partition: int) -> None:
        """Stop leading ``partition``: its groups are unloaded (requests: NOT_COORDINATOR)."""
        if self.coordinator.partition_state(partition) is LoaderState.DOWN:
            return
        self._epochs[partition] += 1
        self._apply(self.coordinator.resign(partition, self.now_ms()))

    async def _run_loads(self) -> None:
        while True:
            while self._loads:
                await self._load(*self._loads.popleft())
            self._loads_wanted = trio.Event()
            await self._loads_wanted.wait()

    async def _load(self, partition: int, epoch: int) -> None:
        """Read the partition from its start to the log end it has now, one chunk per step."""
        if self._epochs[partition] != epoch:
            return
        plog = self._topics.log(OFFSETS_TOPIC, partition)
        started = self.now_ms()
        records = 0
        try:
            if plog is not None:
                end = plog.log_end_offset
                offset = plog.log_start_offset
                chunk = self._load_chunk_bytes
                while offset < end:
                    try:
                        data = plog.read(offset, chunk, max_offset=end).bytes()
                    except LogOffsetOutOfRangeError:  # the log start moved on meanwhile
                        offset = plog.log_start_offset
                        continue
                    if not data:
                        break  # compacted away up to the end
                    messages, _ = decode_messages(data)
                    if not messages:
                        chunk *= 2  # one entry is larger than the chunk
                        continue
                    batch = [(m.key, m.value) for m in messages
                             if m.offset >= offset and m.key is not None]
                    self._feed(partition, batch)
                    records += len(batch)
                    offset = messages[-1].offset + 1
                    await trio.lowlevel.checkpoint()  # requests get their turn between chunks
                    if self._epochs[partition] != epoch:
                        return  # resigned meanwhile
        except Exception:
            # it stays in Catch-up: its groups' clients are told to retry, nothing is lost
            log.exception("coordinator.load_failed", partition=partition)
            return
        self._apply(self.coordinator.finish_loading(partition, self.now_ms()))
        took_ms = self.now_ms() - started
        log.info("coordinator.partition_loaded", partition=partition, records=records,
                 ms=took_ms)
        for listener in self.load_listeners:
            listener(partition, took_ms / 1000)

    def _feed(self, partition: int, batch: list[Record]) -> None:
        try:
            self.coordinator.load_records(partition, batch)
        except OffsetsRecordError:
            # again one by one, skipping what cannot be read (replaying a prefix is harmless:
            # the newest value per key wins either way)
            for record in batch:
                try:
                    self.coordinator.load_records(partition, [record])
                except OffsetsRecordError as exc:
                    log.error("coordinator.record_unreadable", partition=partition, error=str(exc))

    # =========================================================================== effects

    def _call(self, entry_point: Callable[..., list[Effect]], *args: Any) -> None:
        """Run a coordinator entry point that nobody waits on; a bug there is logged, not
        allowed to take down the broker."""
        try:
            effects = entry_point(*args)
        except Exception:
            log.exception("coordinator.failed", call=entry_point.__name__)
            return
        self._apply(effects)

    def _apply(self, effects: list[Effect]) -> None:
        """Carry out effects in order. An append's ``on_append_done`` effects queue behind the
        rest; a nested call (an append that creates the topic) only queues."""
        self._queue.extend(effects)
        if self._applying:
            return
        self._applying = True
        try:
            while self._queue:
                effect = self._queue.popleft()
                if isinstance(effect, Respond):
                    reply = self._replies.get(effect.token)
                    if reply is not None:  # else its handler was cancelled (shutdown)
                        reply.body = effect.body
                        if reply.arrived is not None:
                            reply.arrived.set()
                elif isinstance(effect, AppendRecords):
                    error, last_offset = self._append(effect)
                    if error is ErrorCode.NONE and self._replication is not None:
                        self._await_replication(effect, last_offset)
                        continue
                    self._queue.extend(
                        self.coordinator.on_append_done(effect.append_id, error, self.now_ms())
                    )
                elif isinstance(effect, SetTimer):
                    self._set_timer(effect.key, effect.deadline_ms)
                elif isinstance(effect, CancelTimer):
                    self._timers.pop(effect.key, None)
        finally:
            self._applying = False

    def _append(self, effect: AppendRecords) -> tuple[ErrorCode, int]:
        """Append the records; the error code and the last offset written."""
        try:
            plog = self._offsets_log(effect.partition)
            now = self.now_ms()
            appended = plog.append(
                encode_message_set([(key, value, now) for key, value in effect.records]))
        except Exception as exc:
            code = error_code_for(exc)
            log.error("coordinator.append_failed", partition=effect.partition, error=code.name,
                      reason=str(exc))
            return code, -1
        self._purgatory.appended(OFFSETS_TOPIC, effect.partition)
        if self._replication is not None:
            self._replication.appended(OFFSETS_TOPIC, effect.partition)
        return ErrorCode.NONE, appended.last_offset

    def _await_replication(self, effect: AppendRecords, last_offset: int) -> None:
        """Cluster mode: the append is done (a commit answered, a round completed) only once
        the ISR has it -- acks=all for the coordinator's own records."""
        queue = self._unreplicated.get(effect.partition)
        if queue is None:
            queue = self._unreplicated[effect.partition] = deque()
            assert self._nursery is not None
            self._nursery.start_soon(self._complete_appends, effect.partition, queue)
        queue.append((effect.append_id, last_offset))

    async def _complete_appends(self, partition: int, queue: deque[tuple[int, int]]) -> None:
        assert self._replication is not None
        try:
            while queue:
                append_id, last_offset = queue[0]
                deadline = trio.current_time() + OFFSETS_COMMIT_TIMEOUT_S
                try:
                    await self._replication.await_replication(
                        OFFSETS_TOPIC, partition, last_offset, deadline)
                    code = ErrorCode.NONE
                except BrokerError as exc:
                    code = exc.code
                    log.warning("coordinator.append_not_replicated", partition=partition,
                                error=code.name, reason=str(exc))
                queue.popleft()
                self._call(self.coordinator.on_append_done, append_id, code, self.now_ms())
        finally:
            del self._unreplicated[partition]

    def _offsets_log(self, partition: int) -> PartitionLog:
        plog = self._topics.log(OFFSETS_TOPIC, partition)
        if plog is None and self._lead_all and self._topics.get(OFFSETS_TOPIC) is None:
            configs = {"cleanup_policy": "compact", "segment_bytes": str(OFFSETS_SEGMENT_BYTES)}
            self._topics.create(OFFSETS_TOPIC, self.partitions, 1, configs)
            plog = self._topics.log(OFFSETS_TOPIC, partition)
        if plog is None:
            raise UnknownTopicOrPartitionError(f"{OFFSETS_TOPIC} has no partition {partition}")
        return plog

    # ============================================================================ timers

    def _set_timer(self, key: TimerKey, deadline_ms: int) -> None:
        self._timers[key] = deadline_ms
        heapq.heappush(self._timer_heap, (deadline_ms, next(self._timer_seq), key))
        if deadline_ms < self._sleeping_until_ms and self._timer_sleep is not None:
            self._timer_sleep.cancel()  # the timer task sleeps too long: wake it to recompute

    async def _run_timers(self) -> None:
        heap = self._timer_heap
        while True:
            now = self.now_ms()
            while heap and heap[0][0] <= now:
                deadline, _, key = heapq.heappop(heap)
                if self._timers.get(key) == deadline:
                    del self._timers[key]
                    self._call(self.coordinator.on_timer, key, now)
            if len(heap) > 2 * len(self._timers) + 1024:  # mostly cancelled or re-armed entries
                heap[:] = [entry for entry in heap if self._timers.get(entry[2]) == entry[0]]
                heapq.heapify(heap)
            with trio.CancelScope() as self._timer_sleep:
                if heap:
                    self._sleeping_until_ms = heap[0][0]
                    await trio.sleep(max(heap[0][0] - self.now_ms(), 0) / 1000)
                else:
                    self._sleeping_until_ms = math.inf
                    await trio.sleep_forever()
            self._timer_sleep = None
            self._sleeping_until_ms = math.inf
