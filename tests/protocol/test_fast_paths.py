"""The codec's fast paths give exactly what its plain, one-field-at-a-time paths give: the
producer's ``encode_records`` the bytes of ``encode_message`` per message, and the consumer's
``decode_messages`` (columnar runs of same-shaped entries) the messages ``read_entries`` reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messageset import (
    TIMESTAMP_TYPE_BIT,
    Message,
    decode_messages,
    encode_message,
    encode_records,
    read_entries,
)

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
