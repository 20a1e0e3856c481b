"""Assignments hold one shared ``TopicPartition`` per partition, whichever group or loaded
record they come from: the coordinator's memory per member stays small (benchmarks/scale.py)."""

from __future__ import annotations

import pytest

from coordinator.assignors import (
    AssignmentStrategy,
    RangeStrategy,
    RoundRobinStrategy,
    StickyStrategy,
    TopicPartition,
)
from coordinator.offsets_topic import (
    GroupValue,
    MemberValue,
    decode_group_value,
    encode_group_value,
)


@pytest.mark.parametrize("strategy", [RangeStrategy(), RoundRobinStrategy(), StickyStrategy()])
def test_two_groups_assignments_share_their_partitions(strategy: AssignmentStrategy) -> None:
    members = {f"m{i}": ["t"] for i in range(3)}
    first = strategy.assign(members, {"t": 12}, {})
    second = strategy.assign(dict(members), {"t": 12}, {})
    for member, owned in first.items():
        assert owned == second[member]
        assert all(a is b for a, b in zip(owned, second[member], strict=True))


def test_a_loaded_assignment_shares_the_assignors_partitions() -> None:
    (assigned,) = RangeStrategy().assign({"m": ["t"]}, {"t": 4}, {}).values()
    stored = GroupValue(3, "range", 0, (MemberValue("m", "c", "h", 10, 10, ("t",), assigned),))
    (loaded,) = decode_group_value(encode_group_value(stored)).members
    assert loaded.assignment == assigned == tuple(TopicPartition("t", p) for p in range(4))
    assert all(a is b for a, b in zip(loaded.assignment, assigned, strict=True))
