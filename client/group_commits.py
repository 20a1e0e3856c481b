"""Committing offsets to, and reading them from, a group's coordinator.

Every commit -- ``commit()``, ``commit_async()``, auto-commit, the commit before a rebalance --
goes through ``send_commit``, so their answers are read one way: stored offsets are remembered;
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID make the member rejoin and fail
the commit with ``CommitFailedError``; NOT_COORDINATOR or a lost connection send the member to
find the coordinator again and fail it with a retriable error, which the blocking forms retry
until their deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from client.coordinator_lookup import CoordinatorLookup
from client.errors import CommitFailedError, partition_error
from client.future import Future
from client.group_membership import GroupMembership
from client.group_offsets import (
    NO_GENERATION,
    NO_MEMBER,
    offset_commit_body,
    offset_fetch_body,
    read_offset_commit,
    read_offset_fetch,
)
from client.group_state import ConsumerState
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import BrokerError, CoordinatorNotAvailableError, ErrorCode, OdradekError

_REJOIN = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})

Offsets = dict[TopicPartition, int]


class GroupCommits:
    def __init__(
        self,
        lookup: CoordinatorLookup,
        membership: GroupMembership,
        *,
        retry_backoff_ms: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._network = lookup.network
        self._membership = membership
        self._group_id = membership.group_id
        self._backoff = retry_backoff_ms / 1000
        self._clock = clock
        #: what this consumer last committed successfully, per partition
        self.committed: Offsets = {}

    def coordinator_known(self) -> bool:
        """Whether requests can go to the coordinator now; if not, it is being looked up."""
        self._lookup.poll()
        return self._lookup.node is not None

    def _coordinator_or_fail(self, result: Future[Any]) -> int | None:
        """The coordinator's node, or None after failing ``result`` and asking for it again."""
        node = self._lookup.node
        if node is None:
            self._lookup.poll()
            result.fail(CoordinatorNotAvailableError(
                f"group {self._group_id!r}: coordinator not known yet"))
        return node

    # ---------------------------------------------------------------------------- commits

    def send_commit(
        self, offsets: Mapping[TopicPartition, int], *, as_member: bool
    ) -> Future[None]:
        """Send one OffsetCommit; the future fails with the reason if it was not stored.
        ``as_member``: with this member's id and generation (a group subscription), else with
        generation -1 (manual assignment)."""
        result: Future[None] = Future(self._network.poll)
        node = self._coordinator_or_fail(result)
        if node is None:
            return result
        if as_member:
            membership = self._membership
            if not membership.is_member:
                result.fail(CommitFailedError(
                    self._group_id, "this consumer is not a member of the group's current "
                    f"generation (state {membership.state.value!r}; it rejoins in poll())"))
                return result
            if membership.state is ConsumerState.REJOINING:
                # it would wait behind the held JoinGroup, blocking poll() for the whole
                # round, only to be refused for the generation the round replaces (Kafka's
                # consumer raises RebalanceInProgressException here)
                result.fail(CommitFailedError(
                    self._group_id, "the group is rebalancing (this member is rejoining while "
                    "it consumes); commit again after the rebalance", removed=False))
                return result
            generation, member_id = membership.generation, membership.member_id
        else:
            generation, member_id = NO_GENERATION, NO_MEMBER
        sent = dict(offsets)
        future = self._network.send(
            node, ApiKey.OFFSET_COMMIT,
            offset_commit_body(self._group_id, generation, member_id, sent),
        )
        future.add_done_callback(partial(self._on_commit, sent, as_member, generation, result))
        return result

    def commit_sync(
        self, offsets: Mapping[TopicPartition, int], *, as_member: bool, deadline: float
    ) -> None:
        """Commit and wait, retrying retriable failures (finding the coordinator again when it
        moved) until ``deadline``."""
        while True:
            self._lookup.wait(deadline)
            future = self.send_commit(offsets, as_member=as_member)
            try:
                future.result(max(deadline - self._clock(), 0.001))
                return
            except OdradekError as exc:
                if not getattr(exc, "retriable", False) or self._clock() >= deadline:
                    raise
            self._network.poll(min(self._backoff, max(deadline - self._clock(), 0.0)))

    def _on_commit(
        self,
        offsets: Offsets,
        as_member: bool,
        generation: int,
        result: Future[None],
        future: Future[dict[str, Any]],
    ) -> None:
        error = future.exception()
        if error is not None:
            if not isinstance(error, BrokerError):
                self._membership.coordinator_lost(f"OffsetCommit: {error}")
            elif error.code in _MOVED:
                self._membership.coordinator_lost(f"OffsetCommit: {error.code.name}")
            result.fail(error)
            return
        codes = read_offset_commit(future.value)
        failed = {tp: code for tp, code in codes.items() if code is not ErrorCode.NONE}
        self.committed.update((tp, o) for tp, o in offsets.items() if tp not in failed)
        if not failed:
            result.succeed(None)
            return
        tp, code = next(iter(sorted(failed.items())))
        cause = partition_error(f"OffsetCommit of {tp}", code)
        if code is ErrorCode.FENCED_INSTANCE_ID and as_member:
            self._membership.fenced(cause, "OffsetCommit")
            result.fail(cause)
            return
        if code in _REJOIN and as_member:
            # an answer about a generation the member has left since (a commit queued behind
            # its JoinGroup) says nothing about the generation it is in now
            if generation == self._membership.generation:
                self._membership.request_rejoin(code, f"OffsetCommit: {code.name}")
            error = CommitFailedError(
                self._group_id, f"the coordinator answered {code.name}",
                removed=code is not ErrorCode.REBALANCE_IN_PROGRESS,
            )
            error.__cause__ = cause
            result.fail(error)
            return
        if code in _MOVED:
            self._membership.coordinator_lost(f"OffsetCommit: {code.name}")
        result.fail(cause)

    # --------------------------------------------------------------------- committed offsets

    def send_fetch(self, partitions: Iterable[TopicPartition] | None) -> Future[Offsets]:
        """Ask the coordinator for committed offsets (-1: none); None for all of the group's."""
        result: Future[Offsets] = Future(self._network.poll)
        node = self._coordinator_or_fail(result)
        if node is None:
            return result
        future = self._network.send(
            node, ApiKey.OFFSET_FETCH, offset_fetch_body(self._group_id, partitions)
        )
        future.add_done_callback(partial(self._on_fetch, result))
        return result

    def fetch_sync(
        self, partitions: Iterable[TopicPartition] | None, deadline: float
    ) -> Offsets:
        wanted = None if partitions is None else list(partitions)
        while True:
            self._lookup.wait(deadline)
            future = self.send_fetch(wanted)
            try:
                return future.result(max(deadline - self._clock(), 0.001))
            except OdradekError as exc:
                if not getattr(exc, "retriable", False) or self._clock() >= deadline:
                    raise
            self._network.poll(min(self._backoff, max(deadline - self._clock(), 0.0)))

    def _on_fetch(self, result: Future[Offsets], future: Future[dict[str, Any]]) -> None:
        try:
            error = future.exception()
            if error is not None:
                raise error
            offsets = read_offset_fetch(future.value)
        except OdradekError as exc:
            if not isinstance(exc, BrokerError):
                self._membership.coordinator_lost(f"OffsetFetch: {exc}")
            elif exc.code in _MOVED:
                self._membership.coordinator_lost(f"OffsetFetch: {exc.code.name}")
            result.fail(exc)
            return
        result.succeed(offsets)
