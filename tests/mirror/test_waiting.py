"""Sets held while their partition's send is unanswered go joined, in order (sans-IO)."""

from __future__ import annotations

from client.message_sets import FetchedSet
from client.records import TopicPartition
from protocol.compression import Codec
from protocol.messageset import decode_messages, encode_message_set
from tooling.mirror.waiting import WaitingSets, join

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)


def fetched(tp: TopicPartition, offset: int, count: int, codec: Codec = Codec.NONE
            ) -> FetchedSet:
    """``count`` stored messages ``b"<offset>"`` (six digits) from ``offset`` on, as a fetch
    returns them."""
    records = [(None, value(offset + i), 1_000) for i in range(count)]
    data = encode_message_set(records, codec=codec, base_offset=offset)
    return FetchedSet(tp.topic, tp.partition, offset, offset + count, data)


def value(offset: int) -> bytes:
    return f"{offset:06d}".encode()


def test_joined_sets_are_one_stored_set_of_every_message_in_order() -> None:
    sets = [fetched(TP, 0, 3), fetched(TP, 3, 2, Codec.GZIP), fetched(TP, 5, 4)]
    joined = join(sets)
    assert (joined.offset, joined.next_offset) == (0, 9)
    messages, used = decode_messages(joined.data)
    assert used == len(joined.data)
    assert [(m.offset, m.value) for m in messages] == [(i, value(i)) for i in range(9)]


def test_held_sets_go_as_few_as_the_size_allows_in_order_per_partition() -> None:
    sets = [fetched(TP, 10 * i, 10) for i in range(5)]
    size = len(sets[0].data)
    waiting = WaitingSets(join_bytes=2 * size)
    for s in sets:
        waiting.add(s)
    waiting.add(fetched(OTHER, 0, 1))
    assert TP in waiting and OTHER in waiting
    assert waiting.bytes == 5 * size + len(fetched(OTHER, 0, 1).data)

    taken = waiting.take(TP)
    assert [(s.offset, s.next_offset) for s in taken] == [(0, 20), (20, 40), (40, 50)]
    assert b"".join(s.data for s in taken) == b"".join(s.data for s in sets)
    assert TP not in waiting and list(waiting) == [OTHER]
    assert waiting.bytes == len(fetched(OTHER, 0, 1).data)
    assert waiting.take(TP) == []


def test_a_set_larger_than_the_join_size_goes_alone() -> None:
    small, large = fetched(TP, 0, 1), fetched(TP, 1, 50)
    waiting = WaitingSets(join_bytes=len(large.data) - 1)
    for s in (small, large, fetched(TP, 51, 1)):
        waiting.add(s)
    assert [(s.offset, s.next_offset) for s in waiting.take(TP)] == [(0, 1), (1, 51), (51, 52)]
    assert waiting.bytes == 0
