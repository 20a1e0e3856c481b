"""GroupView's timeline and its disconnected snapshots, against a scripted admin."""

from __future__ import annotations

from typing import Any

from client.errors import BrokerConnectionError
from client.group_admin import GroupDescription, MemberDescription, PartitionLag
from client.group_view import GroupView, member_name
from client.metadata import BrokerInfo
from client.records import TopicPartition
from protocol.errors import GroupIdNotFoundError

COORDINATOR = BrokerInfo(0, "127.0.0.1", 9092)


def described(state: str, generation: int, *members: str) -> GroupDescription:
    return GroupDescription(
        "g", state, "range", generation, COORDINATOR,
        tuple(MemberDescription(f"g-{m}-0000", "c", "h", 10_000, ("t",), ()) for m in members))


class ScriptedAdmin:
    """Answers describe_group from a list, one answer (or exception) per call."""

    def __init__(self, *answers: GroupDescription | Exception) -> None:
        self.answers = list(answers)

    def describe_group(self, group_id: str) -> GroupDescription:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def group_lag(self, group: GroupDescription) -> list[PartitionLag]:
        return [PartitionLag(TopicPartition("t", 0), None, None, 5)]


def view_of(*answers: GroupDescription | Exception) -> GroupView:
    admin: Any = ScriptedAdmin(*answers)
    return GroupView(admin, "g")


def test_the_timeline_names_who_joined_and_left() -> None:
    view = view_of(
        described("Steady", 1, "aaaa"),
        described("Steady", 1, "aaaa"),
        described("PrepareRebalance", 1, "aaaa"),
        described("Steady", 2, "aaaa", "bbbb"),
        described("PrepareRebalance", 2, "aaaa"),
        described("Steady", 3, "aaaa"),
    )
    changed = [view.poll() for _ in range(6)]
    assert changed == [True, False, True, True, True, True]
    texts = [e.text().split(" ", 1)[1] for e in view.timeline]
    assert texts == ["Steady gen 1", "PrepareRebalance", "Steady gen 2 (member bbbb joined)",
                     "PrepareRebalance (member bbbb left)", "Steady gen 3"]


def test_a_broker_away_keeps_the_last_answer_and_stays_off_the_timeline() -> None:
    view = view_of(
        described("Steady", 1, "aaaa"),
        BrokerConnectionError("no broker answered"),
        described("Steady", 1, "aaaa"),
        GroupIdNotFoundError("deleted"),
    )
    view.poll()
    assert view.poll()
    snapshot = view.snapshot
    assert snapshot is not None and snapshot.disconnected
    assert snapshot.state == "disconnected"
    assert snapshot.group == described("Steady", 1, "aaaa") and snapshot.total_lag == 0
    assert "no broker answered" in str(snapshot.error)
    assert view.poll() and view.snapshot is not None and view.snapshot.state == "Steady"
    assert view.poll() and view.snapshot is not None and view.snapshot.missing
    assert view.snapshot.state == "none"
    assert [e.state for e in view.timeline] == ["Steady"]


def test_member_names_drop_the_group_prefix() -> None:
    assert member_name("g", "g-0f3a9c1e-1111-2222") == "0f3a9c1e"
    assert member_name("g", "other") == "other"
