"""``Consumer``: reads partitions with ``poll`` -- single-threaded, no background work.

Separate pieces, so each has one job:

- ``Subscription`` (client/subscription.py): topics or a pattern through a group, or manual
  ``assign`` -- never both (seed: SubscriptionNotValid);
- ``GroupMembership`` (client/group_membership.py): find the coordinator, join, heartbeat -- the
  seed's ``coordinate()``; ``GroupCommits`` (client/group_commits.py): commits and committed
  offsets;
- ``FetchPositions`` (client/positions.py): which partitions, and the position in each;
- ``Fetcher`` (client/fetcher.py): Fetch and ListOffsets requests, decoding, buffering;
- ``poll`` (here): the loop that drives them over non-blocking sockets (``selectors``), and the
  consumer's own part of a rebalance: stop fetching, commit (auto-commit), tell the listener,
  rejoin, start the new partitions from their committed offsets, tell the listener.

Heartbeats only go out from ``poll()`` (as the seed designs it): a consumer that does not call
``poll()`` within ``session_timeout_ms`` is removed from its group, and its next commit fails
with ``CommitFailedError``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar, Unpack

from client.coordinator_lookup import CoordinatorLookup
from client.errors import (
    ClientTimeoutError,
    ConfigError,
    IllegalStateError,
    NoOffsetForPartitionError,
    SubscriptionNotValidError,
)
from client.fetcher import FetchConfig, Fetcher
from client.future import Future
from client.group_commits import GroupCommits, Offsets
from client.group_membership import GroupConfig, GroupMembership
from client.group_state import ConsumerState
from client.message_sets import FetchedSet
from client.metadata import MetadataTracker
from client.network import NetworkClient
from client.offsets import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets
from client.positions import FetchPositions, OffsetReset
from client.records import ConsumerRecord, TopicPartition
from client.security import SecurityConfig, SecurityOptions
from client.subscription import ConsumerRebalanceListener, Subscription, SubscriptionKind
from client.throttle import ThrottleStats
from protocol.errors import OdradekError

log = logging.getLogger("odradek.consumer")

#: ``commit_async`` callbacks get the offsets and None, or the error
CommitCallback = Callable[[Offsets, BaseException | None], None]
_Taken = TypeVar("_Taken", ConsumerRecord, FetchedSet)
#: states in which the partitions owned are fetched, and those in which new ones are taken (not
#: while an incremental member's JoinGroup, naming what it owns, is out)
_TAKING = frozenset({ConsumerState.PART_OF_GROUP, ConsumerState.REDISCOVER_COORDINATOR})
_FETCHING = _TAKING | {ConsumerState.REJOINING}


def _check_at_least(*settings: tuple[str, int, int]) -> None:
    """(name, value, lowest allowed) of each setting; a ConfigError naming the first too low."""
    for name, value, low in settings:
        if value < low:
            raise ConfigError(f"{name}={value} is invalid; it must be at least {low}")


def _fetch_config(*, min_bytes: int, max_wait_ms: int, max_bytes: int, partition_bytes: int,
                  max_partition_bytes: int, check_crcs: bool, retry_backoff_ms: int,
                  message_sets: bool) -> FetchConfig:
    """The fetcher's settings, their bounds checked first under the Consumer's own names."""
    _check_at_least(
        ("fetch_min_bytes", min_bytes, 0),
        ("fetch_max_wait_ms", max_wait_ms, 0),
        ("fetch_max_bytes", max_bytes, 1),
        ("partition_fetch_bytes", partition_bytes, 1),
        ("max_partition_fetch_bytes", max_partition_bytes, partition_bytes),
    )
    return FetchConfig(min_bytes=min_bytes, max_wait_ms=max_wait_ms, max_bytes=max_bytes,
                       partition_bytes=partition_bytes, max_partition_bytes=max_partition_bytes,
                       check_crcs=check_crcs, retry_backoff_ms=retry_backoff_ms,
                       message_sets=message_sets)


def _membership(network: NetworkClient, config: GroupConfig
                ) -> tuple[GroupMembership, GroupCommits]:
    """A group member's membership and commits, sharing one coordinator lookup."""
    lookup = CoordinatorLookup(network, config.group_id, retry_backoff_ms=config.retry_backoff_ms)
    group = GroupMembership(lookup, config)
    return group, GroupCommits(lookup, group, retry_backoff_ms=config.retry_backoff_ms)


