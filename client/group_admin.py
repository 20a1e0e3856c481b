"""``GroupAdmin``: consumer groups as an operator sees them.

Which broker coordinates a group (FindCoordinator), every group and its state (ListGroups on
each broker; ``coordinator_loads`` adds each group's generation and member count, broker by
broker), a group's generation, strategy, members, assignments and how long it has been in its
state (DescribeGroups v1, v0 from a broker that has no v1), its
committed offsets (OffsetFetch) against each partition's log end (ListOffsets) -- the lag --,
deleting Empty groups (DeleteGroups) and deleting a group's offsets of a topic (OffsetDelete).

Each call blocks, driving the sockets itself, up to ``timeout_ms``. A coordinator that is
loading, has moved or is not elected yet (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE), or whose broker cannot be reached (it died: its offsets partition
gets a new leader), is found and asked again after a short backoff until then, so a command
run right after a broker starts, or during a failover, gets the whole answer; a bootstrap
address that is down is passed over for the next. Other errors raise their typed
``BrokerError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from client.admin import Admin
from client.errors import BrokerConnectionError, partition_error
from client.metadata import BrokerInfo
from client.offsets import LATEST, list_offsets
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, OdradekError, UnsupportedVersionError

#: answers that mean "find the coordinator and ask again shortly"
RETRY_LATER = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
})
RETRY_BACKOFF = 0.1


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    coordinator: int  # broker id


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    subscription: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]
    #: a static member's group_instance_id (KIP-345); None for a dynamic member
    instance_id: str | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    strategy: str
    generation: int
    coordinator: BrokerInfo
    members: tuple[MemberDescription, ...]
    #: when the group entered its state, the coordinator's wall clock in ms since the epoch;
    #: None when the coordinator does not know (or answers DescribeGroups v0 only)
    state_since_ms: int | None = None

    def in_state_ms(self, now_ms: int | None = None) -> int | None:
        """How long the group has been in its state as of ``now_ms`` (default: now)."""
        if self.state_since_ms is None:
            return None
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(now - self.state_since_ms, 0)


@dataclass(frozen=True)
class CoordinatedGroup:
    """A group as its coordinator lists it; ``generation`` and ``members`` None when the
    group could not be described (it moved, or went, between the two requests)."""

    group_id: str
    state: str
    generation: int | None
    members: int | None


@dataclass(frozen=True)
class CoordinatorLoad:
    """The groups one broker coordinates, or why it could not say (``error``)."""

    node_id: int
    groups: tuple[CoordinatedGroup, ...]
    error: str | None = None

    @property
    def members(self) -> int:
        return sum(g.members or 0 for g in self.groups)


class CommittedOffset(NamedTuple):
    offset: int
    metadata: str | None


@dataclass(frozen=True)
class PartitionLag:
    """One partition a group owns or has committed: who owns it, where the group is, where the
    log ends. None where there is nothing: no owner, no commit, no such partition any more."""

    partition: TopicPartition
    owner: str | None
    committed: CommittedOffset | None
    log_end: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed.offset, 0)


class GroupAdmin(Admin):
    """The group APIs, on top of Admin's connection handling, metadata and lifecycle."""

    #: the DescribeGroups version asked for (3: with the state's age and the members'
    #: instance ids); 0 after a broker refused it (an older broker)
    _describe_version = 3

    # ---------------------------------------------------------------------------- queries

    def find_coordinator(self, group_id: str) -> BrokerInfo:
        return self._find(group_id, self._deadline())

    def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id."""
        deadline = self._deadline()
        brokers = self._refresh().brokers
        listings = []
        for node in sorted(brokers):
            while True:
                answer = self._send(node, ApiKey.LIST_GROUPS, {}, deadline)
                if answer["error_code"] in RETRY_LATER:
                    self._back_off(answer["error_code"], f"broker {node}", deadline)
                    continue
                if answer["error_code"]:
                    raise partition_error(f"broker {node}", answer["error_code"])
                listings += [GroupListing(g["group_id"], g["state"], node)
                             for g in answer["groups"]]
                break
        return sorted(listings, key=lambda g: g.group_id)

    def coordinator_loads(self) -> list[CoordinatorLoad]:
        """For each live broker (by id): the groups it coordinates (ListGroups to it) with their
        generations and member counts (DescribeGroups to it). A broker that does not answer,
        or keeps loading, gets its ``error`` instead; the others are still asked."""
        deadline = self._deadline()
        loads = []
        for node in sorted(self._refresh().brokers):
            try:
                loads.append(CoordinatorLoad(node, self._coordinated_by(node, deadline)))
            except OdradekError as exc:
                loads.append(CoordinatorLoad(node, (), f"{type(exc).__name__}: {exc}"))
        return loads

    def _coordinated_by(self, node: int, deadline: float) -> tuple[CoordinatedGroup, ...]:
        while True:
            listed = self._send(node, ApiKey.LIST_GROUPS, {}, deadline)
            if listed["error_code"] not in RETRY_LATER:
                break
            self._back_off(listed["error_code"], f"broker {node}", deadline)
        if listed["error_code"]:
            raise partition_error(f"broker {node}", listed["error_code"])
        states = {g["group_id"]: g["state"] for g in listed["groups"]}
        if not states:
            return ()
        described = {}
        answer = self._send(node, ApiKey.DESCRIBE_GROUPS, {"group_ids": sorted(states)},
                            deadline, api_version=0)
        for g in answer["groups"]:
            if g["error_code"] == ErrorCode.NONE:
                described[g["group_id"]] = g
        return tuple(
            CoordinatedGroup(
                group_id, described[group_id]["state"] if group_id in described else state,
                described[group_id]["generation_id"] if group_id in described else None,
                len(described[group_id]["members"]) if group_id in described else None,
            )
            for group_id, state in sorted(states.items())
        )

    def describe_group(self, group_id: str) -> GroupDescription:
        """State (and since when), strategy, generation and members; ``GroupIdNotFoundError``
        if none exists."""
        try:
            coordinator, answer = self._describe(group_id, self._describe_version)
        except UnsupportedVersionError:
            if self._describe_version == 0:
                raise
            self._describe_version = 0  # a broker from before v1: ask again without the age
            coordinator, answer = self._describe(group_id, 0)
        group = answer["groups"][0]
        if group["error_code"]:
            raise partition_error(f"group {group_id!r}", group["error_code"])
        members = tuple(
            MemberDescription(
                m["member_id"], m["client_id"], m["client_host"], m["session_timeout_ms"],
                tuple(m["subscription"]),
                tuple(TopicPartition(a["topic"], p) for a in m["assignment"]
                      for p in a["partitions"]),
                m.get("group_instance_id"),
            )
            for m in group["members"]
        )
        since = group.get("state_since_ms", -1)
        return GroupDescription(group_id, group["state"], group["assignment_strategy"],
                                group["generation_id"], coordinator, members,
                                since if since >= 0 else None)

    def _describe(self, group_id: str, version: int) -> tuple[BrokerInfo, dict[str, Any]]:
        return self._ask_coordinator(
            group_id, ApiKey.DESCRIBE_GROUPS, {"group_ids": [group_id]},
            lambda body: body["groups"][0]["error_code"], api_version=version,
        )

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """Every offset the group has committed."""
        _, answer = self._ask_coordinator(
            group_id, ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None},
            lambda body: body["error_code"],
        )
        if answer["error_code"]:
            raise partition_error(f"group {group_id!r}", answer["error_code"])
        return {
            TopicPartition(t["name"], p["partition"]): CommittedOffset(p["offset"], p["metadata"])
            for t in answer["topics"] for p in t["partitions"] if p["offset"] >= 0
        }

    def group_lag(self, group: GroupDescription) -> list[PartitionLag]:
        """For each partition the group's members own or it has committed: owner, committed
        offset, log end offset (ListOffsets latest) and lag, sorted by partition."""
        owners = {tp: m.member_id for m in group.members for tp in m.assignment}
        committed = self.committed_offsets(group.group_id)
        partitions = sorted(set(owners) | set(committed))
        topics = self._refresh().topics
        existing = [  # ListOffsets would wait out the timeout for a partition that is gone
            tp for tp in partitions
            if tp.topic in topics and tp.partition in topics[tp.topic].partitions
        ]
        ends = list_offsets(self._metadata, dict.fromkeys(existing, LATEST), self._timeout)
        return [
            PartitionLag(tp, owners.get(tp), committed.get(tp),
                         ends[tp].offset if tp in ends else None)
            for tp in partitions
        ]

    # --------------------------------------------------------------------------- changes

    def remove_members(self, group_id: str, instance_ids: Iterable[str]
                       ) -> dict[str, BrokerError | None]:
        """Remove static members at once by instance id (Kafka's RemoveMembersFromGroup): the
        group rebalances without waiting for their sessions to time out. Each instance's
        result is None or its typed error (``UnknownMemberIdError`` if no member holds it)."""
        out: dict[str, BrokerError | None] = {}
        for instance_id in instance_ids:
            _, answer = self._ask_coordinator(
                group_id, ApiKey.LEAVE_GROUP,
                {"group_id": group_id, "member_id": "", "group_instance_id": instance_id},
                lambda body: body["error_code"], api_version=1,
            )
            code = answer["error_code"]
            out[instance_id] = partition_error(
                f"group {group_id!r} instance {instance_id!r}", code) if code else None
        return out

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, BrokerError | None]:
        """Delete Empty groups and their offsets; each group's result is None or its typed
        error (``NonEmptyGroupError``, ``GroupIdNotFoundError``)."""
        results: dict[str, BrokerError | None] = {}
        for group_id in dict.fromkeys(group_ids):
            _, answer = self._ask_coordinator(
                group_id, ApiKey.DELETE_GROUPS, {"group_ids": [group_id]},
                lambda body: body["results"][0]["error_code"],
            )
            code = answer["results"][0]["error_code"]
            results[group_id] = partition_error(f"group {group_id!r}", code) if code else None
        return results

    def delete_offsets(
        self, group_id: str, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[TopicPartition, BrokerError | None]:
        """Delete the group's committed offsets of ``partitions`` of ``topic`` (OffsetDelete);
        None: every partition the topic has and every one of it the group committed (so the
        offsets of a deleted topic can go too). Each partition's result is None or its typed
        error (``GroupSubscribedToTopicError`` while members subscribe to the topic);
        ``GroupIdNotFoundError`` if the group does not exist. Empty if there was nothing to
        name: no such topic and no offsets of it."""
        if partitions is None:
            known = self._refresh().topics.get(topic)
            chosen = set(known.partitions) if known is not None and not known.error else set()
            chosen.update(tp.partition for tp in self.committed_offsets(group_id)
                          if tp.topic == topic)
        else:
            chosen = set(partitions)
        _, answer = self._ask_coordinator(
            group_id, ApiKey.OFFSET_DELETE,
            {"group_id": group_id, "topics": [{"name": topic, "partitions": sorted(chosen)}]},
            lambda body: body["error_code"],
        )
        if answer["error_code"]:
            raise partition_error(f"group {group_id!r}", answer["error_code"])
        return {
            TopicPartition(t["name"], p["partition"]):
                partition_error(f"{t['name']}-{p['partition']}", p["error_code"])
                if p["error_code"] else None
            for t in answer["topics"] for p in t["partitions"]
        }

    # --------------------------------------------------------------------------- helpers

    def _deadline(self) -> float:
        return time.monotonic() + self._timeout

    def _send(self, node: int, api: ApiKey, body: dict[str, Any], deadline: float, *,
              api_version: int = 0) -> Any:
        self._check_open()
        future = self._network.send(node, api, body, api_version=api_version)
        return future.result(max(deadline - time.monotonic(), 0.001))

    def _back_off(self, code: int, where: str, deadline: float) -> None:
        """Wait before asking again, or raise the error when there is no time for that."""
        if time.monotonic() + RETRY_BACKOFF > deadline:
            raise partition_error(where, code)
        self._network.poll(RETRY_BACKOFF)

    def _find(self, group_id: str, deadline: float) -> BrokerInfo:
        while True:
            node = self._network.least_loaded_node()
            try:
                answer = self._send(node, ApiKey.FIND_COORDINATOR, {"group_id": group_id},
                                    deadline)
            except BrokerConnectionError:
                # that broker is down (the first bootstrap address, a broker just killed):
                # learn the live brokers from another one and ask again
                self._metadata.refresh(max(deadline - time.monotonic(), 0.001))
                continue
            code = answer["error_code"]
            if code == ErrorCode.NONE:
                found = BrokerInfo(answer["node_id"], answer["host"], answer["port"])
                self._network.set_brokers({found.node_id: (found.host, found.port)})
                return found
            if code not in RETRY_LATER:
                raise partition_error(f"group {group_id!r}", code, answer["error_message"])
            self._back_off(code, f"group {group_id!r}", deadline)

    def _ask_coordinator(
        self, group_id: str, api: ApiKey, body: dict[str, Any],
        code_of: Callable[[dict[str, Any]], int], *, api_version: int = 0,
    ) -> tuple[BrokerInfo, dict[str, Any]]:
        """The group's coordinator and its answer, asking again while ``code_of(answer)`` is
        one of ``RETRY_LATER``."""
        deadline = self._deadline()
        while True:
            coordinator = self._find(group_id, deadline)
            try:
                answer = self._send(coordinator.node_id, api, body, deadline,
                                    api_version=api_version)
            except BrokerConnectionError:
                # the coordinator died: find the group's new one (once elected) and ask it
                if time.monotonic() + RETRY_BACKOFF > deadline:
                    raise
                self._network.poll(RETRY_BACKOFF)
                continue
            code = code_of(answer)
            if code not in RETRY_LATER:
                return coordinator, answer
            self._back_off(code, f"group {group_id!r}", deadline)
