"""Where a new topic's replicas go: Kafka's ``AdminUtils.assignReplicasToBrokers``, sans-IO.

Seed 003, "Selection of a brokers when creating partitions for a topic": "Lets randomly take
broker 3 to be Leader partition 0, broker 4 to have Leader partition 1, broker 5 to have Leader
partition 2, broker 0 to have Leader partition 3 and so on", and "partition 0 has leader in
broker 3, so partition 0 replicas will be broker 4 and 5".

Kafka's three goals, which this module keeps:

1. spread the replicas evenly over the brokers (leaders round-robin from a random start);
2. the other replicas of the partitions one broker leads are spread over the other brokers
   (the gap between leader and second replica grows by one after each lap of the brokers);
3. if every broker has a rack, put each partition's replicas on different racks when possible.

Everything here is a pure function of its arguments: randomness comes only from the ``rng``
passed in (or from fixed ``start_index`` / ``next_replica_shift``), so tests are reproducible.
This is the ZooKeeper-era placement (``AdminUtils``, later ``server-common``'s ``AdminUtils``),
not KRaft's striped placer.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode

__all__ = [
    "BrokerSlot",
    "PlacementError",
    "assign_added_partitions",
    "assign_replicas",
    "check_assignment",
    "rack_alternated_order",
]


@dataclass(frozen=True)
class BrokerSlot:
    """A live broker as placement sees it: its id and, when ``broker.rack`` is set, its rack."""

    broker_id: int
    rack: str | None = None


class PlacementError(ValueError):
    """The replicas cannot be placed as asked. ``code`` is the Kafka error code a CreateTopics
    or CreatePartitions answer should carry for it."""

    def __init__(
        self, message: str, *, code: ErrorCode = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ) -> None:
        super().__init__(message)
        self.code = code


def assign_replicas(
    brokers: Sequence[BrokerSlot],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    next_replica_shift: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
    rack_aware: bool = True,
) -> dict[int, list[int]]:
    """Partition -> replica list (the first replica is the preferred leader), for partitions
    ``first_partition .. first_partition + partitions - 1``.

    ``start_index`` is the position (in the broker order) of the first partition's leader and
    ``next_replica_shift`` the initial gap to its second replica; each is drawn from ``rng`` in
    ``[0, brokers)`` when not given (start first, as Kafka draws them). Kafka fixes both with one
    number (``fixedStartIndex``), so a fixed ``start_index`` without a ``next_replica_shift``
    fixes the shift to the same value. ``first_partition`` is the existing partition count when
    partitions are added to a topic (see ``assign_added_partitions``).

    Brokers are taken in id order. If every broker has a rack the placement is rack aware; if
    only some do it is refused, as Kafka refuses it, unless ``rack_aware=False`` says to ignore
    racks altogether.
    """
    _check_request(brokers, partitions, replication_factor)
    for name, value in (
        ("start_index", start_index),
        ("next_replica_shift", next_replica_shift),
        ("first_partition", first_partition),
    ):
        if value is not None and value < 0:
            raise PlacementError(
                f"{name} must not be negative, got {value}", code=ErrorCode.UNKNOWN_SERVER_ERROR
            )

    ordered = sorted(brokers, key=lambda slot: slot.broker_id)
    racks = {slot.broker_id: slot.rack for slot in ordered}
    unracked = [broker for broker, rack in racks.items() if rack is None]
    use_racks = rack_aware and len(unracked) < len(ordered)
    if use_racks and unracked:
        # Kafka's AdminOperationException, which CreateTopics answers as UNKNOWN_SERVER_ERROR:
        # the cluster's configuration is at fault, not the request.
        raise PlacementError(
            "not all brokers have rack information for rack-aware replica assignment; "
            f"brokers without a rack: {_ids(unracked)}",
            code=ErrorCode.UNKNOWN_SERVER_ERROR,
        )

    n = len(ordered)
    if rng is None:
        rng = random.Random()
    start = start_index if start_index is not None else rng.randrange(n)
    if next_replica_shift is not None:
        shift = next_replica_shift
    elif start_index is not None:
        shift = start_index
    else:
        shift = rng.randrange(n)

    walk = _leader_walk(n, partitions, start, shift, first_partition)
    if not use_racks:
        ids = [slot.broker_id for slot in ordered]
        return {
            partition: [ids[first]]
            + [ids[_replica_index(first, lap_shift, j, n)] for j in range(replication_factor - 1)]
            for partition, first, lap_shift in walk
        }

    rack_of = {broker: rack for broker, rack in racks.items() if rack is not None}
    order = rack_alternated_order(ordered)
    rack_count = len(set(rack_of.values()))
    return {
        partition: _rack_aware_replicas(
            order, rack_of, rack_count, first, lap_shift, replication_factor
        )
        for partition, first, lap_shift in walk
    }


def assign_added_partitions(
    brokers: Sequence[BrokerSlot],
    existing: Mapping[int, Sequence[int]],
    total_partitions: int,
    *,
    rack_aware: bool = True,
) -> dict[int, list[int]]:
    """Replicas for the partitions CreatePartitions adds (``len(existing) .. total - 1``), as
    Kafka's ``addPartitions`` places them when no assignment is given: the replication factor is
    partition 0's, and the start index (which also fixes the shift) is the position, among the
    brokers in id order, of the first broker whose id is at least partition 0's leader — so the
    new leaders carry on the round-robin where the topic's creation left it."""
    if 0 not in existing or not existing[0]:
        raise PlacementError(
            "the existing replica assignment has no replicas for partition 0",
            code=ErrorCode.UNKNOWN_SERVER_ERROR,
        )
    if total_partitions <= len(existing):
        raise PlacementError(
            f"the number of partitions can only be increased: the topic has {len(existing)}, "
            f"{total_partitions} would not be an increase",
            code=ErrorCode.INVALID_PARTITIONS,
        )
    partition0 = existing[0]
    ids = sorted(slot.broker_id for slot in brokers)
    # Kafka: max(0, allBrokers.indexWhere(_.id >= partition0.head)).
    start = next((index for index, broker in enumerate(ids) if broker >= partition0[0]), 0)
    return assign_replicas(
        brokers,
        total_partitions - len(existing),
        len(partition0),
        start_index=start,
        first_partition=len(existing),
        rack_aware=rack_aware,
    )


