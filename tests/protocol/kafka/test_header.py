"""Request headers, whole requests and ApiVersions: bytes written by hand from Kafka's protocol
description, the flexible header v2 clients open with, and the three typed errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.kafka.api_versions import (
    advertised_versions,
    answer_api_versions,
    unsupported_version_answer,
)
from protocol.kafka.apis import API_VERSIONS, FETCH, METADATA
from protocol.kafka.errors import (
    KafkaCodecError,
    MalformedMessageError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
)
from protocol.kafka.header import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    peek_request_header,
    read_flexible_api_versions,
    read_request_header,
)

#: Apache Kafka 0.11.0's table, the APIs a client of the listener calls: (key, min, max)
ADVERTISED = [
    (0, 0, 3),  # Produce
    (1, 0, 5),  # Fetch
    (2, 0, 2),  # ListOffsets
    (3, 0, 4),  # Metadata
    (8, 0, 3),  # OffsetCommit
    (9, 0, 3),  # OffsetFetch
    (10, 0, 1),  # FindCoordinator
    (11, 0, 2),  # JoinGroup
    (12, 0, 1),  # Heartbeat
    (13, 0, 1),  # LeaveGroup
    (14, 0, 1),  # SyncGroup
    (15, 0, 1),  # DescribeGroups
    (16, 0, 1),  # ListGroups
    (17, 0, 0),  # SaslHandshake
    (18, 0, 1),  # ApiVersions
    (19, 0, 2),  # CreateTopics
    (20, 0, 1),  # DeleteTopics
    (22, 0, 0),  # InitProducerId
]
TABLE_BYTES = struct.pack(">i", len(ADVERTISED)) + b"".join(
    struct.pack(">hhh", *row) for row in ADVERTISED
)
# librdkafka's opening request: ApiVersions v3, header v2 (client id "rdkafka", no tagged
# fields), body: compact strings "librdkafka" and "2.3.0", no tagged fields
FLEXIBLE_API_VERSIONS_V3 = (
    b"\x00\x12\x00\x03\x00\x00\x00\x01"
    + b"\x00\x07rdkafka" + b"\x00"
    + b"\x0blibrdkafka" + b"\x062.3.0" + b"\x00"
)


def test_the_advertised_table_is_kafka_0_11_0s() -> None:
    assert [
        (row["api_key"], row["min_version"], row["max_version"]) for row in advertised_versions()
    ] == ADVERTISED


def test_api_versions_v0_request_and_response() -> None:
    wire = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x07rdkafka"
    request = decode_request(wire)
    assert (request.api, request.api_version, request.correlation_id, request.client_id) == (
        API_VERSIONS, 0, 1, "rdkafka"
    )
    assert request.body == {}
    assert encode_request(API_VERSIONS, 0, 1, "rdkafka", {}) == wire
    answer = answer_api_versions(peek_request_header(wire))
    assert answer == b"\x00\x00\x00\x01" + b"\x00\x00" + TABLE_BYTES


def test_api_versions_v1_response_ends_with_the_throttle_time() -> None:
    header = RequestHeader(api_key=18, api_version=1, correlation_id=9)
    answer = answer_api_versions(header, throttle_time_ms=250)
    assert answer == b"\x00\x00\x00\x09" + b"\x00\x00" + TABLE_BYTES + b"\x00\x00\x00\xfa"


def test_metadata_v0_request_with_its_header() -> None:
    wire = (
        b"\x00\x03\x00\x00\x00\x00\x00\x2a\x00\x03cli"
        + b"\x00\x00\x00\x01\x00\x06orders"
    )
    request = decode_request(wire)
    assert (request.api, request.api_version, request.correlation_id) == (METADATA, 0, 42)
    assert (request.client_id, request.body) == ("cli", {"topics": [{"name": "orders"}]})
    assert encode_request(METADATA, 0, 42, "cli", request.body) == wire


def test_a_null_client_id_and_trailing_bytes_are_accepted_as_kafka_does() -> None:
    wire = b"\x00\x03\x00\x01\x00\x00\x00\x05\xff\xff" + b"\xff\xff\xff\xff" + b"\x00\x01"
    request = decode_request(wire)
    assert (request.client_id, request.body) == (None, {"topics": None})


def test_the_flexible_header_v2_of_api_versions_v3_is_read() -> None:
    assert peek_request_header(FLEXIBLE_API_VERSIONS_V3) == (18, 3, 1)
    header, pos = read_request_header(FLEXIBLE_API_VERSIONS_V3)
    assert header == {"api_key": 18, "api_version": 3, "correlation_id": 1,
                      "client_id": "rdkafka", "tagged_fields": {}}
    assert FLEXIBLE_API_VERSIONS_V3[pos:pos + 1] == b"\x0b"
    assert read_flexible_api_versions(FLEXIBLE_API_VERSIONS_V3) == {
        "client_software_name": "librdkafka", "client_software_version": "2.3.0",
        "tagged_fields": {},
    }


def test_tagged_fields_of_the_flexible_header_are_read_past() -> None:
    # kafka-python's v4 request, header tagged fields: one field, tag 0, 2 bytes
    wire = b"\x00\x12\x00\x04\x00\x00\x00\x07\xff\xff" + b"\x01\x00\x02ab" + b"\x03py\x041.0\x00"
    header, _ = read_request_header(wire)
    assert (header["client_id"], header["tagged_fields"]) == (None, {0: b"ab"})
    assert read_flexible_api_versions(wire)["client_software_version"] == "1.0"


@pytest.mark.parametrize("version", [2, 3, 4, 7, -1])
def test_api_versions_above_the_maximum_is_answered_v0_shaped_with_error_35(version: int) -> None:
    wire = FLEXIBLE_API_VERSIONS_V3[:2] + struct.pack(">h", version) + FLEXIBLE_API_VERSIONS_V3[4:]
    with pytest.raises(UnsupportedApiVersionError, match=r"ApiVersions .* versions 0-1") as err:
        decode_request(wire)
    assert (err.value.api_key, err.value.api_version, err.value.correlation_id) == (18, version, 1)
    answer = answer_api_versions(peek_request_header(wire))
    assert answer == b"\x00\x00\x00\x01" + b"\x00\x23" + TABLE_BYTES
    assert answer == unsupported_version_answer(1)
    assert decode_response(API_VERSIONS, 0, answer)[1]["error_code"] == 35


def test_an_unsupported_version_of_another_api_is_its_own_error() -> None:
    wire = encode_request(FETCH, 3, 77, "c", {"max_wait_ms": 1, "min_bytes": 1, "topics": []})
    wire = wire[:2] + b"\x00\x06" + wire[4:]
    with pytest.raises(UnsupportedApiVersionError, match=r"Fetch \(key 1\) version 6") as err:
        decode_request(wire)
    assert err.value.correlation_id == 77


@pytest.mark.parametrize("key", [4, 7, 21, 36, 99, -1, 0x7FFF])
def test_an_unknown_api_key_is_its_own_error_naming_the_correlation_id(key: int) -> None:
    wire = struct.pack(">hhi", key, 0, 12) + b"\xff\xff"
    with pytest.raises(UnknownApiKeyError, match=f"unknown Kafka API key {key} ") as err:
        decode_request(wire)
    assert err.value.correlation_id == 12


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00\x03\x00\x00\x00\x00\x00", id="7-bytes"),
        pytest.param(b"\x00\x03\x00\x00\x00\x00\x00\x01", id="no-client-id"),
        pytest.param(b"\x00\x03\x00\x00\x00\x00\x00\x01\x00\x05ab", id="short-client-id"),
        pytest.param(b"\x00\x03\x00\x00\x00\x00\x00\x01\xff\xff\x00\x00", id="short-body"),
    ],
)
def test_a_request_that_does_not_parse_is_malformed(wire: bytes) -> None:
    with pytest.raises(MalformedMessageError):
        decode_request(wire)


def test_every_truncation_of_a_flexible_request_is_malformed() -> None:
    for cut in range(len(FLEXIBLE_API_VERSIONS_V3)):
        with pytest.raises(MalformedMessageError):
            read_flexible_api_versions(FLEXIBLE_API_VERSIONS_V3[:cut])


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from([0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 55]),
    version=st.integers(-1, 5),
    rest=st.binary(max_size=80),
)
def test_any_bytes_decode_or_raise_a_codec_error(key: int, version: int, rest: bytes) -> None:
    wire = struct.pack(">hh", key, version) + rest
    try:
        decode_request(wire)
    except KafkaCodecError as exc:
        assert type(exc) in (MalformedMessageError, UnknownApiKeyError, UnsupportedApiVersionError)
