"""count_messages checks a wrapper as open_wrapper does, without renumbering its messages: the
same count for a good wrapper, the same error for a bad one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import Codec, compress
from protocol.errors import MessageFormatError
from protocol.messageset import (
    count_messages,
    encode_message,
    encode_message_set,
    encode_records,
    open_wrapper,
    read_entries,
)

WRAPPING = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
records = st.lists(
    st.tuples(st.sampled_from([None, b"k"]), st.sampled_from([None, b"v" * 9]), st.just(1)),
    min_size=1,
    max_size=30,
)


def outcome(count: Any, wrapper: Any) -> Any:
    try:
        return count(wrapper)
    except MessageFormatError as exc:
        return type(exc), str(exc)


@settings(max_examples=300)
@given(
    records=records,
    codec=st.sampled_from(WRAPPING),
    nested=st.booleans(),
    flip=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_count_messages_agrees_with_open_wrapper(
    records: list[tuple[bytes | None, bytes | None, int]],
    codec: Codec,
    nested: bool,
    flip: int | None,
) -> None:
    inner = bytearray(
        encode_message_set(records, codec=codec) if nested else encode_records(records)
    )
    if flip is not None:
        inner[flip % len(inner)] ^= 0x10
    wrapper = encode_message(9, None, compress(codec, bytes(inner)), 1, attributes=int(codec))
    (entry,), _ = read_entries(wrapper)
    expected = outcome(lambda e: len(open_wrapper(e)), entry)
    assert outcome(count_messages, entry) == expected


@pytest.mark.parametrize("codec", WRAPPING, ids=lambda c: c.name.lower())
def test_a_wrapper_holding_nothing_is_an_error(codec: Codec) -> None:
    (entry,), _ = read_entries(encode_message(0, None, compress(codec, b""), 1, attributes=codec))
    with pytest.raises(MessageFormatError, match="partial or empty"):
        count_messages(entry)