def rack_alternated_order(brokers: Sequence[BrokerSlot]) -> list[int]:
    """Broker ids taking one broker from each rack in turn (racks by name, brokers by id).

    Seed 003: "say we have broker 0,1,2 in rack 0 and broker 3,4,5 in rack 1 ... Seq order
    will 0,3,1,4,2,5". Round-robin over this list puts consecutive replicas on different racks;
    a rack with fewer brokers simply drops out of the later rounds.
    """
    by_rack: dict[str, list[int]] = {}
    for slot in sorted(brokers, key=lambda slot: slot.broker_id):
        if slot.rack is None:
            raise PlacementError(
                f"broker {slot.broker_id} has no rack", code=ErrorCode.UNKNOWN_SERVER_ERROR
            )
        by_rack.setdefault(slot.rack, []).append(slot.broker_id)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    rounds = max((len(column) for column in columns), default=0)
    return [column[i] for i in range(rounds) for column in columns if i < len(column)]


def check_assignment(assignment: Mapping[int, Sequence[int]], live: Collection[int]) -> None:
    """Refuse an explicit replica assignment (CreateTopics' ``assignments``) that Kafka would
    refuse: partitions must be numbered 0..n-1, every list non-empty and as long as partition
    0's, no broker twice in a list, every broker live. The message names the partition."""
    if not assignment:
        raise PlacementError("the replica assignment lists no partitions")
    numbers = set(assignment)
    expected = set(range(len(assignment)))
    if numbers != expected:
        missing = sorted(expected - numbers)
        unexpected = sorted(numbers - expected)
        detail = "; ".join(
            part
            for part in (
                f"missing partitions {_ids(missing)}" if missing else "",
                f"unexpected partitions {_ids(unexpected)}" if unexpected else "",
            )
            if part
        )
        raise PlacementError(
            f"partitions must be numbered consecutively from 0 to {len(assignment) - 1}: {detail}"
        )
    live_set = set(live)
    size = len(assignment[0])
    for partition in sorted(assignment):
        replicas = list(assignment[partition])
        if not replicas:
            raise PlacementError(f"partition {partition} has an empty replica list")
        if len(replicas) != size:
            raise PlacementError(
                f"partition {partition} has {len(replicas)} replicas {replicas} but partition 0 "
                f"has {size}; every partition needs the same replication factor"
            )
        seen: set[int] = set()
        for broker in replicas:
            if broker in seen:
                raise PlacementError(
                    f"partition {partition} lists broker {broker} more than once: {replicas}"
                )
            seen.add(broker)
        dead = [broker for broker in replicas if broker not in live_set]
        if dead:
            raise PlacementError(
                f"partition {partition} names brokers that are not live: {_ids(dead)} "
                f"(live brokers: {_ids(sorted(live_set))})",
                code=ErrorCode.BROKER_NOT_AVAILABLE,
            )


