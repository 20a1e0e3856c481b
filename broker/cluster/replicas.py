"""Replication on one broker: the partitions it leads and follows (seed 003 "Replication").

- A follower fetches from its leader "same like how consumer does": one ``ReplicaFetcher`` task
  per leader broker batches every partition this broker follows from it, long-polling, and
  appends what it gets with the leader's offsets. Before its first fetch under a new leader
  epoch it asks the leader where its own latest epoch ends (OffsetsForLeaderEpoch, KIP-101) and
  truncates there -- never to its high watermark alone, which loses acknowledged data when two
  replicas restart one after the other.
- A leader learns each follower's log end offset from its fetches. The high watermark is the
  lowest log end offset in the ISR; consumers read below it only ("Consumers can only fetch data
  which has been replicated completly"). acks=all produces wait until it passes their messages.
- "Leader makes the follower to be out of sync if it does NOT send a fetch request in
  [replica_lag_time_max_ms] or if it sends a fetch request but its not update till the last
  offset": a follower that has not been caught up for that long leaves the ISR; one that catches
  up with the high watermark rejoins. The leader writes each ISR change to the partition's state
  znode, conditional on its version (and so on the leader epoch the controller wrote), and drops
  a sequential node in ``/isr_change_notification`` so the controller tells every broker.
- DeleteRecords moves the leader's log start; followers follow it from their fetch answers and
  report their own in each fetch (Fetch v3). The partition's low watermark is the lowest log
  start among the leader and the assigned replicas on live brokers, ISR or not (Kafka's
  ``Partition.lowWatermarkIfLeader``); DeleteRecords answers once it reaches the requested
  offset, so a follower that becomes leader right after the answer serves nothing below it.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.links import BrokerLink, LinkError, LinkSecurity
from broker.log import PartitionLog
from protocol.apis import ApiKey
from protocol.entry_scan import entry_size_at
from protocol.errors import (
    BrokerError,
    ClusterAuthorizationFailedError,
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnsupportedVersionError,
)
from protocol.partitions import TopicPartition

log = structlog.get_logger(__name__)

_OFFSET = struct.Struct(">q")
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
FETCH_BACKOFF = 0.2
#: Fetch v4: record batches (magic 2) come as stored, not converted
FETCH_VERSION = 4
#: Fetch v3: each partition carries the follower's log start offset (the low watermark)
FETCH_VERSION_WITH_LOG_START = 3
#: what a follower falls back to for a leader of an older release (see ``_lowered_for``)
FETCH_VERSION_BEFORE_LOG_START = 1
#: the Fetch versions followers of each release used, newest first
_FETCH_VERSIONS_BY_RELEASE = (
    FETCH_VERSION, FETCH_VERSION_WITH_LOG_START, FETCH_VERSION_BEFORE_LOG_START)
UNKNOWN_OFFSET = -1


@dataclass
class Replica:
    """This broker's replica of one partition and what it knows of the others."""

    tp: TopicPartition
    plog: PartitionLog
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    zk_version: int
    controller_epoch: int
    #: leader side: each follower's log end offset and when it was last caught up
    follower_end: dict[int, int] = field(default_factory=dict)
    caught_up_at: dict[int, float] = field(default_factory=dict)
    #: leader side: each follower's log start offset, as its last fetch reported it (absent,
    #: or -1 from a follower fetching below v3: unknown, which holds the low watermark)
    follower_start: dict[int, int] = field(default_factory=dict)
    #: follower side: truncate (by leader epoch) before the next fetch
    needs_truncation: bool = False
    #: leader side: an ISR write is in flight (one at a time)
    changing_isr: bool = False
    #: set whenever the high watermark moves or the role changes: acks=all waiters re-check
    moved: trio.Event = field(default_factory=trio.Event)

    def wake(self) -> None:
        self.moved.set()
        self.moved = trio.Event()


