"""The controller's events (``broker.cluster.controller_events``): one frozen value per kind,
carrying exactly its handler's data, and every kind handled."""

from __future__ import annotations

import dataclasses

import pytest

from broker.cluster import controller
from broker.cluster.controller_events import (
    EVENT_KINDS,
    ControlledShutdown,
    DeleteTopics,
    PreferredElection,
    Reassign,
    ReplicaDeleted,
    Resign,
)


def test_every_kind_is_a_frozen_value_with_a_handler() -> None:
    assert len(EVENT_KINDS) == 13
    for kind in EVENT_KINDS:
        assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen, kind  # type: ignore[attr-defined]
    # Resign ends the reign in the queue's loop itself; every other kind has one handler
    assert set(controller._HANDLERS) == set(EVENT_KINDS) - {Resign}


def test_events_carry_typed_data_and_compare_by_value() -> None:
    assert ReplicaDeleted(1, (("t", 0),)) == ReplicaDeleted(1, (("t", 0),))
    assert {DeleteTopics(("a", "b")), DeleteTopics(("a", "b"))} == {DeleteTopics(("a", "b"))}
    assert PreferredElection().partitions is None
    event = Reassign(((("t", 0), (1, 2)),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.partitions = ()  # type: ignore[misc]
    assert ControlledShutdown(3).broker_id == 3
