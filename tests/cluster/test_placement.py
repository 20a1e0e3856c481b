"""Replica placement against seed 003's example and Kafka's own expected values
(AdminTest / AdminRackAwareTest / AddPartitionsTest), plus properties of the algorithm."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.placement import (
    BrokerSlot,
    PlacementError,
    assign_added_partitions,
    assign_replicas,
    check_assignment,
    rack_alternated_order,
)
from protocol.errors import ErrorCode


def plain(*ids: int) -> list[BrokerSlot]:
    return [BrokerSlot(broker_id) for broker_id in ids]


def racked(racks: Mapping[int, str]) -> list[BrokerSlot]:
    return [BrokerSlot(broker_id, rack) for broker_id, rack in racks.items()]


def leader_counts(assignment: Mapping[int, Sequence[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment.values())


def replica_counts(assignment: Mapping[int, Sequence[int]]) -> Counter[int]:
    return Counter(broker for replicas in assignment.values() for broker in replicas)


def check_distribution(
    assignment: Mapping[int, Sequence[int]],
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    *,
    rack_aware: bool,
    leaders: bool,
    replicas: bool,
) -> None:
    """What Kafka's AdminRackAwareTest.assertReplicaDistribution checks."""
    brokers = len(racks)
    for replica_list in assignment.values():
        assert len(set(replica_list)) == len(replica_list) == replication_factor
    if rack_aware:
        for replica_list in assignment.values():
            assert len({racks[broker] for broker in replica_list}) == replication_factor
    if leaders:
        assert leader_counts(assignment) == dict.fromkeys(racks, partitions // brokers)
    if replicas:
        per_broker = partitions * replication_factor // brokers
        assert replica_counts(assignment) == dict.fromkeys(racks, per_broker)


# Kafka's AdminRackAwareTest rack maps.
SIX_ON_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
SEED_RACKS = {0: "rack0", 1: "rack0", 2: "rack0", 3: "rack1", 4: "rack1", 5: "rack1"}


# ------------------------------------------------------------------------ rack unaware


def test_seed_example_leaders_from_broker_3_followers_next_in_line() -> None:
    # Seed 003: "broker 3 to be Leader partition 0, broker 4 ... partition 1, broker 5 ...
    # partition 2, broker 0 ... partition 3"; "partition 0 replicas will be broker 4 and 5",
    # "partition 1 ... replicas will be broker 5 and broker 0".
    assignment = assign_replicas(plain(*range(6)), 6, 3, start_index=3, next_replica_shift=0)
    assert assignment == {
        0: [3, 4, 5],
        1: [4, 5, 0],
        2: [5, 0, 1],
        3: [0, 1, 2],
        4: [1, 2, 3],
        5: [2, 3, 4],
    }


def test_kafka_admin_test_expected_assignment() -> None:
    # AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixedStartIndex 0; the
    # second lap (partitions 5..9) has the followers shifted by one.
    assignment = assign_replicas(plain(*range(5)), 10, 3, start_index=0)
    assert assignment == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_fixed_start_index_also_fixes_the_shift_as_in_kafka() -> None:
    brokers = plain(*range(6))
    assert assign_replicas(brokers, 12, 3, start_index=3) == assign_replicas(
        brokers, 12, 3, start_index=3, next_replica_shift=3
    )
    assert assign_replicas(brokers, 1, 3, start_index=3) == {0: [3, 1, 2]}


def test_brokers_are_taken_in_id_order() -> None:
    shuffled = plain(4, 0, 3, 1, 2)
    assert assign_replicas(shuffled, 10, 3, start_index=0) == assign_replicas(
        plain(*range(5)), 10, 3, start_index=0
    )


def test_broker_ids_need_not_be_contiguous() -> None:
    assignment = assign_replicas(plain(10, 20, 30), 3, 2, start_index=0)
    assert assignment == {0: [10, 20], 1: [20, 30], 2: [30, 10]}


@pytest.mark.parametrize("start", range(6))
@pytest.mark.parametrize("shift", range(6))
def test_six_brokers_six_partitions_rf3_are_even_for_any_start(start: int, shift: int) -> None:
    assignment = assign_replicas(
        plain(*range(6)), 6, 3, start_index=start, next_replica_shift=shift
    )
    assert sorted(assignment) == list(range(6))
    assert leader_counts(assignment) == dict.fromkeys(range(6), 1)
    assert replica_counts(assignment) == dict.fromkeys(range(6), 3)
    for replicas in assignment.values():
        assert len(set(replicas)) == 3


def test_random_start_is_even_and_reproducible_with_a_seeded_rng() -> None:
    brokers = plain(*range(6))
    for seed in range(20):
        assignment = assign_replicas(brokers, 6, 3, rng=random.Random(seed))
        assert assignment == assign_replicas(brokers, 6, 3, rng=random.Random(seed))
        assert leader_counts(assignment) == dict.fromkeys(range(6), 1)
        assert replica_counts(assignment) == dict.fromkeys(range(6), 3)


def test_random_draws_start_then_shift_like_kafka() -> None:
    draws = random.Random(7)
    start, shift = draws.randrange(6), draws.randrange(6)
    assert assign_replicas(plain(*range(6)), 9, 3, rng=random.Random(7)) == assign_replicas(
        plain(*range(6)), 9, 3, start_index=start, next_replica_shift=shift
    )


def test_first_partition_numbers_the_new_partitions() -> None:
    assignment = assign_replicas(plain(*range(3)), 4, 2, start_index=0, first_partition=5)
    assert sorted(assignment) == [5, 6, 7, 8]


def test_replication_factor_one_is_leaders_only() -> None:
    assert assign_replicas(plain(0), 3, 1, start_index=0) == {0: [0], 1: [0], 2: [0]}


# --------------------------------------------------------------------------- refusals


def test_replication_factor_larger_than_brokers_is_refused() -> None:
    with pytest.raises(PlacementError) as caught:
        assign_replicas(plain(0, 1, 2), 6, 4)
    assert str(caught.value) == "replication factor 4 is larger than the number of live brokers (3)"
    assert caught.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert isinstance(caught.value, ValueError)


def test_no_live_brokers_is_refused() -> None:
    with pytest.raises(PlacementError, match=r"larger than the number of live brokers \(0\)"):
        assign_replicas([], 1, 1)


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1, got 0"),
        (-3, 1, ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1, got -3"),
        (10, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1"),
        (10, 6, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 6 is larger"),
    ],
)
def test_kafka_refuses_bad_counts(
    partitions: int, replication_factor: int, code: ErrorCode, message: str
) -> None:
    with pytest.raises(PlacementError, match=message) as caught:
        assign_replicas(plain(*range(5)), partitions, replication_factor)
    assert caught.value.code is code


def test_broker_listed_twice_is_refused() -> None:
    with pytest.raises(PlacementError, match="brokers listed more than once: 1"):
        assign_replicas(plain(0, 1, 1), 1, 1)


@pytest.mark.parametrize("argument", ["start_index", "next_replica_shift", "first_partition"])
def test_negative_positions_are_refused(argument: str) -> None:
    with pytest.raises(PlacementError, match=f"{argument} must not be negative"):
        assign_replicas(plain(0, 1), 1, 1, **cast(dict[str, Any], {argument: -1}))


def test_some_brokers_without_rack_is_refused() -> None:
    # AdminRackAwareTest.testAssignReplicasToBrokersWithInvalidParameters: broker 4 has no rack.
    brokers = [*racked({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2"}), BrokerSlot(4)]
    with pytest.raises(PlacementError, match="brokers without a rack: 4"):
        assign_replicas(brokers, 10, 5)


def test_some_brokers_without_rack_are_placed_when_told_to_ignore_racks() -> None:
    brokers = [*racked({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2"}), BrokerSlot(4)]
    ignored = assign_replicas(brokers, 10, 3, start_index=0, rack_aware=False)
    assert ignored == assign_replicas(plain(*range(5)), 10, 3, start_index=0)


# -------------------------------------------------------------------------- rack aware


def test_seed_rack_alternated_order() -> None:
    # Seed 003: "broker 0,1,2 in rack 0 and broker 3,4,5 in rack 1 ... Seq order will
    # 0,3,1,4,2,5".
    assert rack_alternated_order(racked(SEED_RACKS)) == [0, 3, 1, 4, 2, 5]


def test_seed_rack_example_assignment() -> None:
    # Derived by hand from Kafka's algorithm (Kafka has no test for this exact map): leaders go
    # round-robin over 0,3,1,4,2,5 from index 0; with shift 0 the followers are the next
    # brokers in that order, which alternate racks, so every partition spans both racks.
    assignment = assign_replicas(racked(SEED_RACKS), 6, 3, start_index=0)
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 4],
        2: [1, 4, 2],
        3: [4, 2, 5],
        4: [2, 5, 0],
        5: [5, 0, 3],
    }
    check_distribution(assignment, SEED_RACKS, 6, 3, rack_aware=False, leaders=True, replicas=True)
    for replicas in assignment.values():
        assert {SEED_RACKS[broker] for broker in replicas} == {"rack0", "rack1"}


def test_kafka_rack_alternated_list_and_assignment() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_order(racked(racks)) == [0, 3, 1, 5, 4, 2]
    without_5 = {broker: rack for broker, rack in racks.items() if broker != 5}
    assert rack_alternated_order(racked(without_5)) == [0, 3, 1, 4, 2]
    assert assign_replicas(racked(racks), 7, 3, start_index=0, first_partition=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the second lap shifts the followers instead of repeating 0,3,1
    }


def test_kafka_assignment_with_rack_aware() -> None:
    # AdminRackAwareTest.testAssignmentWithRackAware: fixed start index 2.
    assignment = assign_replicas(racked(SIX_ON_THREE_RACKS), 6, 3, start_index=2)
    check_distribution(
        assignment, SIX_ON_THREE_RACKS, 6, 3, rack_aware=True, leaders=True, replicas=True
    )


@pytest.mark.parametrize("start", range(6))
@pytest.mark.parametrize("shift", range(6))
def test_kafka_assignment_with_rack_aware_for_every_start(start: int, shift: int) -> None:
    # testAssignmentWithRackAwareWithRandomStartIndex, over every start and shift it can draw.
    assignment = assign_replicas(
        racked(SIX_ON_THREE_RACKS), 6, 3, start_index=start, next_replica_shift=shift
    )
    check_distribution(
        assignment, SIX_ON_THREE_RACKS, 6, 3, rack_aware=True, leaders=True, replicas=True
    )


def test_kafka_rack_aware_with_uneven_replicas() -> None:
    # testAssignmentWithRackAwareWithUnevenReplicas: 13 partitions cannot spread evenly, but
    # every partition still spans three racks.
    assignment = assign_replicas(racked(SIX_ON_THREE_RACKS), 13, 3, start_index=0)
    check_distribution(
        assignment, SIX_ON_THREE_RACKS, 13, 3, rack_aware=True, leaders=False, replicas=False
    )


@pytest.mark.parametrize("seed", range(10))
def test_kafka_rack_aware_with_uneven_racks(seed: int) -> None:
    # testAssignmentWithRackAwareWithUnevenRacks: rack1 has three brokers, rack2 one.
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas(racked(racks), 12, 3, rng=random.Random(seed))
    check_distribution(assignment, racks, 12, 3, rack_aware=True, leaders=True, replicas=False)


@pytest.mark.parametrize("seed", range(10))
def test_kafka_two_replicas_rack_aware(seed: int) -> None:
    # testAssignmentWith2ReplicasRackAware.
    assignment = assign_replicas(racked(SIX_ON_THREE_RACKS), 12, 2, rng=random.Random(seed))
    check_distribution(
        assignment, SIX_ON_THREE_RACKS, 12, 2, rack_aware=True, leaders=True, replicas=True
    )


@pytest.mark.parametrize("seed", range(10))
def test_kafka_rack_aware_expansion(seed: int) -> None:
    # testRackAwareExpansion: brokers 6..11, partitions 12..23.
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas(racked(racks), 12, 2, first_partition=12, rng=random.Random(seed))
    assert sorted(assignment) == list(range(12, 24))
    check_distribution(assignment, racks, 12, 2, rack_aware=True, leaders=True, replicas=True)


@pytest.mark.parametrize("seed", range(10))
def test_kafka_three_brokers_three_racks(seed: int) -> None:
    # testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers.
    racks = {0: "rack1", 1: "rack2", 4: "rack3"}
    assignment = assign_replicas(racked(racks), 3, 2, rng=random.Random(seed))
    check_distribution(assignment, racks, 3, 2, rack_aware=True, leaders=True, replicas=True)


@pytest.mark.parametrize("seed", range(10))
def test_kafka_large_number_of_partitions(seed: int) -> None:
    # testLargeNumberPartitionsAssignment: 12 brokers on 3 racks, 96 partitions.
    racks = {
        0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
        6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3",
    }  # fmt: skip
    assignment = assign_replicas(racked(racks), 96, 3, rng=random.Random(seed))
    check_distribution(assignment, racks, 96, 3, rack_aware=True, leaders=True, replicas=True)


@pytest.mark.parametrize(("replication_factor", "racks_per_partition"), [(5, 3), (2, 2)])
def test_kafka_more_and_fewer_replicas_than_racks(
    replication_factor: int, racks_per_partition: int
) -> None:
    # testMoreReplicasThanRacks / testLessReplicasThanRacks: every rack gets one replica before
    # any rack gets a second; with fewer replicas than racks no rack gets two.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for seed in range(10):
        assignment = assign_replicas(racked(racks), 6, replication_factor, rng=random.Random(seed))
        for replicas in assignment.values():
            assert len(set(replicas)) == len(replicas) == replication_factor
            assert len({racks[broker] for broker in replicas}) == racks_per_partition


def test_kafka_single_rack_is_rack_unaware_placement() -> None:
    # testSingleRack: one rack gives each broker one leader; it is the plain round-robin.
    brokers = racked(dict.fromkeys(range(6), "rack1"))
    for start in range(6):
        assignment = assign_replicas(brokers, 6, 3, start_index=start)
        assert assignment == assign_replicas(plain(*range(6)), 6, 3, start_index=start)
        assert leader_counts(assignment) == dict.fromkeys(range(6), 1)


def test_kafka_skip_broker_with_replica_already_assigned() -> None:
    # testSkipBrokerWithReplicaAlreadyAssigned: 3 racks, RF 4, so after every rack holds one
    # the walk must skip brokers already chosen rather than pick one twice.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racked(racks), 6, 4, start_index=2)
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas) == 4
        assert {racks[broker] for broker in replicas} == {"a", "b", "c"}


def test_rack_aware_false_ignores_complete_racks() -> None:
    ignored = assign_replicas(racked(SIX_ON_THREE_RACKS), 7, 3, start_index=0, rack_aware=False)
    assert ignored == assign_replicas(plain(*range(6)), 7, 3, start_index=0)


# ------------------------------------------------------------------------ added partitions


def test_added_partitions_match_kafka_add_partitions_test() -> None:
    # AddPartitionsTest.testReplicaPlacementAllServers: 4 brokers, partition 0 on [2, 3, 0, 1],
    # grown to 7 partitions; Kafka checks each new leader and replica set.
    added = assign_added_partitions(plain(*range(4)), {0: [2, 3, 0, 1]}, 7)
    assert {p: (replicas[0], set(replicas)) for p, replicas in added.items()} == {
        1: (3, {0, 1, 2, 3}),
        2: (0, {0, 1, 2, 3}),
        3: (1, {0, 1, 2, 3}),
        4: (2, {0, 1, 2, 3}),
        5: (3, {0, 1, 2, 3}),
        6: (0, {0, 1, 2, 3}),
    }
    # testReplicaPlacementPartialServers: partition 0 on [1, 2], grown to 3.
    added = assign_added_partitions(plain(*range(4)), {0: [1, 2]}, 3)
    assert {p: (replicas[0], set(replicas)) for p, replicas in added.items()} == {
        1: (2, {0, 2}),
        2: (3, {1, 3}),
    }


def test_added_partitions_continue_the_creation_round_robin() -> None:
    brokers = plain(*range(6))
    created = assign_replicas(brokers, 3, 3, start_index=4)
    added = assign_added_partitions(brokers, created, 6)
    assert [created[p][0] for p in range(3)] + [added[p][0] for p in range(3, 6)] == [
        4, 5, 0, 1, 2, 3,
    ]  # fmt: skip


def test_added_partitions_leader_gone_starts_at_next_broker() -> None:
    # Partition 0's leader (3) has left: Kafka starts at the first broker with a larger id.
    added = assign_added_partitions(plain(0, 1, 2, 4, 5), {0: [3, 4], 1: [4, 5]}, 3)
    # Start index 3 (broker 4), shift 3: leader at (2 + 3) % 5 = 0, follower at
    # (0 + 1 + 3 % 4) % 5 = 4, i.e. broker 5.
    assert added == {2: [0, 5]}


def test_added_partitions_must_increase() -> None:
    with pytest.raises(PlacementError, match="can only be increased") as caught:
        assign_added_partitions(plain(0, 1), {0: [0, 1], 1: [1, 0]}, 2)
    assert caught.value.code is ErrorCode.INVALID_PARTITIONS


def test_added_partitions_need_partition_0() -> None:
    with pytest.raises(PlacementError, match="partition 0"):
        assign_added_partitions(plain(0, 1), {1: [0, 1]}, 3)


# ---------------------------------------------------------------------- check_assignment


def test_check_assignment_accepts_a_valid_assignment() -> None:
    check_assignment({0: [1, 2], 1: [2, 0], 2: [0, 1]}, {0, 1, 2})
    check_assignment({0: [5]}, [5, 6])


@pytest.mark.parametrize(
    ("assignment", "code", "message"),
    [
        ({}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "lists no partitions"),
        ({0: [0], 2: [1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "numbered consecutively from 0 to 1: missing partitions 1; unexpected partitions 2"),
        ({1: [0]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "missing partitions 0"),
        ({0: [0, 1], 1: []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "partition 1 has an empty replica list"),
        ({0: [0, 1], 1: [1, 2, 0]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         r"partition 1 has 3 replicas \[1, 2, 0\] but partition 0 has 2"),
        ({0: [0, 1], 1: [2, 2]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         r"partition 1 lists broker 2 more than once: \[2, 2\]"),
        ({0: [0, 1], 1: [1, 7]}, ErrorCode.BROKER_NOT_AVAILABLE,
         r"partition 1 names brokers that are not live: 7 \(live brokers: 0, 1, 2\)"),
    ],
)  # fmt: skip
def test_check_assignment_refusals(
    assignment: dict[int, list[int]], code: ErrorCode, message: str
) -> None:
    with pytest.raises(PlacementError, match=message) as caught:
        check_assignment(assignment, {0, 1, 2})
    assert caught.value.code is code


def test_assign_replicas_output_passes_check_assignment() -> None:
    brokers = racked(SIX_ON_THREE_RACKS)
    check_assignment(assign_replicas(brokers, 13, 3, rng=random.Random(1)), range(6))


# ---------------------------------------------------------------------------- properties

broker_ids = st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True)


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    """(broker ids, partitions, replication factor, start index, shift)."""
    ids = draw(broker_ids)
    partitions = draw(st.integers(1, 60))
    replication_factor = draw(st.integers(1, len(ids)))
    start = draw(st.integers(0, 3 * len(ids)))
    shift = draw(st.integers(0, 3 * len(ids)))
    return ids, partitions, replication_factor, start, shift


@given(placements(), st.integers(0, 50))
def test_property_rack_unaware_lists_are_valid_and_leaders_even(
    placement: tuple[list[int], int, int, int, int], first_partition: int
) -> None:
    ids, partitions, replication_factor, start, shift = placement
    assignment = assign_replicas(
        plain(*ids), partitions, replication_factor,
        start_index=start, next_replica_shift=shift, first_partition=first_partition,
    )  # fmt: skip
    assert sorted(assignment) == list(range(first_partition, first_partition + partitions))
    for replicas in assignment.values():
        assert len(replicas) == len(set(replicas)) == replication_factor
        assert set(replicas) <= set(ids)
    # Leaders go round-robin over consecutive partitions: counts differ by at most one.
    counts = [leader_counts(assignment).get(broker, 0) for broker in ids]
    assert max(counts) - min(counts) <= 1
    check_assignment({p - first_partition: replicas for p, replicas in assignment.items()}, ids)


@given(placements(), st.integers(0, 4), st.integers(1, 4))
def test_property_whole_laps_spread_replicas_exactly(
    placement: tuple[list[int], int, int, int, int], lap: int, laps: int
) -> None:
    # A lap is one partition per broker starting at a multiple of the broker count; the shift
    # is constant within it, so each broker leads once and holds exactly RF replicas per lap.
    ids, _, replication_factor, start, shift = placement
    n = len(ids)
    assignment = assign_replicas(
        plain(*ids), laps * n, replication_factor,
        start_index=start, next_replica_shift=shift, first_partition=lap * n,
    )  # fmt: skip
    assert leader_counts(assignment) == dict.fromkeys(ids, laps)
    assert replica_counts(assignment) == dict.fromkeys(ids, laps * replication_factor)


@given(st.integers(2, 9), st.integers(0, 20), st.integers(0, 20))
def test_property_second_replicas_of_one_leader_cover_the_other_brokers(
    n: int, start: int, shift: int
) -> None:
    # Kafka's goal 2: over n - 1 laps the shift takes every value mod n - 1, so the partitions
    # one broker leads have their second replica on each other broker exactly once.
    assignment = assign_replicas(
        plain(*range(n)), n * (n - 1), 2, start_index=start, next_replica_shift=shift
    )
    for leader in range(n):
        seconds = [replicas[1] for replicas in assignment.values() if replicas[0] == leader]
        assert sorted(seconds) == [broker for broker in range(n) if broker != leader]


@st.composite
def racked_placements(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int, int]:
    ids = draw(broker_ids)
    racks = {broker: draw(st.sampled_from("abcd")) for broker in ids}
    partitions = draw(st.integers(1, 60))
    replication_factor = draw(st.integers(1, len(ids)))
    start = draw(st.integers(0, 3 * len(ids)))
    shift = draw(st.integers(0, 3 * len(ids)))
    return racks, partitions, replication_factor, start, shift


@given(racked_placements())
def test_property_rack_aware_spreads_racks_and_leaders(
    placement: tuple[dict[int, str], int, int, int, int],
) -> None:
    racks, partitions, replication_factor, start, shift = placement
    assignment = assign_replicas(
        racked(racks), partitions, replication_factor,
        start_index=start, next_replica_shift=shift,
    )  # fmt: skip
    rack_count = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == len(set(replicas)) == replication_factor
        assert set(replicas) <= set(racks)
        # Every rack gets a replica before any rack gets a second one (after that the walk
        # takes any unused broker, so racks may then hold unequal numbers).
        assert len({racks[broker] for broker in replicas}) == min(replication_factor, rack_count)
    counts = [leader_counts(assignment).get(broker, 0) for broker in racks]
    assert max(counts) - min(counts) <= 1


@given(racked_placements())
def test_property_ignoring_racks_is_rack_unaware_placement(
    placement: tuple[dict[int, str], int, int, int, int],
) -> None:
    racks, partitions, replication_factor, start, shift = placement
    unaware = assign_replicas(
        plain(*racks), partitions, replication_factor, start_index=start, next_replica_shift=shift
    )
    assert unaware == assign_replicas(
        racked(racks), partitions, replication_factor,
        start_index=start, next_replica_shift=shift, rack_aware=False,
    )  # fmt: skip
    one_rack = {broker: "only" for broker in racks}
    assert unaware == assign_replicas(
        racked(one_rack), partitions, replication_factor,
        start_index=start, next_replica_shift=shift,
    )  # fmt: skip