class Consumer:
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "127.0.0.1:9092",
        *,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        client_id: str = "odradek-consumer",
        auto_offset_reset: str | OffsetReset = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        rebalance_timeout_ms: int | None = None,
        partition_assignment_strategy: str = "range",
        rebalance_protocol: str = "incremental",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        partition_fetch_bytes: int = 1024 * 1024,
        max_partition_fetch_bytes: int = 16 * 1024 * 1024,
        max_poll_records: int = 500,
        check_crcs: bool = True,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        default_api_timeout_ms: int = 60_000,
        message_sets: bool = False,
        **security: Unpack[SecurityOptions],
    ) -> None:
        fetch_config = _fetch_config(
            min_bytes=fetch_min_bytes, max_wait_ms=fetch_max_wait_ms, max_bytes=fetch_max_bytes,
            partition_bytes=partition_fetch_bytes, max_partition_bytes=max_partition_fetch_bytes,
            check_crcs=check_crcs, retry_backoff_ms=retry_backoff_ms, message_sets=message_sets)
        _check_at_least(
            ("max_poll_records", max_poll_records, 1),
            ("request_timeout_ms", request_timeout_ms, 1),
            ("retry_backoff_ms", retry_backoff_ms, 0),
            ("default_api_timeout_ms", default_api_timeout_ms, 0),
            ("auto_commit_interval_ms", auto_commit_interval_ms, 1),
        )
        if group_instance_id is not None and group_id is None:
            raise ConfigError("group_instance_id needs a group_id: it names a member of a group")
        config = None if group_id is None else GroupConfig(
            group_id=group_id, session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            assignment_strategy=partition_assignment_strategy, retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms, group_instance_id=group_instance_id,
            rebalance_protocol=rebalance_protocol)
        self._max_poll_records = max_poll_records
        self._backoff = retry_backoff_ms / 1000
        self._api_timeout = default_api_timeout_ms / 1000
        self._network = NetworkClient(
            bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            security=SecurityConfig(**security),
        )
        self._metadata = MetadataTracker(
            self._network, allow_auto_topic_creation=False,
            metadata_max_age_ms=metadata_max_age_ms, retry_backoff_ms=retry_backoff_ms)
        self._positions = FetchPositions(OffsetReset.parse(auto_offset_reset))
        self._fetcher = Fetcher(self._metadata, self._positions, fetch_config)
        self._subscription = Subscription()
        self._group: GroupMembership | None = None
        self._commits: GroupCommits | None = None
        if config is not None:
            self._group, self._commits = _membership(self._network, config)
        self._auto_commit = enable_auto_commit and config is not None
        self._auto_commit_interval = auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._auto_commit_future: Future[None] | None = None
        self._owned: list[TopicPartition] = []  # told to the listener as assigned
        if self._group is not None:
            self._group.owned = lambda: self._owned
        self._revoke_commit: Future[None] | None = None
        #: incremental: the partitions an answer took away, told to the listener once their
        #: commit is answered
        self._letting_go: list[TopicPartition] | None = None
        self._incoming: tuple[int, list[TopicPartition]] | None = None  # generation, partitions
        self._incoming_offsets: Future[Offsets] | None = None
        self._incoming_retry_at = 0.0
        self._pattern_since = 0  # metadata updates seen before the pattern subscription
        self._closed = False

    # ----------------------------------------------------------------- subscription / assignment

    def subscribe(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Read ``topics`` -- or every topic whose whole name matches ``pattern``, looked up in
        metadata every ``metadata_max_age_ms`` -- as a member of ``group_id``: the group's
        coordinator gives each member its share of the partitions, and ``poll()`` rejoins when
        the subscription or the group changes. ``listener`` is told of partitions revoked and
        assigned. Mixing with ``assign`` raises ``SubscriptionNotValidError``."""
        self._check_open()
        if self._group is None:
            raise SubscriptionNotValidError(
                "subscribe() needs a group: Consumer(..., group_id=...); without one, use assign()"
            )
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or pattern=, not both or neither")
        if pattern is not None:
            self._subscription.subscribe_pattern(pattern, listener)
            self._metadata.track_all_topics()
            self._pattern_since = self._metadata.updates
        else:
            names = [topics] if isinstance(topics, str) else list(topics or ())
            self._subscription.subscribe_topics(names, listener)
            self._metadata.set_topics(names)
            self._group.set_subscription(names)

    def unsubscribe(self) -> None:
        """Stop reading: leave the group (committing first with auto-commit), or drop the
        manual assignment."""
        self._check_open()
        self._leave_group(self._api_timeout, "unsubscribe()")
        self._subscription.unsubscribe()
        self._positions.assign([])
        self._metadata.set_topics(())

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replacing any earlier assignment), with no group
        membership. Partitions kept from the earlier assignment keep their positions; new ones
        start per ``auto_offset_reset`` unless you ``seek`` them first. With a ``group_id``,
        commits go to the group with generation -1 (allowed while it has no members)."""
        self._check_open()
        self._subscription.assign_manually()
        tps = [TopicPartition(*tp) for tp in partitions]
        self._positions.assign(tps)
        self._metadata.set_topics({tp.topic for tp in tps})

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (eager rebalancing: none while a rebalance
        is under way; incremental: those it keeps stay)."""
        return set(self._positions.assigned())

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those matching it now)."""
        return set(self._subscription.topics)

    @property
    def state(self) -> ConsumerState:
        """The seed's consumer state (docs/state-machines/consumer.md); Down without a group."""
        return ConsumerState.DOWN if self._group is None else self._group.state

    @property
    def fetch_throttle_stats(self) -> ThrottleStats:
        """How long brokers held fetch responses back for this consumer's quota."""
        return self._fetcher.throttle_stats

    @property
    def member_id(self) -> str:
        return "" if self._group is None else self._group.member_id

    @property
    def generation(self) -> int:
        return -1 if self._group is None else self._group.generation

    def partitions_for(self, topic: str, timeout_ms: int | None = None) -> list[int]:
        """The topic's partitions; raises ``UnknownTopicOrPartitionError`` if it does not
        exist (waiting up to ``timeout_ms``, default ``default_api_timeout_ms``)."""
        self._check_open()
        self._metadata.wait_for_topic(topic, self._timeout(timeout_ms))
        return sorted(self._metadata.current.topics[topic].partitions)

    # -------------------------------------------------------------------------- positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next ``poll`` returns ``partition``'s messages from ``offset`` on."""
        self._positions.seek(TopicPartition(*partition), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Start from the earliest offset still stored (all assigned partitions if none given).
        Looked up lazily, at the next ``poll`` or ``position``."""
        self._request_reset(partitions, OffsetReset.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Start after the last message (only new messages are returned)."""
        self._request_reset(partitions, OffsetReset.LATEST)

    def _request_reset(self, partitions: Sequence[TopicPartition], reset: OffsetReset) -> None:
        for tp in partitions or self._positions.assigned():
            self._positions.request_reset(TopicPartition(*tp), reset)

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next message ``poll`` returns for ``partition``, looking it up
        first if a reset is pending."""
        self._check_open()
        tp = TopicPartition(*partition)
        deadline = time.monotonic() + self._timeout(timeout_ms)
        while (position := self._positions.position(tp)) is None:
            self._fetcher.raise_error()
            self._check_positions()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ClientTimeoutError(f"position of {tp} not found within the timeout")
            self._metadata.poll()
            self._fetcher.send_resets()
            self._network.poll(min(remaining, self._backoff))
        return position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before any fetch)."""
        hw = self._positions.state(TopicPartition(*partition)).high_watermark
        return None if hw < 0 else hw

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The earliest stored offset of each partition (asks the leaders now)."""
        return self._list_offsets(partitions, EARLIEST, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The offset the next message appended to each partition will get."""
        return self._list_offsets(partitions, LATEST, timeout_ms)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest message whose timestamp (ms) is at least the given
        one: its offset and timestamp, or None when no message is that recent."""
        self._check_open()
        specs = {TopicPartition(*tp): when for tp, when in timestamps.items()}
        found = list_offsets(self._metadata, specs, self._timeout(timeout_ms))
        return {tp: None if answer.offset < 0 else answer for tp, answer in found.items()}

    def _list_offsets(
        self, partitions: Iterable[TopicPartition], when: int, timeout_ms: int | None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        specs = {TopicPartition(*tp): when for tp in partitions}
        found = list_offsets(self._metadata, specs, self._timeout(timeout_ms))
        return {tp: answer.offset for tp, answer in found.items()}

    # ------------------------------------------------------------------------------- poll

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``); waits up to ``timeout_ms`` for some, else returns ``[]`` -- also
        while a rebalance or a coordinator move is under way. With a group it first does the
        group's work (the seed's ``coordinate()``): find the coordinator, join, heartbeat when
        due, rebalance, auto-commit. Errors met while fetching (an out-of-range offset with
        ``auto_offset_reset=none``, a message too large, a corrupt message) or joining (an
        unknown assignment strategy, ...) are raised here. ``max_records=0`` does only the
        group's work and the fetching, for the whole timeout: a caller that cannot take more
        yet keeps its membership (heartbeats) and buffers at most a chunk per partition."""
        if self._fetcher.message_sets:
            raise IllegalStateError("this consumer hands out message sets: call poll_sets()")
        limit = self._max_poll_records if max_records is None else max_records
        return self._poll(self._fetcher.take, limit, timeout_ms)

    def poll_sets(self, timeout_ms: float = 0, max_sets: int | None = None) -> list[FetchedSet]:
        """``poll`` for a consumer made with ``message_sets=True``: up to ``max_sets`` stored
        message sets, each the bytes of one fetched chunk of one partition as the broker
        stored them -- compressed wrappers unopened -- for ``Producer.send_set`` to append
        elsewhere unchanged (a mirror). Positions move past each set handed out. ``max_sets``
        defaults to 100; 0 works as ``poll``'s ``max_records=0``."""
        if not self._fetcher.message_sets:
            raise IllegalStateError(
                "poll_sets() needs a consumer made with message_sets=True; this one decodes "
                "records: call poll()"
            )
        return self._poll(self._fetcher.take_sets, 100 if max_sets is None else max_sets,
                          timeout_ms)

    def _poll(self, take: Callable[[int], list[_Taken]], limit: int, timeout_ms: float
              ) -> list[_Taken]:
        self._check_open()
        if self._subscription.kind is SubscriptionKind.NONE:
            raise IllegalStateError(
                "the consumer reads nothing: subscribe() or assign() first "
                "(seed: SubscriptionIsEmpty)"
            )
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        timed_out = False
        # What has arrived is read first, without waiting: a call that finds records buffered
        # returns them below without touching the sockets, and a consumer working through a
        # backlog would otherwise leave the group's answers (a JoinGroup's, a heartbeat's,
        # FindCoordinator's) unread until the buffer ran dry -- past the round's rebalance
        # timeout, so the coordinator dropped the member it had just answered.
        self._network.poll(0)
        while True:
            fetching = self._coordinate()
            if fetching:
                fetcher.raise_error()
                self._check_positions()
                taken = take(limit)
                if taken:
                    fetcher.send_fetches()  # the next chunk travels while the caller works
                    return taken
            if timed_out:
                return []
            self._metadata.poll()
            if fetching:
                fetcher.send_resets()
                fetcher.send_fetches()
            remaining = deadline - time.monotonic()
            timed_out = remaining <= 0  # even poll(0) reads what has arrived, once
            self._network.poll(min(max(remaining, 0.0), self._backoff))

    def _coordinate(self) -> bool:
        """The group's share of one turn of ``poll``; whether fetching may go on (seed: not in
        Stopped consumption, and not before the new partitions' positions are known)."""
        group = self._group
        if group is None:
            return True
        if not self._subscription.uses_group:
            self._maybe_auto_commit(as_member=False)
            return True
        if self._subscription.kind is SubscriptionKind.PATTERN:
            self._match_pattern()
        group.poll()
        if group.revocation_pending:
            self._revoke(group)
        assignment = group.take_assignment()
        if assignment is not None:
            self._reconcile(group, assignment)
        if self._incoming is not None:
            self._take_incoming(group)
        fetching = group.state in _FETCHING
        if group.state in _TAKING and not group.revocation_pending:
            self._maybe_auto_commit(as_member=True)
        return fetching

    def _reconcile(self, group: GroupMembership, assignment: list[TopicPartition]) -> None:
        """A JoinGroup's answer against what is owned: the partitions it leaves out are let go
        of (an incremental member still owns some; an eager one owns none by now), the new
        ones taken once their committed offsets are known, and the rest never stop."""
        given = set(assignment)
        lost = [tp for tp in self._owned if tp not in given]
        if lost:
            self._let_go(group, lost)
        owned = set(self._owned)
        self._incoming = (group.generation, [tp for tp in assignment if tp not in owned])
        self._incoming_offsets = None
        self._incoming_retry_at = 0.0

    def _let_go(self, group: GroupMembership, lost: list[TopicPartition]) -> None:
        """Incremental: stop fetching ``lost`` now and commit what was consumed of them; the
        listener is told, and the member rejoins, once the commit is answered (``_revoke``)."""
        offsets = {tp: o for tp in lost if (o := self._positions.position(tp)) is not None}
        gone = set(lost)
        self._owned = [tp for tp in self._owned if tp not in gone]
        self._positions.assign(self._owned)
        if self._auto_commit and offsets and self._commits is not None and group.is_member:
            self._revoke_commit = self._commits.send_commit(offsets, as_member=True)
        self._letting_go = lost
        group.revocation_pending = True

    def _match_pattern(self) -> None:
        """Seed "Wildcard Subscription": the topics matching the pattern, from metadata of all
        topics; a changed set is a new subscription, so the member rejoins."""
        assert self._group is not None
        if self._metadata.updates <= self._pattern_since:
            return  # join once the topics are known, not with none and again with them
        topics = [n for n, t in self._metadata.current.topics.items() if not t.internal]
        if self._subscription.match(topics) or not self._group.subscribed:
            self._group.set_subscription(self._subscription.topics)

    def _revoke(self, group: GroupMembership) -> None:
        """Stopped consumption: commit what was consumed (auto-commit), tell the listener,
        forget the partitions; then the JoinGroup may go. Waits for the commit's answer across
        turns of ``poll`` rather than blocking. (Incremental, after ``_let_go``: the same for
        the partitions let go of, and the member rejoins.)"""
        if self._letting_go is not None:
            if self._revoke_commit is not None and not self._wait_revoke_commit(group):
                return
            lost, self._letting_go = self._letting_go, None
            self._subscription.listener.on_partitions_revoked(lost)
            if group.state is not ConsumerState.STOPPED_CONSUMPTION:
                group.revoked()
                group.rejoin(f"let go of {len(lost)} partitions")
                return
            # it lost its place meanwhile: every other partition goes too
        if self._revoke_commit is None and self._auto_commit and group.is_member:
            offsets = self._consumed_offsets()
            if offsets and self._commits is not None:
                self._revoke_commit = self._commits.send_commit(offsets, as_member=True)
        if self._revoke_commit is not None and not self._wait_revoke_commit(group):
            return
        revoked, self._owned = self._owned, []
        self._positions.assign([])
        self._incoming = self._incoming_offsets = None
        group.revoked()
        self._subscription.listener.on_partitions_revoked(revoked)

    def _wait_revoke_commit(self, group: GroupMembership) -> bool:
        """Whether the revocation's commit is answered (a failure is logged: the partitions
        are let go of all the same)."""
        assert self._revoke_commit is not None
        if not self._revoke_commit.done():
            return False
        error = self._revoke_commit.exception()
        if error is not None:
            log.info("revocation_commit_failed group=%s error=%s", group.group_id, error)
        self._revoke_commit = None
        return True

    def _take_incoming(self, group: GroupMembership) -> None:
        """The new partitions start at their committed offsets (else per
        ``auto_offset_reset``); then the listener is told."""
        assert self._incoming is not None and self._commits is not None
        generation, partitions = self._incoming
        if generation != group.generation or group.state not in _TAKING:
            return  # wait: a rebalance or a coordinator move is under way
        if partitions and self._incoming_offsets is None:
            if time.monotonic() < self._incoming_retry_at:
                return
            self._incoming_offsets = self._commits.send_fetch(partitions)
        committed: Offsets = {}
        future = self._incoming_offsets
        if future is not None:
            if not future.done():
                return
            self._incoming_offsets = None
            error = future.exception()
            if error is not None:
                if not getattr(error, "retriable", False):
                    raise error
                self._incoming_retry_at = time.monotonic() + self._backoff
                return
            committed = future.value
        self._incoming = None
        self._owned += partitions
        self._positions.assign(self._owned)
        for tp, offset in committed.items():
            if offset >= 0 and self._positions.is_assigned(tp):
                self._positions.seek(tp, offset)
        self._subscription.listener.on_partitions_assigned(list(partitions))

    # ----------------------------------------------------------------------------- commits

    def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit the positions of every assigned partition -- or ``offsets``, each the offset
        of the next message to read -- and wait until the coordinator stored them. Retriable
        failures are retried until the timeout (default ``default_api_timeout_ms``). Raises
        ``CommitFailedError`` when the group rebalanced without this member."""
        self._check_open()
        commits = self._require_group("commit()")
        wanted = self._offsets_argument(offsets)
        if not wanted:
            return
        deadline = time.monotonic() + self._timeout(timeout_ms)
        commits.commit_sync(wanted, as_member=self._subscription.uses_group, deadline=deadline)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future[None]:
        """Send a commit and return at once; ``callback(offsets, error_or_None)`` runs inside
        a later ``poll`` (or whatever drives I/O) when the answer comes. Not retried."""
        self._check_open()
        commits = self._require_group("commit_async()")
        wanted = self._offsets_argument(offsets)
        if wanted:
            future = commits.send_commit(wanted, as_member=self._subscription.uses_group)
        else:
            future = Future(self._network.poll)
            future.succeed(None)
        if callback is not None:
            future.add_done_callback(lambda f: callback(wanted, f.exception()))
        return future

    def committed(self, partition: TopicPartition, timeout_ms: int | None = None) -> int | None:
        """The group's committed offset of ``partition`` (asking the coordinator), or None."""
        self._check_open()
        commits = self._require_group("committed()")
        tp = TopicPartition(*partition)
        found = commits.fetch_sync([tp], time.monotonic() + self._timeout(timeout_ms))
        offset = found.get(tp, -1)
        return None if offset < 0 else offset

    def _maybe_auto_commit(self, *, as_member: bool) -> None:
        if not self._auto_commit or self._commits is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        if self._auto_commit_future is not None and not self._auto_commit_future.done():
            return
        if not self._commits.coordinator_known():
            return  # looked up meanwhile: commit as soon as it is known
        self._next_auto_commit = now + self._auto_commit_interval
        offsets = {
            tp: offset
            for tp, offset in self._consumed_offsets().items()
            if self._commits.committed.get(tp) != offset
        }
        if offsets:
            self._auto_commit_future = self._commits.send_commit(offsets, as_member=as_member)

    def _consumed_offsets(self) -> Offsets:
        """The position of every assigned partition that has one: what has been consumed."""
        positions = self._positions
        return {
            tp: position
            for tp in positions.assigned()
            if (position := positions.position(tp)) is not None
        }

    def _offsets_argument(self, offsets: Mapping[TopicPartition, int] | None) -> Offsets:
        if offsets is None:
            return self._consumed_offsets()
        wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        negative = [f"{tp}={o}" for tp, o in wanted.items() if o < 0]
        if negative:
            raise ValueError(f"cannot commit negative offsets: {', '.join(negative)}")
        return wanted

    def _require_group(self, what: str) -> GroupCommits:
        if self._commits is None:
            raise IllegalStateError(f"{what} needs a group: Consumer(..., group_id=...)")
        return self._commits

    def _check_positions(self) -> None:
        if self._positions.default_reset is not OffsetReset.NONE:
            return
        missing = [
            tp
            for tp in self._positions.without_position()
            if self._positions.state(tp).reset is None
        ]
        if missing:
            raise NoOffsetForPartitionError(
                f"{', '.join(map(str, missing))}: no position and auto_offset_reset is none; "
                "seek first"
            )

    # ------------------------------------------------------------------------------ close

    def close(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit), tell the listener the partitions are revoked, leave the
        group -- so the others rebalance at once rather than after a session timeout -- and
        close the sockets. Waits at most ``timeout_ms`` (default 30 s) for the broker."""
        if self._closed:
            return
        timeout = 30.0 if timeout_ms is None else timeout_ms / 1000
        try:
            self._leave_group(timeout, "close()")
        finally:
            self._closed = True
            self._network.close()

    def _leave_group(self, timeout: float, reason: str) -> None:
        group, commits = self._group, self._commits
        if group is None or commits is None:
            return
        deadline = time.monotonic() + timeout
        uses_group = self._subscription.uses_group
        if self._auto_commit and (group.is_member or not uses_group):
            offsets = self._consumed_offsets()
            if offsets:
                try:
                    commits.commit_sync(offsets, as_member=uses_group, deadline=deadline)
                except OdradekError as exc:
                    log.info("final_commit_failed group=%s error=%s", group.group_id, exc)
        if not uses_group:
            return
        revoked, self._owned = (self._letting_go or []) + self._owned, []
        self._letting_go = None
        self._positions.assign([])
        self._incoming = self._incoming_offsets = None
        try:
            if revoked:
                self._subscription.listener.on_partitions_revoked(revoked)
        finally:
            group.leave(deadline - time.monotonic(), reason)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("consumer is closed")

    def _timeout(self, timeout_ms: int | None) -> float:
        return self._api_timeout if timeout_ms is None else timeout_ms / 1000
