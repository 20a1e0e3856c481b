"""Kafka's ConsumerProtocol Subscription and Assignment: byte vectors written from the schemas,
round trips of any value, newer versions read by their known prefix, and garbage refused with
the module's typed error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.kafka.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from protocol.kafka.errors import EncodeError, MalformedMessageError

NULL_BYTES = b"\xff\xff\xff\xff"

topics = st.text(max_size=12)
partitions = st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4).map(tuple)
topic_partitions = st.lists(st.tuples(topics, partitions), max_size=4).map(tuple)
user_data = st.none() | st.binary(max_size=16)


def test_subscription_v0_bytes():
    data = encode_subscription(Subscription(("t", "ab")), version=0)
    assert data == (b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x01t" + b"\x00\x02ab"
                    + NULL_BYTES)
    assert decode_subscription(data) == Subscription(("t", "ab"))


def test_subscription_v1_bytes_carry_owned_partitions():
    value = Subscription(("t",), b"u", (("t", (0, 2)),))
    data = encode_subscription(value)
    assert data == (b"\x00\x01" + b"\x00\x00\x00\x01\x00\x01t" + b"\x00\x00\x00\x01u"
                    + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02"
                    + b"\x00\x00\x00\x00\x00\x00\x00\x02")
    assert decode_subscription(data) == value


def test_assignment_v0_bytes():
    data = encode_assignment(Assignment((("t", (1,)),), None))
    assert data == (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"
                    + b"\x00\x00\x00\x01" + NULL_BYTES)
    assert decode_assignment(data) == Assignment((("t", (1,)),))


def test_newer_versions_are_read_by_the_fields_they_share():
    """Subscription v3 appends a generation id and a rack id after v1's fields; Assignment v3
    has v0's layout, and any trailing bytes are ignored."""
    v1 = encode_subscription(Subscription(("t",), None, (("t", (0,)),)))
    v3 = b"\x00\x03" + v1[2:] + struct.pack(">i", 7) + b"\x00\x04rack"
    assert decode_subscription(v3) == Subscription(("t",), None, (("t", (0,)),))
    assigned = encode_assignment(Assignment((("t", (0,)),), b"x"), version=3)
    assert decode_assignment(assigned + b"later fields") == Assignment((("t", (0,)),), b"x")


@given(st.lists(topics, max_size=5).map(tuple), user_data, topic_partitions,
       st.sampled_from([0, 1]))
def test_subscription_round_trip(names, data, owned, version):
    value = Subscription(names, data, owned if version else ())
    assert decode_subscription(encode_subscription(value, version)) == value


@given(topic_partitions, user_data)
def test_assignment_round_trip(assigned, data):
    value = Assignment(assigned, data)
    assert decode_assignment(encode_assignment(value)) == value


@pytest.mark.parametrize("data", [
    b"",  # no version
    b"\x00",  # half a version
    b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",  # negative version
    b"\x00\x00\x00\x00\x00\x01",  # one topic announced, none there
    b"\x00\x00\x7f\xff\xff\xff",  # a count far beyond the bytes
    b"\x00\x00\x00\x00\x00\x01\xff\xff" + NULL_BYTES,  # a null topic name
    b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe" + NULL_BYTES,  # a name that is not UTF-8
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x09ab",  # user data shorter than its length
])
def test_garbage_subscriptions_are_refused(data):
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


@given(st.binary(max_size=40))
def test_any_bytes_decode_or_raise_the_typed_error(data):
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except ConsumerProtocolError as exc:
            assert isinstance(exc, MalformedMessageError)


def test_garbage_assignment_is_refused():
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x05\x00")


def test_unwritable_values_raise_encode_error():
    with pytest.raises(EncodeError):
        encode_subscription(Subscription(("t",)), version=2)
    with pytest.raises(EncodeError):
        encode_subscription(Subscription(("x" * 40_000,)))