# ----------------------------------------------------------------------------- internals


def _check_request(brokers: Sequence[BrokerSlot], partitions: int, replication_factor: int) -> None:
    """Kafka's checks, in Kafka's order, plus one for our own misuse (a broker listed twice)."""
    ids = [slot.broker_id for slot in brokers]
    if len(set(ids)) != len(ids):
        twice = sorted({broker for broker in ids if ids.count(broker) > 1})
        raise PlacementError(
            f"brokers listed more than once: {_ids(twice)}", code=ErrorCode.UNKNOWN_SERVER_ERROR
        )
    if partitions < 1:
        raise PlacementError(
            f"number of partitions must be at least 1, got {partitions}",
            code=ErrorCode.INVALID_PARTITIONS,
        )
    if replication_factor < 1:
        raise PlacementError(
            f"replication factor must be at least 1, got {replication_factor}",
            code=ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the number of live "
            f"brokers ({len(brokers)})",
            code=ErrorCode.INVALID_REPLICATION_FACTOR,
        )


def _leader_walk(
    n: int, partitions: int, start: int, shift: int, first_partition: int
) -> Iterator[tuple[int, int, int]]:
    """(partition, leader's index in the broker order, shift for its followers).

    Leaders go round-robin from ``start``; the shift grows by one each time the partition id
    comes round to a multiple of the broker count, so the next lap pairs each leader with
    different followers ("this is to ensure we will not always get the same set of sequences").
    """
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start) % n, shift


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Position of follower ``j``: 1 + (shift + j) mod (n - 1) places after the leader, which
    is never the leader itself and, for j < n - 1, never an earlier follower."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_aware_replicas(
    order: Sequence[int],
    rack_of: Mapping[int, str],
    rack_count: int,
    first: int,
    shift: int,
    replication_factor: int,
) -> list[int]:
    """Leader by round-robin over the rack-alternated order; followers walk on from it (the
    shift scaled by the rack count, as Kafka does, to keep whole rack rounds together), skipping
    a broker whose rack already holds a replica while some rack holds none, and skipping a
    broker that already holds one. Kafka would also allow a repeat once every broker holds one,
    but with replication factor <= brokers the list is full before that can happen. The walk
    visits every other broker within n - 1 steps, so a suitable one is always found."""
    n = len(order)
    leader = order[first]
    replicas = [leader]
    racks_used = {rack_of[leader]}
    step = 0
    while len(replicas) < replication_factor:
        broker = order[_replica_index(first, shift * rack_count, step, n)]
        step += 1
        rack = rack_of[broker]
        if rack in racks_used and len(racks_used) < rack_count:
            continue
        if broker in replicas:
            continue
        replicas.append(broker)
        racks_used.add(rack)
    return replicas


def _ids(values: Collection[int]) -> str:
    return ", ".join(str(value) for value in values)
