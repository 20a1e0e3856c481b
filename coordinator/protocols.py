"""Kafka's classic group protocol, the parts that are rules about values: whether a member's
protocols fit a group, which protocol a generation uses, who leads it, and what a Kafka
consumer's metadata and assignment bytes say (for describe and metrics only -- to the
coordinator they are opaque)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from coordinator.assignors import Assignment, shared
from coordinator.group import Group, Member, Protocols
from protocol.kafka.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
)
from protocol.partitions import TopicPartition

#: the protocol type whose metadata and assignments are Kafka's ConsumerProtocol
CONSUMER = "consumer"


def describe_protocol_type(protocol_type: str) -> str:
    if protocol_type:
        return f"protocol type {protocol_type!r} (Kafka client-side assignment)"
    return "protocol type '' (odradek broker-side assignment)"


def mixed_kinds_message(group: Group, protocol_type: str) -> str:
    return (
        f"group {group.group_id!r} has members using "
        f"{describe_protocol_type(group.protocol_type)}; a member with "
        f"{describe_protocol_type(protocol_type)} cannot join until it is Empty"
    )


def common_protocols(protocol_lists: Iterable[Protocols]) -> set[str] | None:
    """The protocol names every list names, or None for no lists at all."""
    common: set[str] | None = None
    for protocols in protocol_lists:
        names = {name for name, _ in protocols}
        common = names if common is None else common & names
    return common


def fits(group: Group, member_id: str, protocols: Protocols) -> bool:
    """Whether a member offering ``protocols`` leaves the group a protocol every member
    supports (the member's own earlier offer, if it rejoins, does not count)."""
    if not protocols:
        return False
    others = [m.protocols for mid, m in group.members.items() if mid != member_id]
    others += [j.protocols for j in group.new_joins]
    common = common_protocols(others)
    return common is None or bool(common & {name for name, _ in protocols})


def choose_leader(group: Group) -> str:
    """The current leader if still a member, else the first member to have joined."""
    if group.leader_id in group.members:
        return group.leader_id
    return next(iter(group.members))


def choose_protocol(members: dict[str, Member], leader_id: str) -> str:
    """Kafka's vote: among the protocols every member supports, each member votes for the
    first in its own order; most votes wins, a tie goes to the leader's preference."""
    common = common_protocols(m.protocols for m in members.values()) or set()
    if not common:  # joins are refused that would leave none; the leader's, to be safe
        return members[leader_id].protocols[0][0]
    votes = Counter(
        next(name for name, _ in m.protocols if name in common) for m in members.values()
    )
    most = max(votes.values())
    tied = {name for name, count in votes.items() if count == most}
    return next(name for name, _ in members[leader_id].protocols if name in tied)


def metadata_for(protocols: Protocols, name: str) -> bytes:
    return next((metadata for n, metadata in protocols if n == name), b"")


def subscription_of(protocol_type: str, metadata: bytes) -> tuple[str, ...]:
    """The topics a Kafka consumer's Subscription names; () for other protocol types and for
    bytes that do not decode."""
    if protocol_type != CONSUMER:
        return ()
    try:
        return tuple(sorted(set(decode_subscription(metadata).topics)))
    except ConsumerProtocolError:
        return ()


def assignment_of(protocol_type: str, data: bytes) -> Assignment:
    """The partitions a Kafka consumer's Assignment gives; () for other protocol types and
    for bytes that do not decode."""
    if protocol_type != CONSUMER or not data:
        return ()
    try:
        decoded = decode_assignment(data)
    except ConsumerProtocolError:
        return ()
    return tuple(sorted({
        shared(TopicPartition(topic, partition))
        for topic, partitions in decoded.partitions for partition in partitions
    }))
