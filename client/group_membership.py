"""Group membership, driven from ``Consumer.poll``: the seed's ``coordinate()``.

Find the coordinator, join (always resending the member id once there is one), heartbeat every
``heartbeat_interval_ms``, rejoin when told to, leave on close. Nothing runs between calls: the
consumer calls ``poll()`` on each turn of its loop, which sends whatever is due; answers are
handled by future callbacks inside the network poll. Every move goes through the consumer's
state table (``client.group_state.transition``) and every change of state is logged to
``odradek.consumer``, its fields also as the record's ``consumer_state`` attribute (a dict).

The consumer's own part of a rebalance -- commit, tell the listener, take the new partitions'
committed offsets -- happens in between, through two hand-overs:

- ``revocation_pending``: the member was told to rejoin while it owned partitions (Part of a
  group -> Stopped consumption), or -- incremental -- its answer left out partitions it owned.
  No JoinGroup goes out until the consumer calls ``revoked()``.
- ``take_assignment()``: a JoinGroup succeeded; the partitions to own, once.

An incremental member (``rebalance_protocol="incremental"``, the default) rejoins without
stopping (Rejoining while consuming): its JoinGroup names what it owns (``owned_partitions``,
read from the consumer through ``owned``), and the answer's difference from that is what it
lets go of and what it gains.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from client.coordinator_lookup import CoordinatorLookup
from client.errors import ConfigError
from client.future import Future
from client.group_offsets import NO_GENERATION, NO_MEMBER
from client.group_state import (
    CONSUMER_MACHINE,
    ConsumerEvent,
    ConsumerState,
    event_for,
    transition,
)
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, OdradekError, error_for
from protocol.partitions import by_topic

log = logging.getLogger("odradek.consumer")

_S = ConsumerState
_E = ConsumerEvent
_JOINING = frozenset({_S.DISCOVER_COORDINATOR, _S.STOPPED_CONSUMPTION, _S.REJOINING})
_LOOKING_UP = frozenset({_S.DISCOVER_COORDINATOR, _S.REDISCOVER_COORDINATOR, _S.REJOINING})
#: JoinGroup v3's rebalance protocols
EAGER, INCREMENTAL = "eager", "incremental"
_JOIN_SLACK = 5.0  # seconds a JoinGroup may take beyond the rebalance timeout (as Kafka)


@dataclass(frozen=True, kw_only=True)
class GroupConfig:
    """Membership settings, named as Kafka's consumer names them."""

    group_id: str
    session_timeout_ms: int = 10_000  # session.timeout.ms
    heartbeat_interval_ms: int = 3_000  # heartbeat.interval.ms
    #: how long the coordinator waits for members to rejoin (Kafka: max.poll.interval.ms);
    #: None: the session timeout
    rebalance_timeout_ms: int | None = None
    assignment_strategy: str = "range"  # partition.assignment.strategy (seed 001)
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30_000
    #: KIP-345's static membership (group.instance.id): a restart within the session timeout
    #: takes this member's place and partitions back with no rebalance
    group_instance_id: str | None = None
    #: "incremental": keep fetching the partitions kept through a rebalance, let go only of
    #: those that move (KIP-429's cooperative rebalancing, decided by the broker); "eager":
    #: the seed's stop-everything rebalance
    rebalance_protocol: str = INCREMENTAL

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ConfigError("group_instance_id must not be empty (None: a dynamic member)")
        if self.rebalance_protocol not in (EAGER, INCREMENTAL):
            raise ConfigError(f"rebalance_protocol={self.rebalance_protocol!r} must be "
                              f"{INCREMENTAL!r} or {EAGER!r}")
        if self.session_timeout_ms < 1:
            raise ConfigError(f"session_timeout_ms={self.session_timeout_ms} must be at least 1")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat_interval_ms={self.heartbeat_interval_ms} must be above 0 and below "
                f"session_timeout_ms={self.session_timeout_ms} (a third of it is usual)"
            )
        if self.rebalance_timeout_ms is not None and self.rebalance_timeout_ms < 1:
            raise ConfigError(f"rebalance_timeout_ms={self.rebalance_timeout_ms} must be >= 1")

    @property
    def rebalance_timeout(self) -> int:
        return self.rebalance_timeout_ms or self.session_timeout_ms


