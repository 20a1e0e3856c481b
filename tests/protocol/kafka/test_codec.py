"""The Kafka body codec: bytes written by hand from Kafka's protocol description, round trips of
every API and version of the table, and hostile bytes that must raise MalformedMessageError and
nothing else, quickly."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.apis import ApiKey
from protocol.kafka.apis import (
    FETCH,
    JOIN_GROUP,
    KAFKA_APIS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    KafkaApi,
    KafkaApiKey,
)
from protocol.kafka.errors import EncodeError, MalformedMessageError
from tests.kafka_format import message
from tests.protocol.kafka.strategies import value_of

EVERY_VERSION = [
    pytest.param(api, v, id=f"{api.name}-v{v}")
    for api in KAFKA_APIS.values()
    for v in range(api.min_version, api.max_version + 1)
]


def _s(text: str) -> bytes:
    """A Kafka string: int16 length, UTF-8."""
    return struct.pack(">h", len(text.encode())) + text.encode()


def _request(api: KafkaApi, version: int, body: dict[str, Any]) -> bytes:
    out = bytearray()
    api.encode_request(version, body, out)
    return bytes(out)


def _response(api: KafkaApi, version: int, body: dict[str, Any]) -> bytes:
    out = bytearray()
    api.encode_response(version, body, out)
    return bytes(out)


# ------------------------------------------------------------------------ vectors by hand


def test_metadata_v0_request_is_an_array_of_strings() -> None:
    wire = b"\x00\x00\x00\x02" + _s("foo") + _s("bar")
    assert _request(METADATA, 0, {"topics": [{"name": "foo"}, {"name": "bar"}]}) == wire
    assert METADATA.decode_request(0, memoryview(wire)) == (
        {"topics": [{"name": "foo"}, {"name": "bar"}]}, len(wire)
    )


def test_metadata_v1_null_topics_is_count_minus_one_and_v0_cannot_say_it() -> None:
    assert _request(METADATA, 1, {"topics": None}) == b"\xff\xff\xff\xff"
    with pytest.raises(MalformedMessageError, match="Metadata v0 request"):
        METADATA.decode_request(0, memoryview(b"\xff\xff\xff\xff"))


def test_produce_v2_request_carries_its_message_set_as_a_view_of_the_frame() -> None:
    records = message(0, None, b"hello", timestamp=1_500_000_000_000) + message(1, b"k", b"v")
    wire = (
        b"\xff\xff"  # acks -1
        + b"\x00\x00\x75\x30"  # timeout 30000 ms
        + b"\x00\x00\x00\x01" + _s("events")
        + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x03"  # one partition: 3
        + struct.pack(">i", len(records)) + records
    )
    body = {"acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "events", "partition_data": [{"index": 3, "records": records}]}]}
    assert _request(PRODUCE, 2, body) == wire
    frame = memoryview(wire)
    decoded, end = PRODUCE.decode_request(2, frame)
    assert end == len(wire)
    got = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(got, memoryview) and got.obj is wire  # no copy of the message set
    assert bytes(got) == records
    assert decoded == body


def test_join_group_v1_response() -> None:
    wire = (
        b"\x00\x00" + b"\x00\x00\x00\x05"  # no error, generation 5
        + _s("range") + _s("m-1") + _s("m-2")
        + b"\x00\x00\x00\x02"
        + _s("m-1") + b"\x00\x00\x00\x02\x00\x01"
        + _s("m-2") + b"\x00\x00\x00\x00"
    )
    body = {"error_code": 0, "generation_id": 5, "protocol_name": "range", "leader": "m-1",
            "member_id": "m-2", "members": [{"member_id": "m-1", "metadata": b"\x00\x01"},
                                            {"member_id": "m-2", "metadata": b""}]}
    assert _response(JOIN_GROUP, 1, body) == wire
    assert JOIN_GROUP.decode_response(1, memoryview(wire))[0] == body


def test_fields_exist_only_in_their_versions() -> None:
    fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024,
             "topics": []}
    assert _request(FETCH, 2, fetch) == struct.pack(">iiii", -1, 500, 1, 0)
    assert _request(FETCH, 3, fetch) == struct.pack(">iiiii", -1, 500, 1, 1024, 0)
    partition = {"partition_index": 0, "error_code": 0, "old_style_offsets": [7, 3],
                 "timestamp": -1, "offset": 7}
    v0 = {"topics": [{"name": "t", "partitions": [partition]}]}
    head = b"\x00\x00\x00\x01" + _s("t") + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x00"
    assert _response(LIST_OFFSETS, 0, v0) == head + struct.pack(">iqq", 2, 7, 3)
    assert _response(LIST_OFFSETS, 1, v0) == head + struct.pack(">qq", -1, 7)


def test_an_absent_field_takes_its_default_and_a_missing_required_one_is_named() -> None:
    commit = {"group_id": "g", "topics": []}
    assert _request(OFFSET_COMMIT, 2, commit) == (
        _s("g") + struct.pack(">i", -1) + _s("") + struct.pack(">qi", -1, 0)
    )
    with pytest.raises(EncodeError, match=r"OffsetCommit v0 request.*topics"):
        OFFSET_COMMIT.encode_request(0, {"group_id": "g"}, bytearray())
    with pytest.raises(EncodeError, match="Metadata v0 request"):
        METADATA.encode_request(0, {"topics": None}, bytearray())


# ------------------------------------------------------------------------ round trips


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_and_response_round_trips(api: KafkaApi, version: int, data) -> None:
    for schema, encode, decode in (
        (api.request, api.encode_request, api.decode_request),
        (api.response, api.encode_response, api.decode_response),
    ):
        value = data.draw(value_of(schema, version))
        out = bytearray()
        encode(version, value, out)
        assert decode(version, memoryview(bytes(out))) == (value, len(out))


# ------------------------------------------------------------------------ hostile bytes


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_of_a_valid_body_is_malformed(api: KafkaApi, version: int, data) -> None:
    for schema, encode, decode in (
        (api.request, api.encode_request, api.decode_request),
        (api.response, api.encode_response, api.decode_response),
    ):
        out = bytearray()
        encode(version, data.draw(value_of(schema, version)), out)
        for cut in range(len(out)):
            with pytest.raises(MalformedMessageError):
                decode(version, memoryview(bytes(out[:cut])))


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION)
@settings(max_examples=60, deadline=None)
@given(garbage=st.binary(max_size=120))
def test_garbage_parses_or_is_malformed_nothing_else(
    api: KafkaApi, version: int, garbage: bytes
) -> None:
    for decode in (api.decode_request, api.decode_response):
        try:
            _, end = decode(version, memoryview(garbage))
        except MalformedMessageError:
            continue
        assert end <= len(garbage)


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"\x7f\xff\xff\xff" + b"\x00" * 8, id="array-count-2^31-1"),
        pytest.param(b"\x80\x00\x00\x00", id="array-count-negative"),
        pytest.param(b"\xff\xff\xff\xfe", id="array-count-minus-2"),
        pytest.param(b"\x00\x00\x00\x01\x7f\xff", id="string-length-32767"),
        pytest.param(b"\x00\x00\x00\x01\xff\xff", id="null-topic-name"),
        pytest.param(b"\x00\x00\x00\x01\x00\x02\xc3\x28", id="invalid-utf-8"),
    ],
)
def test_hostile_lengths_are_malformed_at_once(wire: bytes) -> None:
    with pytest.raises(MalformedMessageError, match="Metadata v1 request"):
        METADATA.decode_request(1, memoryview(wire))


def test_a_huge_records_length_is_malformed() -> None:
    wire = b"\x00\x01" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + _s("t")
    wire += b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + b"abc"
    with pytest.raises(MalformedMessageError, match="records of 2147483647 bytes"):
        PRODUCE.decode_request(0, memoryview(wire))


def test_api_keys_shared_with_the_native_protocol_keep_the_same_numbers() -> None:
    """The native registry already uses Kafka's key numbers (DESIGN.md); the two tables must
    never disagree on an API both have, so the broker can map one onto the other by name."""
    shared = set(KafkaApiKey.__members__) & set(ApiKey.__members__)
    assert shared >= {"PRODUCE", "FETCH", "METADATA", "JOIN_GROUP", "API_VERSIONS"}
    assert {n: KafkaApiKey[n].value for n in shared} == {n: ApiKey[n].value for n in shared}
