"""When a producer batch may go out: linger, size, flush, busy partitions, retry backoff."""

from __future__ import annotations

from client.accumulator import RecordAccumulator
from client.records import TopicPartition
from protocol.messageset import HEADER_V1

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
SIZE = HEADER_V1 + 100  # one message with a null key and a 100-byte value


def accumulator(batch_bytes: int = 10 * SIZE, linger_ms: float = 10) -> RecordAccumulator:
    return RecordAccumulator(batch_bytes=batch_bytes, linger_ms=linger_ms, drive=lambda t: None)


def add(acc: RecordAccumulator, now: float, tp: TopicPartition = TP, n: int = 1) -> int:
    """Append ``n`` messages; return how many batches the last one's queue now holds."""
    for _ in range(n):
        acc.append(tp, None, b"x" * 100, 0, SIZE, now)
    return acc.queued_batches()


def test_a_batch_waits_for_linger_then_becomes_sendable() -> None:
    acc = accumulator(linger_ms=10)
    add(acc, now=100.0)
    assert acc.sendable(100.009, flushing=False, busy=set()) == []
    assert acc.next_deadline(set()) == 100.0 + 0.010
    assert acc.sendable(100.010, flushing=False, busy=set()) == [TP]


def test_with_linger_zero_a_batch_is_sendable_at_once() -> None:
    acc = accumulator(linger_ms=0)
    add(acc, now=5.0)
    assert acc.sendable(5.0, flushing=False, busy=set()) == [TP]


def test_a_full_batch_is_sendable_before_its_linger() -> None:
    acc = accumulator(batch_bytes=3 * SIZE, linger_ms=1000)
    assert add(acc, 0.0, n=2) == 1
    assert acc.append_if_room(TP, None, b"x" * 100, 0, SIZE) is not None
    assert acc.append_if_room(TP, None, b"x" * 100, 0, SIZE) is None  # full: nothing changes
    assert acc.buffered_bytes == 3 * SIZE
    assert acc.sendable(0.0, flushing=False, busy=set()) == [TP]
    assert add(acc, 0.0) == 2  # the fourth message opens a second batch


def test_flush_makes_every_batch_sendable() -> None:
    acc = accumulator(linger_ms=1000)
    add(acc, 0.0, TP)
    add(acc, 0.0, OTHER)
    assert sorted(acc.sendable(0.0, flushing=True, busy=set())) == [TP, OTHER]


def test_a_busy_partition_is_never_sendable() -> None:
    acc = accumulator(linger_ms=0)
    add(acc, 0.0)
    assert acc.sendable(1.0, flushing=True, busy={TP}) == []
    assert acc.next_deadline({TP}) is None


def test_drain_takes_whole_batches_within_the_budget_in_order() -> None:
    acc = accumulator(batch_bytes=2 * SIZE, linger_ms=0)
    for i in range(6):
        acc.append(TP, None, b"%099d" % i, 0, SIZE, 0.0)
    batches = acc.drain(TP, max_bytes=4 * SIZE, now=0.0, flushing=False)
    assert [len(b.records) for b in batches] == [2, 2]
    assert batches[0].records[0][1] == b"%099d" % 0
    assert acc.queued_batches() == 1
    # At least one batch, even when it alone exceeds the budget.
    assert len(acc.drain(TP, max_bytes=1, now=0.0, flushing=False)) == 1


def test_drain_leaves_an_open_batch_that_is_not_due() -> None:
    acc = accumulator(batch_bytes=2 * SIZE, linger_ms=10)
    add(acc, 0.0, n=3)  # one full batch and an open one with a single message
    assert len(acc.drain(TP, max_bytes=100 * SIZE, now=0.001, flushing=False)) == 1
    assert acc.queued_batches() == 1
    add(acc, 0.0, n=2)
    assert len(acc.drain(TP, max_bytes=100 * SIZE, now=0.001, flushing=True)) == 2


def test_a_retried_batch_goes_back_to_the_head_and_waits_out_its_backoff() -> None:
    acc = accumulator(batch_bytes=SIZE, linger_ms=0)
    add(acc, 0.0, n=3)
    first = acc.drain(TP, max_bytes=SIZE, now=0.0, flushing=False)
    first[0].attempts = 1
    acc.reenqueue(first, retry_at=2.0)
    assert acc.sendable(1.0, flushing=True, busy=set()) == []
    assert acc.next_deadline(set()) == 2.0
    assert acc.sendable(2.0, flushing=False, busy=set()) == [TP]
    # Still first in line.
    assert acc.drain(TP, max_bytes=10 * SIZE, now=0.0, flushing=False)[0] is first[0]


def test_new_messages_never_join_a_batch_that_was_already_sent() -> None:
    acc = accumulator(linger_ms=0)
    add(acc, 0.0)
    batches = acc.drain(TP, max_bytes=10 * SIZE, now=0.0, flushing=False)
    batches[0].attempts = 1
    acc.reenqueue(batches, retry_at=0.0)
    assert acc.append_if_room(TP, None, b"x", 0, SIZE) is None
    assert add(acc, 0.0) == 2
    assert len(batches[0].records) == 1


def test_expired_batches_are_removed() -> None:
    acc = accumulator(linger_ms=1000)
    add(acc, 0.0, TP)
    add(acc, 5.0, OTHER)
    expired = acc.expired(now=10.0, timeout=8.0)
    assert [b.tp for b in expired] == [TP]
    assert acc.queued_batches() == 1


def test_buffered_bytes_count_until_released() -> None:
    acc = accumulator(linger_ms=0)
    add(acc, 0.0, n=3)
    assert acc.buffered_bytes == 3 * SIZE
    acc.release(acc.drain(TP, max_bytes=100 * SIZE, now=0.0, flushing=False))
    assert acc.buffered_bytes == 0


def test_only_partitions_with_queued_batches_are_held() -> None:
    """Every I/O round walks the queues: partitions written to once and drained (or expired)
    must not stay in them, or each round costs O(every partition ever used)."""
    acc = accumulator(linger_ms=0)
    tps = [TopicPartition(f"topic-{i}", 0) for i in range(500)]
    for tp in tps:
        add(acc, 0.0, tp)
        acc.release(acc.drain(tp, max_bytes=10 * SIZE, now=0.0, flushing=False))
    add(acc, 0.0, OTHER)
    add(acc, 0.0, TP)
    acc.expired(now=10.0, timeout=1.0)
    assert acc._queues == {}
    assert acc.queued_batches() == 0
    add(acc, 20.0, TP)
    assert acc.sendable(20.0, flushing=False, busy=set()) == [TP]
    assert acc.queued_batches() == 1
