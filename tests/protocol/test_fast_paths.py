"""The codec's fast paths give exactly what its plain, one-field-at-a-time paths give: the
producer's ``encode_records`` the bytes of ``encode_message`` per message, and the consumer's
``decode_messages`` / ``decode_as`` (columnar runs of same-shaped entries, their CRCs checked
in one pass) the messages ``read_entries`` reads, and the same damage."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    TIMESTAMP_TYPE_BIT,
    Message,
    decode_as,
    decode_messages,
    encode_message,
    encode_records,
    read_entries,
)
from tests.log.message_sets import message_sets

# few distinct lengths and timestamps, so runs of same-shaped messages (the fast paths' case)
# come up as often as changes between them
payloads = st.one_of(st.none(), st.sampled_from([0, 1, 5, 100]).flatmap(
    lambda n: st.binary(min_size=n, max_size=n)))
timestamps = st.one_of(st.sampled_from([-1, 0, 1_700_000_000_000]), st.integers(-1, 2**62))
records = st.lists(st.tuples(payloads, payloads, timestamps), max_size=60)


@settings(max_examples=300)
@given(records, st.integers(0, 2**40), st.sampled_from([0, TIMESTAMP_TYPE_BIT]))
def test_encode_records_writes_what_encode_message_writes(
    batch: list[tuple[bytes | None, bytes | None, int]], base: int, attributes: int,
) -> None:
    plain = b"".join(
        encode_message(base + i, key, value, timestamp, attributes=attributes)
        for i, (key, value, timestamp) in enumerate(batch)
    )
    assert encode_records(batch, base_offset=base, attributes=attributes) == plain


@settings(max_examples=300)
@given(records, st.integers(0, 2**40), st.sampled_from([0, TIMESTAMP_TYPE_BIT]),
       st.integers(0, 40))
def test_decode_messages_reads_what_read_entries_reads(
    batch: list[tuple[bytes | None, bytes | None, int]], base: int, attributes: int, cut: int,
) -> None:
    data = encode_records(batch, base_offset=base, attributes=attributes)
    data = data[: max(0, len(data) - cut)]  # a fetch may end inside a message
    entries, whole = read_entries(data)
    plain = [
        Message(e.offset, e.timestamp, int(e.timestamp_type), e.key, e.value) for e in entries
    ]
    for check_crcs in (True, False):
        assert decode_messages(data, verify_crc=check_crcs) == (plain, whole)


class Tagged(NamedTuple):
    """A record type with fields before the message's, as the consumer's records have."""

    source: str
    part: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None


@settings(max_examples=300)
@given(records, st.integers(0, 2**40), st.sampled_from([0, TIMESTAMP_TYPE_BIT]),
       st.integers(0, 40), st.booleans())
def test_decode_as_builds_the_messages_decode_messages_reads(
    batch: list[tuple[bytes | None, bytes | None, int]], base: int, attributes: int, cut: int,
    check_crcs: bool,
) -> None:
    data = encode_records(batch, base_offset=base, attributes=attributes)
    data = data[: max(0, len(data) - cut)]
    messages, whole = decode_messages(data, verify_crc=check_crcs)
    tagged, tagged_whole = decode_as(Tagged, ("t", 3), data, verify_crc=check_crcs)
    assert tagged_whole == whole
    assert all(type(t) is Tagged for t in tagged)
    assert tagged == [Tagged("t", 3, *m) for m in messages]


class Headed(NamedTuple):
    """A record type with fields after the message's too, as the consumer's records have."""

    source: str
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    note: str | None


@settings(max_examples=200)
@given(message_sets, st.booleans())
def test_decode_as_puts_the_suffix_after_every_message(data: bytes, check_crcs: bool) -> None:
    # plain runs, v0 messages and wrappers of both magics: every path that builds a record
    try:
        messages, whole = decode_messages(data, verify_crc=check_crcs)
    except MessageFormatError as exc:
        with pytest.raises(type(exc)):
            decode_as(Headed, ("t",), data, verify_crc=check_crcs, suffix=((), None))
        return
    headed, headed_whole = decode_as(Headed, ("t",), data, verify_crc=check_crcs,
                                     suffix=((), None))
    assert headed_whole == whole
    assert all(type(h) is Headed for h in headed)
    assert headed == [Headed("t", *m, (), None) for m in messages]


# long runs of one shape, so the biggest chunks (and their one-pass CRC check) are used
shapes = st.tuples(st.sampled_from([None, b"", b"key"]), st.sampled_from([0, 7, 100]))


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 2600), st.data())
def test_damage_anywhere_in_a_long_run_is_named_at_its_entry(
    shape: tuple[bytes | None, int], count: int, data: st.DataObject
) -> None:
    key, size = shape
    batch = [(key, bytes([i % 251]) * size, 1_700_000_000_000 + i) for i in range(count)]
    raw = bytearray(encode_records(batch, base_offset=1_000))
    stride = len(raw) // count
    damaged = sorted(data.draw(st.sets(st.integers(0, count - 1), min_size=1, max_size=3)))
    for index in damaged:
        # anywhere the entry's CRC covers, or the stored CRC itself
        at = index * stride + data.draw(st.integers(12, stride - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
    first = damaged[0]
    assert decode_messages(bytes(raw[: first * stride]))[0] == decode_messages(
        encode_records(batch[:first], base_offset=1_000))[0]
    with pytest.raises(CorruptMessageError) as caught:
        decode_messages(bytes(raw))
    assert caught.value.offset == 1_000 + first