class GroupMembership:
    def __init__(
        self,
        lookup: CoordinatorLookup,
        config: GroupConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._network = lookup.network
        self._lookup = lookup
        self.config = config
        self._clock = clock
        self.state: ConsumerState = CONSUMER_MACHINE.initial
        self.member_id = NO_MEMBER
        self.generation = NO_GENERATION
        self.revocation_pending = False
        #: incremental: what the consumer owns now (named in each JoinGroup)
        self.owned: Callable[[], Iterable[TopicPartition]] = tuple
        self._subscribed = False
        self._subscription: frozenset[str] = frozenset()
        self._joined_with: frozenset[str] | None = None
        self._assignment: list[TopicPartition] | None = None
        self._rejoin_reason: str | None = None
        self._join: Future[dict[str, Any]] | None = None
        self._heartbeat: Future[dict[str, Any]] | None = None
        self._retry_at = 0.0
        self._next_heartbeat = 0.0
        self._errors: deque[BaseException] = deque()
        self._backoff = config.retry_backoff_ms / 1000
        lookup.on_answer = self._on_lookup
        lookup.on_lost = self._coordinator_connection_closed

    @property
    def group_id(self) -> str:
        return self.config.group_id

    @property
    def incremental(self) -> bool:
        return self.config.rebalance_protocol == INCREMENTAL

    # ------------------------------------------------------------------------ the consumer

    @property
    def subscribed(self) -> bool:
        return self._subscribed

    def set_subscription(self, topics: Iterable[str]) -> None:
        """The topics to join with; a member whose last join named others rejoins."""
        self._subscribed = True
        self._subscription = frozenset(topics)
        if self.state is not _S.DOWN and self._joined_with not in (None, self._subscription):
            self._rejoin_reason = "subscription changed"

    def poll(self) -> None:
        """Send what is due: FindCoordinator, JoinGroup, Heartbeat. Raises an error a
        JoinGroup met that retrying cannot fix (e.g. INCONSISTENT_GROUP_PROTOCOL), once."""
        if self._errors:
            raise self._errors.popleft()
        if self.state is _S.DOWN:
            if not self._subscribed:
                return
            self._move(_E.START, "poll() with a subscription")
        now = self._clock()
        if self.state in _JOINING:
            if self._lookup.node is None:
                if self.state is _S.STOPPED_CONSUMPTION:
                    self._move(_E.COORDINATOR_LOST, "no coordinator to rejoin")
                self._lookup.poll()
            elif self._join is None and not self.revocation_pending and now >= self._retry_at:
                self._send_join()
        elif self.state is _S.PART_OF_GROUP:
            if self._rejoin_reason is not None:
                self._rebalance(self._rejoin_reason)
            elif self._heartbeat is None and now >= self._next_heartbeat:
                self._send_heartbeat(now)
        elif self.state is _S.REDISCOVER_COORDINATOR:
            self._lookup.poll()

    def take_assignment(self) -> list[TopicPartition] | None:
        """The partitions the last successful JoinGroup gave, once."""
        assignment, self._assignment = self._assignment, None
        return assignment

    def revoked(self) -> None:
        """The consumer has committed and told its listener: the JoinGroup may go."""
        self.revocation_pending = False

    def rejoin(self, reason: str) -> None:
        """Rejoin at the next ``poll`` (incremental: the member let go of partitions, and the
        coordinator's next round waits for it)."""
        self._rejoin_reason = reason

    def request_rejoin(self, code: ErrorCode, reason: str) -> None:
        """An answer (e.g. to an OffsetCommit) said the member must rejoin."""
        self._forget(code)
        if self.state is _S.PART_OF_GROUP:
            self._rebalance(reason, keep=code is ErrorCode.REBALANCE_IN_PROGRESS)

    def _coordinator_connection_closed(self, reason: str) -> None:
        if self.state is _S.DOWN:
            self._lookup.mark_unknown()
        else:
            self.coordinator_lost(reason)

    def coordinator_lost(self, reason: str) -> None:
        """NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a closed connection, no answer."""
        self._lookup.mark_unknown()
        self._join = self._heartbeat = None  # their answers, if any come, are ignored
        if self.state is not _S.DOWN:
            self._move(_E.COORDINATOR_LOST, reason)

    @property
    def is_member(self) -> bool:
        """Whether commits may name this member's id and generation."""
        return bool(self.member_id) and self.generation >= 0

    def leave(self, timeout: float, reason: str) -> None:
        """LeaveGroup (waiting up to ``timeout`` seconds for the answer), then Down: the others
        rebalance at once instead of after a session timeout."""
        if self.state is _S.DOWN:
            self._subscribed = False
            return
        node = self._lookup.node
        if self.member_id and node is not None:
            # a static member's leave keeps its place until its session times out (KIP-345)
            future = self._network.send(
                node, ApiKey.LEAVE_GROUP,
                {"group_id": self.group_id, "member_id": self.member_id,
                 "group_instance_id": self.config.group_instance_id}, api_version=1,
            )
            try:
                future.result(max(timeout, 0.001))
            except OdradekError as exc:  # best effort: the session timeout still works
                log.info("leave_group_failed group=%s member=%s error=%s",
                         self.group_id, self.member_id, exc)
        self._move(_E.CLOSE, reason)
        self.member_id, self.generation = NO_MEMBER, NO_GENERATION
        self._subscribed = False
        self._joined_with = self._assignment = self._rejoin_reason = None
        self._join = self._heartbeat = None
        self.revocation_pending = False

    # --------------------------------------------------------------------------- requests

    def _send_join(self) -> None:
        node = self._lookup.node
        assert node is not None
        config = self.config
        topics = self._subscription
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": config.session_timeout_ms,
            "rebalance_timeout_ms": config.rebalance_timeout,
            "topics": sorted(topics),
            "member_id": self.member_id,
            "assignment_strategy": config.assignment_strategy,
            "protocol_type": "",
            "protocols": [],
            "group_instance_id": config.group_instance_id,
            "rebalance_protocol": config.rebalance_protocol,
            "owned_partitions": [{"topic": t, "partitions": ps}
                                 for t, ps in by_topic(self.owned()).items()]
                                if self.incremental else [],
        }
        self._rejoin_reason = None  # this join carries the subscription as it is now
        timeout = max(config.request_timeout_ms, config.rebalance_timeout) / 1000 + _JOIN_SLACK
        future = self._network.send(node, ApiKey.JOIN_GROUP, body, timeout=timeout,
                                    api_version=3)
        self._join = future
        future.add_done_callback(partial(self._on_join, topics))

    def _on_join(self, topics: frozenset[str], future: Future[dict[str, Any]]) -> None:
        if future is not self._join:
            return  # left meanwhile
        self._join = None
        if self.state not in _JOINING:
            return
        error, code = _outcome(future)
        if error is not None and code is None:
            self.coordinator_lost(f"JoinGroup: {error}")
            return
        if code is ErrorCode.NONE:
            body = future.value
            self.member_id = body["member_id"]
            self.generation = body["generation_id"]
            self._joined_with = topics
            self._assignment = [
                TopicPartition(t["topic"], p)
                for t in body["partitions_to_own"]
                for p in t["partitions"]
            ]
            self._move(_E.JOINED, f"generation {self.generation}, {len(self._assignment)} "
                                  "partitions")
            self._next_heartbeat = self._clock() + self.config.heartbeat_interval_ms / 1000
            if topics != self._subscription:
                self._rejoin_reason = "subscription changed while joining"
            return
        assert code is not None and error is not None
        if code is ErrorCode.FENCED_INSTANCE_ID:
            self.fenced(error, "JoinGroup")
            return
        event = event_for(code, joining=True) or (
            _E.BACK_OFF if code.retriable else _E.JOIN_REJECTED
        )
        reason = f"JoinGroup: {code.name}"
        if event is _E.COORDINATOR_LOST:
            self.coordinator_lost(reason)
        elif event is _E.REJOIN_NEEDED:
            self._forget(code)
            if self.state is not _S.REJOINING:
                self._move(event, reason)
            elif code is ErrorCode.REBALANCE_IN_PROGRESS:
                self._move(_E.REJOIN_CONSUMING, reason)
            else:  # the group went on without this member: let go of everything
                self._stop_consumption(reason)
        elif event is _E.BACK_OFF:
            self._retry_at = self._clock() + self._backoff
            self._move(event, reason)
        else:
            self._move(_E.JOIN_REJECTED, reason)
            self._errors.append(error)

    def _send_heartbeat(self, now: float) -> None:
        node = self._lookup.node
        assert node is not None
        body = {
            "group_id": self.group_id,
            "generation_id": self.generation,
            "member_id": self.member_id,
        }
        # Seed: no HeartbeatResponse within session.timeout.ms -> the coordinator has failed.
        timeout = self.config.session_timeout_ms / 1000
        future = self._network.send(node, ApiKey.HEARTBEAT, body, timeout=timeout)
        self._heartbeat = future
        future.add_done_callback(partial(self._on_heartbeat, now, self.generation))

    def _on_heartbeat(
        self, sent_at: float, generation: int, future: Future[dict[str, Any]]
    ) -> None:
        if future is not self._heartbeat:
            return
        self._heartbeat = None
        if self.state is not _S.PART_OF_GROUP or generation != self.generation:
            return  # the member moved on while the heartbeat was out
        error, code = _outcome(future)
        if error is not None and code is None:
            self.coordinator_lost(f"Heartbeat: {error}")
            return
        assert code is not None
        if code is ErrorCode.FENCED_INSTANCE_ID:
            assert error is not None
            self.fenced(error, "Heartbeat")
            return
        event = event_for(code, joining=False) or _E.BACK_OFF
        reason = f"Heartbeat: {code.name}"
        if event is _E.HEARTBEAT_OK:
            self._move(event, "")
            self._next_heartbeat = sent_at + self.config.heartbeat_interval_ms / 1000
        elif event is _E.REJOIN_NEEDED:
            self.request_rejoin(code, reason)
        elif event is _E.COORDINATOR_LOST:
            self.coordinator_lost(reason)
        else:  # COORDINATOR_LOAD_IN_PROGRESS, or a retriable error of no meaning here
            self._move(_E.BACK_OFF, reason)
            self._next_heartbeat = self._clock() + self._backoff

    def fenced(self, error: BaseException, where: str) -> None:
        """KIP-345: a newer process took this static member's instance id. Down, for good:
        the error is raised from the next poll, and the member forgets its id."""
        self._move(_E.FENCED, f"{where}: FENCED_INSTANCE_ID")
        self.member_id, self.generation = NO_MEMBER, NO_GENERATION
        self._subscribed = False
        self._joined_with = self._assignment = self._rejoin_reason = None
        self._join = self._heartbeat = None
        self.revocation_pending = False
        self._errors.append(error)

    def _on_lookup(self, error: BaseException | None) -> None:
        if self.state not in _LOOKING_UP:
            return  # a commit's lookup, outside membership
        if error is None:
            self._move(_E.COORDINATOR_FOUND, f"coordinator is broker {self._lookup.broker_id}")
            self._next_heartbeat = self._clock()  # show the new coordinator we are alive
            return
        code = error.code if isinstance(error, BrokerError) else None
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._move(_E.BACK_OFF, f"FindCoordinator: {code.name}")
        elif (code is not None and not code.retriable
              and self.state is not _S.REDISCOVER_COORDINATOR):
            self._move(_E.JOIN_REJECTED, f"FindCoordinator: {code.name}")
            self._errors.append(error)
        else:
            self._move(_E.COORDINATOR_LOST, f"FindCoordinator: {error}")

    # ------------------------------------------------------------------------------ moves

    def _rebalance(self, reason: str, *, keep: bool = True) -> None:
        """Rejoin: an incremental member keeps fetching (unless ``keep`` is False: it may have
        lost its partitions already); an eager one stops first."""
        if self.incremental and keep:
            self._rejoin_reason = None
            self._move(_E.REJOIN_CONSUMING, reason)
        else:
            self._stop_consumption(reason)

    def _stop_consumption(self, reason: str) -> None:
        self._rejoin_reason = None
        self.revocation_pending = True
        self._move(_E.REJOIN_NEEDED, reason)

    def _forget(self, code: ErrorCode) -> None:
        """Seed: UnknownConsumer -> join as a new member; a stale generation is no longer ours."""
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = NO_MEMBER
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.generation = NO_GENERATION

    def _move(self, event: ConsumerEvent, reason: str) -> None:
        before = self.state
        self.state = transition(before, event)
        if self.state is not before:
            fields = {
                "group": self.group_id, "member": self.member_id, "generation": self.generation,
                "from_state": before.value, "to_state": self.state.value,
                "event_name": event.value, "reason": reason,
            }
            log.info(
                "consumer_state group=%s member=%s generation=%s from=%r to=%r event=%r "
                "reason=%r",
                self.group_id, self.member_id or "-", self.generation, before.value,
                self.state.value, event.value, reason, extra={"consumer_state": fields},
            )
        elif event is not _E.HEARTBEAT_OK:
            log.debug("consumer_event group=%s state=%r event=%r reason=%r",
                      self.group_id, before.value, event.value, reason)


def _outcome(future: Future[dict[str, Any]]) -> tuple[BaseException | None, ErrorCode | None]:
    """(error, code): a connection failure or timeout is (error, None); an answer is (error or
    None, its code)."""
    error = future.exception()
    if error is not None:
        return error, error.code if isinstance(error, BrokerError) else None
    raw = future.value["error_code"]
    try:
        code = ErrorCode(raw)
    except ValueError:
        code = ErrorCode.UNKNOWN_SERVER_ERROR
    if code is ErrorCode.NONE:
        return None, code
    return error_for(raw, future.value.get("error_message") or ""), code
