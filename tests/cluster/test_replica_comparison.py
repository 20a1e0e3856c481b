"""The comparison behind replica verification (tooling/replica_comparison.py), on stored bytes
with each kind of difference planted: a flipped byte, a missing tail, a different message
(another CRC), shifted offsets, a malformed entry -- and copies that agree, fed whole or a
few bytes at a time; and how often a long run reports its progress."""

from __future__ import annotations

import pytest

from protocol.compression import Codec
from protocol.messageset import LOG_OVERHEAD, encode_message_set
from tooling.replica_comparison import (
    DifferenceKind,
    PartitionComparison,
    ReplicaCopy,
    compare_message_sets,
)
from tooling.replica_verification import Progress, ProgressPacer

pytestmark = pytest.mark.timeout(30)

#: the first entry's size: offset and size fields, then the rest of a v1 message of
#: key None and a 6-byte value ("m-0000")
ENTRY = LOG_OVERHEAD + 4 + 1 + 1 + 8 + 4 + 4 + 6


def _log(n: int, *, start: int = 0, prefix: str = "m") -> bytes:
    """Entries ``start`` .. ``start + n - 1``, one message each, values ``m-0000``..."""
    return encode_message_set([(None, f"{prefix}-{i:04d}".encode(), 1_000 + i)
                               for i in range(start, start + n)], base_offset=start)


def _flip(data: bytes, position: int) -> bytes:
    damaged = bytearray(data)
    damaged[position] ^= 0x01
    return bytes(damaged)


def test_identical_copies_agree_entry_for_entry() -> None:
    log = _log(10)
    comparison = compare_message_sets({0: log, 1: log, 2: log}, end=10, reference=0)
    assert comparison.difference is None
    assert comparison.compared == 10
    assert comparison.done


def test_a_flipped_byte_in_a_message_body_is_a_bytes_difference_and_names_the_damaged_copy(
) -> None:
    log = _log(10)
    at = 4 * ENTRY + ENTRY - 1  # the last byte of the value of offset 4
    comparison = compare_message_sets({0: log, 1: log, 2: _flip(log, at)}, end=10, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        4, DifferenceKind.BYTES, (0, 2))
    assert f"from byte {ENTRY - 1} of the entry" in difference.detail
    assert "broker 0 " in difference.detail and "holds" in difference.detail
    assert "broker 2 " in difference.detail and "FAILS over its bytes" in difference.detail
    assert comparison.compared == 4


def test_a_missing_tail_is_reported_at_the_first_offset_the_short_copy_lacks() -> None:
    log = _log(10)
    short = log[:7 * ENTRY]
    comparison = compare_message_sets({0: log, 1: short}, end=10, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        7, DifferenceKind.MISSING, (0, 1))
    assert "broker 1 has no entry at offset 7" in difference.detail
    # a partial last entry is no entry either
    cut = compare_message_sets({0: log, 1: log[:7 * ENTRY + 5]}, end=10, reference=0)
    assert cut.difference is not None and cut.difference.offset == 7


def test_the_reference_missing_entries_names_the_copies_that_have_them() -> None:
    log = _log(6)
    comparison = compare_message_sets({0: log[:3 * ENTRY], 1: log, 2: log}, end=6, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        3, DifferenceKind.MISSING, (0, 1, 2))
    assert "broker 0 has no entry at offset 3, where brokers 1,2 have one" in difference.detail


def test_a_different_message_at_the_same_offset_is_a_crc_difference() -> None:
    log = _log(10)
    other = _log(5) + _log(5, start=5, prefix="x")
    comparison = compare_message_sets({0: log, 1: other}, end=10, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        5, DifferenceKind.CRC, (0, 1))
    assert "the stored CRCs differ" in difference.detail
    assert difference.detail.count("holds") == 2  # both are whole messages, just different


def test_differing_offsets_are_an_offset_difference_at_the_lower_one() -> None:
    log = _log(6)
    # the same six messages, the last three renumbered from 4: a gap where offset 3 was
    shifted = log[:3 * ENTRY] + encode_message_set(
        [(None, f"m-{i:04d}".encode(), 1_000 + i) for i in range(3, 6)], base_offset=4)
    comparison = compare_message_sets({0: log, 1: shifted}, end=10, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        3, DifferenceKind.OFFSET, (0, 1))
    assert "broker 0 offset 3, broker 1 offset 4" in difference.detail


