"""What a mirror may commit: only offsets the target acknowledged, in order (sans-IO)."""

from __future__ import annotations

import pytest

from client.records import TopicPartition
from tooling.mirror.acks import Acknowledgements, RefusedSend

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)


class Outcome:
    def __init__(self) -> None:
        self.state = "pending"
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self.state != "pending"

    def failed(self) -> bool:
        return self.state == "failed"

    def exception(self) -> BaseException | None:
        return self.error

    def ack(self) -> Outcome:
        self.state = "ok"
        return self

    def fail(self, error: BaseException) -> Outcome:
        self.state, self.error = "failed", error
        return self


def test_nothing_is_committable_before_the_target_answers() -> None:
    acks = Acknowledgements()
    acks.sent(TP, 0, 100, [Outcome()])
    assert acks.settle() == 0
    assert acks.to_commit() == {} and acks.waiting


def test_the_committable_offset_stops_at_the_first_unanswered_send() -> None:
    acks = Acknowledgements()
    first, second, third = Outcome(), Outcome(), Outcome()
    acks.sent(TP, 0, 100, [first])
    acks.sent(TP, 100, 250, [second])
    acks.sent(TP, 250, 300, [third])
    third.ack()  # answered out of order cannot happen per partition, but must not count
    first.ack()
    assert acks.settle() == 100
    assert acks.to_commit() == {TP: 100}
    second.ack()
    assert acks.settle() == 200
    assert acks.to_commit() == {TP: 300} and not acks.waiting


def test_a_run_of_messages_counts_once_its_last_is_answered() -> None:
    acks = Acknowledgements()
    run = [Outcome() for _ in range(3)]
    acks.sent(TP, 10, 13, run)
    run[0].ack()
    run[1].ack()
    assert acks.settle() == 0
    run[2].ack()
    assert acks.settle() == 3 and acks.acknowledged(TP) == 13


def test_a_refused_send_keeps_the_offsets_before_it_committable_and_not_after() -> None:
    acks = Acknowledgements()
    acks.sent(TP, 0, 5, [Outcome().ack()])
    refused = Outcome().fail(RuntimeError("record too large"))
    acks.sent(TP, 5, 9, [refused])
    acks.sent(TP, 9, 12, [Outcome().ack()])
    with pytest.raises(RefusedSend, match="orders-0: record too large") as raised:
        acks.settle()
    assert raised.value.tp == TP
    assert acks.to_commit() == {TP: 5}
    with pytest.raises(RefusedSend):  # still there: never skipped
        acks.settle()


def test_a_commit_is_not_repeated_and_forgotten_partitions_start_anew() -> None:
    acks = Acknowledgements()
    acks.sent(TP, 0, 5, [Outcome().ack()])
    acks.sent(OTHER, 0, 7, [Outcome().ack()])
    acks.settle()
    assert acks.to_commit([OTHER]) == {OTHER: 7}
    acks.committed({TP: 5, OTHER: 7})
    assert acks.to_commit() == {}
    acks.forget([TP])
    assert acks.acknowledged(TP) is None and acks.acknowledged(OTHER) == 7


def test_a_partition_is_unanswered_until_its_sends_settle() -> None:
    acks = Acknowledgements()
    assert not acks.unanswered(TP)
    outcome = Outcome()
    acks.sent(TP, 0, 5, [outcome])
    assert acks.unanswered(TP) and not acks.unanswered(OTHER)
    outcome.ack()
    assert acks.unanswered(TP)  # answered, not settled yet
    assert acks.settle() == 5
    assert not acks.unanswered(TP)