class ReplicaManager:
    def __init__(self, broker_id: int, *, zoo: Any, settings: Any,
                 on_high_watermark: Callable[[str, int], None],
                 broker_address: Callable[[int], tuple[str, int] | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self._zoo = zoo
        self._settings = settings
        self.link_security = LinkSecurity.of(settings)
        self._wake_fetches = on_high_watermark
        self._address = broker_address
        self._clock = clock
        self._lag = settings.replica_lag_time_max_ms / 1000
        self.replicas: dict[TopicPartition, Replica] = {}
        #: the live brokers, as the last UpdateMetadata named them; None before the first (then
        #: every assigned replica counts for the low watermark)
        self._live: frozenset[int] | None = None
        self._fetchers: dict[tuple[int, str, int], ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        #: followed partitions whose fetching could not start yet: a LeaderAndIsr that came
        #: before ``run`` (a restarted broker registers, and is told, before it serves) or named
        #: a leader whose address is not known yet; started by ``run`` and ``retry_fetching``
        self._unfetched: set[TopicPartition] = set()
        #: ISR changes this broker wrote as leader (Kafka's IsrShrinksPerSec, IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0

    async def run(self) -> None:
        """The ISR expiry check and the fetchers' home, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.retry_fetching()
            while True:
                await trio.sleep(self._lag / 2)
                await self._shrink_isrs()

    # ========================================================================== roles

    def leading(self, tp: TopicPartition) -> Replica | None:
        replica = self.replicas.get(tp)
        return replica if replica is not None and replica.leader == self.broker_id else None

    def become(self, tp: TopicPartition, plog: PartitionLog, state: dict[str, Any]) -> None:
        """Apply one LeaderAndIsr entry (its leader epoch is newer than the one known)."""
        was = self.replicas.get(tp)
        if (was is not None and was.leader_epoch == state["leader_epoch"]
                and was.leader == state["leader"]):
            # the same epoch again (a new controller tells everyone): take the newer view
            was.isr = list(state["isr"])
            was.replicas = list(state["replicas"])
            was.zk_version = max(was.zk_version, state["zk_version"])
            was.wake()  # the replicas may have changed: DeleteRecords waiters count anew
            return
        replica = Replica(tp, plog, state["leader"], state["leader_epoch"], list(state["isr"]),
                          list(state["replicas"]), state["zk_version"],
                          state["controller_epoch"])
        self.replicas[tp] = replica
        if was is not None:
            self._stop_fetching(was)
            was.wake()
        if replica.leader == self.broker_id:
            plog.assign_leader_epoch(replica.leader_epoch)
            now = self._clock()
            for member in replica.isr:
                if member != self.broker_id:
                    replica.caught_up_at[member] = now
            self._advance_high_watermark(replica)
        else:
            replica.needs_truncation = True
            self._start_fetching(replica)

    def stop(self, tp: TopicPartition) -> None:
        replica = self.replicas.pop(tp, None)
        if replica is not None:
            self._stop_fetching(replica)
            replica.wake()

    # ==================================================================== leader side

    def check_min_isr(self, tp: TopicPartition, min_insync: int) -> None:
        """acks=all: refuse before appending when the ISR is too small (nothing written)."""
        replica = self.leading(tp)
        if replica is not None and len(replica.isr) < min_insync:
            raise NotEnoughReplicasError(
                f"{tp[0]}-{tp[1]} has {len(replica.isr)} in-sync replicas "
                f"{replica.isr}; min_insync_replicas is {min_insync}")

    async def wait_for_replication(self, tp: TopicPartition, offset: int, min_insync: int,
                                   deadline: float) -> None:
        """acks=all: return once the high watermark passes ``offset`` (the batch's last)
        with at least ``min_insync`` replicas in the ISR. The ISR comes first: a shrink moves
        the high watermark too, and one down to fewer replicas than that would let a batch
        past it that the leader alone holds (Kafka: NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        while True:
            replica = self.leading(tp)
            if replica is None:
                raise NotLeaderForPartitionError(
                    f"broker {self.broker_id} stopped leading {tp[0]}-{tp[1]} before the "
                    "batch was replicated")
            if len(replica.isr) < min_insync:
                raise NotEnoughReplicasAfterAppendError(
                    f"{tp[0]}-{tp[1]}: the ISR {replica.isr} shrank below min_insync_replicas="
                    f"{min_insync} after the batch was written")
            if replica.plog.high_watermark > offset:
                return
            with trio.move_on_at(deadline):
                await replica.moved.wait()
            if trio.current_time() >= deadline:
                raise RequestTimedOutError(
                    f"{tp[0]}-{tp[1]}: not replicated to the ISR {replica.isr} in time")

    def follower_fetched(self, follower: int, tp: TopicPartition, fetch_offset: int,
                         leader_epoch: int, log_start_offset: int = UNKNOWN_OFFSET) -> Replica:
        """A follower asked for ``fetch_offset``: it has everything before it, and nothing
        below ``log_start_offset`` (-1: it did not say)."""
        replica = self.replicas.get(tp)
        if replica is None or replica.leader != self.broker_id:
            raise NotLeaderForPartitionError(
                f"broker {self.broker_id} does not lead {tp[0]}-{tp[1]}")
        if leader_epoch >= 0 and leader_epoch < replica.leader_epoch:
            raise FencedLeaderEpochError(
                f"{tp[0]}-{tp[1]}: follower {follower} fetches under leader epoch "
                f"{leader_epoch}; the leader is at {replica.leader_epoch}")
        if leader_epoch > replica.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{tp[0]}-{tp[1]}: follower {follower} knows leader epoch {leader_epoch}; "
                f"this leader is still at {replica.leader_epoch}")
        replica.follower_end[follower] = fetch_offset
        before = replica.follower_start.get(follower, UNKNOWN_OFFSET)
        replica.follower_start[follower] = log_start_offset
        if log_start_offset > before:
            replica.wake()  # the low watermark may have moved: DeleteRecords waiters re-check
        if fetch_offset >= replica.plog.log_end_offset:
            replica.caught_up_at[follower] = self._clock()
        if (follower not in replica.isr and follower in replica.replicas
                and fetch_offset >= replica.plog.high_watermark
                and fetch_offset >= self._epoch_start(replica)):
            self._spawn_isr_change(replica, [*replica.isr, follower], f"{follower} caught up")
        self._advance_high_watermark(replica)
        return replica

    def live_brokers_changed(self, live: Iterable[int]) -> None:
        """UpdateMetadata named the live brokers: a replica on a broker that left no longer
        holds the low watermark back (Kafka counts live brokers only), so waiters re-check."""
        self._live = frozenset(live)
        for replica in self.replicas.values():
            if replica.leader == self.broker_id:
                replica.wake()

    def low_watermark(self, replica: Replica) -> int:
        """The lowest log start offset among the leader and the assigned replicas on live
        brokers, in the ISR or not (Kafka's ``Partition.lowWatermarkIfLeader``). A follower
        that has not reported its log start under this leader counts as -1."""
        low = replica.plog.log_start_offset
        for member in self._holding_low_watermark(replica):
            low = min(low, replica.follower_start.get(member, UNKNOWN_OFFSET))
        return low

    def _holding_low_watermark(self, replica: Replica) -> list[int]:
        return [m for m in replica.replicas if m != self.broker_id
                and (self._live is None or m in self._live)]

    async def wait_for_low_watermark(self, tp: TopicPartition, offset: int,
                                     deadline: float) -> int:
        """DeleteRecords: return the low watermark once it has reached ``offset`` -- every live
        replica has moved its log start there, so none that leads next serves the deleted
        records (Kafka's DelayedDeleteRecords). RequestTimedOutError at ``deadline``."""
        while True:
            replica = self.leading(tp)
            if replica is None:
                raise NotLeaderForPartitionError(
                    f"broker {self.broker_id} stopped leading {tp[0]}-{tp[1]} before its "
                    f"replicas moved their log start to {offset}")
            low = self.low_watermark(replica)
            if low >= offset:
                return low
            with trio.move_on_at(deadline):
                await replica.moved.wait()
            if trio.current_time() >= deadline and self.leading(tp) is replica:
                behind = {m: replica.follower_start.get(m, UNKNOWN_OFFSET)
                          for m in self._holding_low_watermark(replica)
                          if replica.follower_start.get(m, UNKNOWN_OFFSET) < offset}
                raise RequestTimedOutError(
                    f"{tp[0]}-{tp[1]}: the leader's log start is {replica.plog.log_start_offset}"
                    f", but the log start of replicas {_named(behind)} has not reached {offset} "
                    "within the request's timeout_ms")

    def appended(self, tp: TopicPartition) -> None:
        """The leader appended: with an ISR of one, the high watermark moves at once."""
        replica = self.leading(tp)
        if replica is not None:
            self._advance_high_watermark(replica)

    def high_watermark_pending(self, tp: TopicPartition) -> bool:
        """KIP-207: a new leader's high watermark is the one it had as a follower, which may be
        behind the old leader's, until the ISR fetches from it past its epoch's start. Until
        then it answers ListOffsets latest with OFFSET_NOT_AVAILABLE, not a number that went
        backwards."""
        replica = self.leading(tp)
        return replica is not None and (
            replica.plog.high_watermark < self._epoch_start(replica))

    def _epoch_start(self, replica: Replica) -> int:
        """Where this leader's epoch began: a follower joins the ISR only past it (Kafka)."""
        for entry in reversed(replica.plog.leader_epochs.entries):
            if entry.epoch == replica.leader_epoch:
                return entry.start_offset
        return 0

    def _advance_high_watermark(self, replica: Replica) -> None:
        plog = replica.plog
        ends = [plog.log_end_offset]
        ends += [replica.follower_end.get(m, 0) for m in replica.isr if m != self.broker_id]
        new = min(ends)
        if new > plog.high_watermark:
            plog.high_watermark = new
            replica.wake()
            self._wake_fetches(*replica.tp)

    async def _shrink_isrs(self) -> None:
        now = self._clock()
        for replica in list(self.replicas.values()):
            if replica.leader != self.broker_id:
                continue
            lagging = [m for m in replica.isr if m != self.broker_id
                       and now - replica.caught_up_at.get(m, now) > self._lag]
            if lagging:
                isr = [m for m in replica.isr if m not in lagging]
                await self._change_isr(replica, isr, f"{lagging} fell behind for more than "
                                       f"replica_lag_time_max_ms")

    def _spawn_isr_change(self, replica: Replica, isr: list[int], reason: str) -> None:
        if self._nursery is not None and not replica.changing_isr:
            replica.changing_isr = True
            self._nursery.start_soon(self._change_isr, replica, isr, reason)

    async def _change_isr(self, replica: Replica, isr: list[int], reason: str) -> None:
        """Write the new ISR to the state znode (conditional on its version), then tell the
        controller through /isr_change_notification."""
        try:
            state = zk.LeaderIsr(self.broker_id, replica.leader_epoch, tuple(isr),
                                 replica.controller_epoch, replica.zk_version)
            try:
                stat = await self._zoo.call(self._zoo.kazoo.set, zk.state_path(*replica.tp),
                                            state.encode(), version=replica.zk_version)
            except (BadVersionError, NoNodeError):
                log.info("replica.isr_change_refused", topic=replica.tp[0],
                         partition=replica.tp[1], reason="the state znode moved; a newer "
                         "LeaderAndIsr will tell")
                return
            except KazooException as exc:
                # the connection dropped or the session expired (a leader paused past its
                # session timeout, most likely replaced meanwhile): not a reason to crash the
                # broker; the next check tries again, and LeaderAndIsr says what it is now
                log.warning("replica.isr_change_failed", topic=replica.tp[0],
                            partition=replica.tp[1], isr=isr,
                            reason=f"{type(exc).__name__}: {exc}")
                return
            if self.replicas.get(replica.tp) is not replica:
                return
            before = replica.isr
            replica.isr = list(isr)
            if len(isr) < len(before):
                self.isr_shrinks += 1
            elif len(isr) > len(before):
                self.isr_expands += 1
            replica.zk_version = stat.version
            for member in isr:
                replica.caught_up_at.setdefault(member, self._clock())
            log.info("replica.isr_changed", topic=replica.tp[0], partition=replica.tp[1],
                     isr=isr, before=before, reason=reason, leader_epoch=replica.leader_epoch)
            try:
                await self._zoo.call(self._notify_controller, [replica.tp])
            except KazooException as exc:  # written, but the controller hears of it later
                log.warning("replica.isr_change_not_notified", topic=replica.tp[0],
                            partition=replica.tp[1], reason=f"{type(exc).__name__}: {exc}")
            self._advance_high_watermark(replica)
            replica.wake()
        finally:
            replica.changing_isr = False

    def _notify_controller(self, tps: Iterable[TopicPartition]) -> None:
        body = json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p} for t, p in tps]}).encode()
        self._zoo.kazoo.create(f"{zk.ISR_CHANGES}/{zk.ISR_CHANGE_PREFIX}", body,
                               sequence=True, makepath=True)

    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition"])
                replica = self.leading(tp)
                if replica is None:
                    parts.append({"partition": tp[1], "leader_epoch": -1, "end_offset": -1,
                                  "error_code": ErrorCode.NOT_LEADER_FOR_PARTITION})
                    continue
                epoch, end = replica.plog.leader_epochs.end_offset_for(
                    p["leader_epoch"], replica.plog.log_end_offset)
                parts.append({"partition": tp[1], "leader_epoch": epoch, "end_offset": end,
                              "error_code": ErrorCode.NONE})
            topics.append({"name": t["name"], "partitions": parts})
        return {"topics": topics}

    # ================================================================== follower side

    def retry_fetching(self) -> None:
        """Start the fetching that could not start before (see ``_unfetched``)."""
        for tp in list(self._unfetched):
            replica = self.replicas.get(tp)
            self._unfetched.discard(tp)
            if replica is not None and replica.leader != self.broker_id:
                self._start_fetching(replica)

    def _start_fetching(self, replica: Replica) -> None:
        address = self._address(replica.leader)
        if address is None or self._nursery is None:
            if address is None:
                log.warning("replica.leader_unknown", topic=replica.tp[0],
                            partition=replica.tp[1], leader=replica.leader)
            self._unfetched.add(replica.tp)
            return
        key = (replica.leader, *address)  # a restarted leader may listen elsewhere
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, replica.leader, *address)
            self._fetchers[key] = fetcher
            self._nursery.start_soon(fetcher.run)
        fetcher.add(replica)

    def _stop_fetching(self, replica: Replica) -> None:
        self._unfetched.discard(replica.tp)
        for fetcher in self._fetchers.values():
            fetcher.remove(replica.tp)

    def fetcher_done(self, fetcher: ReplicaFetcher) -> None:
        key = (fetcher.leader, fetcher.link.host, fetcher.link.port)
        if self._fetchers.get(key) is fetcher:
            del self._fetchers[key]


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader, in one request."""

    def __init__(self, manager: ReplicaManager, leader: int, host: str, port: int) -> None:
        self.manager = manager
        self.leader = leader
        self.link = BrokerLink(host, port, client_id=f"replica-fetcher-{manager.broker_id}",
                               timeout=FETCH_MAX_WAIT_MS / 1000 + 30,
                               security=manager.link_security)
        self.partitions: dict[TopicPartition, Replica] = {}
        self._wanted = trio.Event()
        self._fetching: trio.CancelScope | None = None
        self._refused = False  # the leader refused this broker's principal; said once
        self._version = FETCH_VERSION  # lowered for a leader that runs an older release

    def add(self, replica: Replica) -> None:
        new = replica.tp not in self.partitions
        self.partitions[replica.tp] = replica
        self._wanted.set()
        if new and self._fetching is not None:
            # a long poll in flight does not name it: ask again now rather than up to
            # FETCH_MAX_WAIT_MS later (acks=all waits on this follower after a failover)
            self._fetching.cancel()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def run(self) -> None:
        try:
            while True:
                if not self.partitions:
                    self._wanted = trio.Event()
                    with trio.move_on_after(30):
                        await self._wanted.wait()
                    if not self.partitions:
                        return  # idle: the next follower role starts a new fetcher
                try:
                    await self._truncate()
                    await self._fetch_once()
                    self._refused = False
                except ClusterAuthorizationFailedError as exc:
                    if not self._refused:  # replication stops: an operator must act
                        log.error("replica.fetch_refused", leader=self.leader,
                                  error=exc.code.name, reason=str(exc))
                    self._refused = True
                    await trio.sleep(FETCH_BACKOFF)
                except (LinkError, BrokerError) as exc:
                    if self._lowered_for(exc):
                        continue  # again at once, in the version the leader knows
                    log.debug("replica.fetch_failed", leader=self.leader, reason=str(exc))
                    if isinstance(exc, LinkError):  # the leader may come back upgraded
                        self._version = FETCH_VERSION
                    await trio.sleep(FETCH_BACKOFF)
        finally:
            self.manager.fetcher_done(self)
            await self.link.aclose()

    def _lowered_for(self, exc: Exception) -> bool:
        """A leader of an older release refuses our Fetch version (UNSUPPORTED_VERSION):
        replicate with the previous release's -- v3 (no record batches there to fetch), then
        v1, without our log start (its DeleteRecords never waited for it) -- rather than not
        at all while brokers are upgraded one at a time. Whether the version was lowered; a
        lost connection puts it back (the leader may come back upgraded)."""
        lower = [v for v in _FETCH_VERSIONS_BY_RELEASE if v < self._version]
        if not isinstance(exc, UnsupportedVersionError) or not lower:
            return False
        log.warning("replica.fetch_version_lowered", leader=self.leader, version=lower[0],
                    reason=f"the leader does not support Fetch v{self._version}")
        self._version = lower[0]
        return True

    async def _truncate(self) -> None:
        """KIP-101: ask the leader where our latest epoch ends and cut the log there."""
        todo = [r for r in self.partitions.values() if r.needs_truncation]
        if not todo:
            return
        by_topic: dict[str, list[dict[str, int]]] = {}
        for r in todo:
            by_topic.setdefault(r.tp[0], []).append({
                "partition": r.tp[1], "current_leader_epoch": r.leader_epoch,
                "leader_epoch": r.plog.leader_epochs.latest_epoch})
        answer = await self.link.request(ApiKey.OFFSETS_FOR_LEADER_EPOCH, {
            "replica_id": self.manager.broker_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        for t in answer["topics"]:
            for p in t["partitions"]:
                replica = self.partitions.get(TopicPartition(t["name"], p["partition"]))
                if replica is None or p["error_code"] != ErrorCode.NONE:
                    continue
                plog = replica.plog
                target = _truncation_point(plog, p["leader_epoch"], p["end_offset"])
                if target < plog.log_end_offset:
                    log.info("replica.truncated", topic=t["name"], partition=p["partition"],
                             to=target, log_end=plog.log_end_offset,
                             leader_epoch=replica.leader_epoch)
                    await trio.to_thread.run_sync(plog.truncate_to, target)
                replica.needs_truncation = False

    async def _fetch_once(self) -> None:
        wanted = [r for r in self.partitions.values() if not r.needs_truncation]
        if not wanted:
            return
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in wanted:
            partition = {"partition": r.tp[1], "fetch_offset": r.plog.log_end_offset,
                         "max_bytes": PARTITION_MAX_BYTES}
            if self._version >= FETCH_VERSION_WITH_LOG_START:  # the leader's low watermark
                # counts ours
                partition["log_start_offset"] = r.plog.log_start_offset
            by_topic.setdefault(r.tp[0], []).append(partition)
        body = {
            "replica_id": self.manager.broker_id, "max_wait_ms": FETCH_MAX_WAIT_MS,
            "min_bytes": 1, "max_bytes": FETCH_MAX_BYTES,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        answer: dict[str, Any] | None = None
        with trio.CancelScope() as self._fetching:
            answer = await self.link.request(ApiKey.FETCH, body, version=self._version)
        self._fetching = None
        if answer is None:  # a partition was added: its answer is still on the way, drop it
            await self.link.aclose()
            return
        for t in answer["topics"]:
            for p in t["partitions"]:
                replica = self.partitions.get(TopicPartition(t["name"], p["partition"]))
                if replica is not None:
                    self._take(replica, p)

    def _take(self, replica: Replica, p: dict[str, Any]) -> None:
        plog = replica.plog
        code = p["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if plog.log_end_offset < p["log_start_offset"]:
                # behind the leader's retention: start over at its log start (Kafka does so)
                plog.truncate_fully_and_start_at(p["log_start_offset"])
            else:
                replica.needs_truncation = True
            return
        if code != ErrorCode.NONE:
            return  # NOT_LEADER, FENCED...: the next LeaderAndIsr says what to do
        for piece, epoch in _split_by_epoch(p["records"], p["leader_epochs"]):
            plog.append_as_follower(piece, leader_epoch=epoch)
        hw = min(p["high_watermark"], plog.log_end_offset)
        if hw > plog.high_watermark:
            plog.high_watermark = hw
            self.manager._wake_fetches(*replica.tp)
        # the leader's log start moved up (DeleteRecords): follow it (Kafka does so)
        leader_start = min(p["log_start_offset"], plog.log_end_offset)
        if leader_start > plog.log_start_offset:
            plog.advance_log_start(leader_start)


def _named(starts: dict[int, int]) -> str:
    """``{broker: log start}`` for a message: "2 (at 0), 3 (not reported)"."""
    return ", ".join(f"{b} (at {s})" if s >= 0 else f"{b} (not reported)"
                     for b, s in sorted(starts.items()))


def _truncation_point(plog: PartitionLog, leader_epoch: int, leader_end: int) -> int:
    """Where a follower cuts its log after OffsetsForLeaderEpoch (KIP-101, with KIP-279's
    refinement): at the leader's end of the largest epoch both know -- or earlier, where this
    follower's own copy of that epoch ends. With no common epoch (the leader answers -1), the
    high watermark is all that is known to be shared."""
    if leader_end < 0:
        return min(plog.high_watermark, plog.log_end_offset)
    target = min(leader_end, plog.log_end_offset)
    mine_epoch, mine_end = plog.end_offset_for_epoch(leader_epoch)
    if mine_epoch == leader_epoch and mine_end >= 0:
        target = min(target, mine_end)
    return target


def _split_by_epoch(data: bytes, epochs: list[dict[str, int]]
                    ) -> list[tuple[memoryview, int | None]]:
    """Cut a fetched chunk where the leader's epochs begin, so the follower records each epoch
    at the offset it began at (message format v1 carries no epoch of its own). An entry holds
    offsets up to its own (a compressed wrapper's is its last), so an epoch starting at S
    begins at the first entry whose offset is S or more. A trailing partial entry is left for
    ``append_as_follower`` to drop."""
    view = memoryview(data)
    if not epochs:
        return [(view, None)] if data else []
    starts = [(e["start_offset"], e["epoch"]) for e in epochs]
    pieces: list[tuple[memoryview, int | None]] = []
    piece_start = 0
    position = 0
    current = starts[0][1]
    upcoming = 1
    while upcoming < len(starts):
        size = entry_size_at(data, position)
        if size is None or position + size > len(data):
            break
        offset = _OFFSET.unpack_from(data, position)[0]
        while upcoming < len(starts) and offset >= starts[upcoming][0]:
            if position > piece_start:
                pieces.append((view[piece_start:position], current))
                piece_start = position
            current = starts[upcoming][1]
            upcoming += 1
        position += size
    if piece_start < len(data):
        pieces.append((view[piece_start:], current))
    return pieces