def test_a_malformed_entry_is_reported_where_the_others_go_on() -> None:
    log = _log(5)
    damaged = bytearray(log)
    damaged[2 * ENTRY + 8:2 * ENTRY + 12] = (7).to_bytes(4, "big")  # a size too small
    comparison = compare_message_sets({0: log, 1: bytes(damaged)}, end=5, reference=0)
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        2, DifferenceKind.MALFORMED, (0, 1))
    assert "below the minimum" in difference.detail


def test_a_damaged_offset_field_is_a_malformed_copy_not_a_short_one() -> None:
    log = _log(10)
    for damaged_offset in (2, 1 << 40):  # below the one before it, or past the range
        damaged = bytearray(log)
        damaged[5 * ENTRY:5 * ENTRY + 8] = damaged_offset.to_bytes(8, "big")
        comparison = compare_message_sets({0: log, 1: bytes(damaged)}, end=10, reference=0)
        difference = comparison.difference
        assert difference is not None
        assert (difference.offset, difference.kind, difference.brokers) == (
            5, DifferenceKind.MALFORMED, (0, 1)), difference
        assert f"offset {damaged_offset}" in difference.detail
        assert comparison.compared == 5


def test_only_the_range_asked_for_is_compared() -> None:
    log = _log(10)
    # copies that differ at offset 8 agree below 8, and from 3 on the first entries are skipped
    other = _log(8) + _log(2, start=8, prefix="x")
    below = compare_message_sets({0: log, 1: other}, start=3, end=8, reference=0)
    assert below.difference is None and below.compared == 5
    assert compare_message_sets({0: log, 1: other}, end=9).difference is not None


def test_a_compressed_wrapper_is_one_entry_compared_as_stored() -> None:
    wrapped = encode_message_set([(None, b"a", 1), (None, b"b", 2), (None, b"c", 3)],
                                 codec=Codec.GZIP)
    same = compare_message_sets({0: wrapped, 1: wrapped}, end=3)
    assert same.difference is None and same.compared == 1
    flipped = compare_message_sets({0: wrapped, 1: _flip(wrapped, len(wrapped) - 3)}, end=3)
    assert flipped.difference is not None
    assert (flipped.difference.offset, flipped.difference.kind) == (2, DifferenceKind.BYTES)


def test_copies_fed_in_chunks_are_compared_as_they_come() -> None:
    """What verification does: each copy read a chunk at a time, compared as the chunks come,
    a chunk too small for one entry read again larger."""
    log = _log(20)
    damaged = _flip(log, 13 * ENTRY + ENTRY - 2)
    copies = {b: ReplicaCopy(b, 0, 20) for b in (0, 1, 2)}
    stored = {0: log, 1: log, 2: damaged}
    comparison = PartitionComparison(copies, reference=0)
    sizes = dict.fromkeys(copies, 10)  # smaller than an entry at first
    reads = 0
    while not comparison.done:
        for broker_id in comparison.wanted():
            copy = copies[broker_id]
            position = copy.next_offset * ENTRY
            reads += 1
            if not copy.feed(stored[broker_id][position:position + sizes[broker_id]]):
                sizes[broker_id] *= 2
        comparison.step()
        assert reads < 200, "the comparison did not progress"
    difference = comparison.difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        13, DifferenceKind.BYTES, (0, 2))
    assert comparison.compared == 13


def test_a_copy_dropped_midway_leaves_the_others_compared() -> None:
    log = _log(4)
    copies = {b: ReplicaCopy(b, 0, 4) for b in (0, 1, 2)}
    comparison = PartitionComparison(copies, reference=0)
    copies[1].feed(log)
    copies[2].feed(log)
    comparison.drop(0)  # the leader stopped answering: broker 1 is the reference now
    assert comparison.reference == 1
    copies[1].feed(b"")
    copies[2].feed(b"")
    comparison.step()
    assert comparison.done and comparison.difference is None and comparison.compared == 4


def test_progress_is_reported_at_most_once_an_interval() -> None:
    now = [0.0]
    reported: list[Progress] = []
    pacer = ProgressPacer(reported.append, interval=2.0, clock=lambda: now[0])
    steps = [Progress(1, 3, "t", 0, offset, 100) for offset in range(0, 100, 10)]
    for i, step in enumerate(steps):
        now[0] = i * 0.5  # a read every half second (of the fake clock)
        pacer(step)
    assert [p.offset for p in reported] == [40, 80]
