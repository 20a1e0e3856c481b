"""The sans-IO client connection, byte by byte."""

from __future__ import annotations

import pytest

from client.connection import BrokerConnection
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, ProtocolError, SchemaError, UnsupportedVersionError
from protocol.wire import decode_request, encode_request, encode_request_error, encode_response

API_VERSIONS_BODY = {"error_code": 0, "apis": []}
HEARTBEAT_BODY = {"error_code": 0, "error_message": None}


def test_requests_get_increasing_ids_and_exact_frames() -> None:
    conn = BrokerConnection("me")
    first = conn.send_request(ApiKey.API_VERSIONS, {})
    metadata = {"topics": None, "allow_auto_topic_creation": False}
    second = conn.send_request(ApiKey.METADATA, metadata)
    assert (first, second) == (0, 1)
    expected = encode_request(ApiKey.API_VERSIONS, 0, 0, "me", {}) + encode_request(
        ApiKey.METADATA, 0, 1, "me", metadata
    )
    assert conn.data_to_send() == expected
    assert conn.data_to_send() == b""
    assert conn.in_flight == 2
    # The frames decode as the broker will see them.
    request = decode_request(expected[4 : 4 + int.from_bytes(expected[:4], "big")])
    assert request.header.client_id == "me"
    assert request.api.key is ApiKey.API_VERSIONS


def test_a_response_fed_one_byte_at_a_time_completes_on_its_last_byte() -> None:
    conn = BrokerConnection()
    cid = conn.send_request(ApiKey.API_VERSIONS, {})
    frame = encode_response(cid, API_VERSIONS_BODY)
    for i in range(len(frame) - 1):
        assert conn.receive_data(frame[i : i + 1]) == []
    [response] = conn.receive_data(frame[-1:])
    assert response.correlation_id == cid
    assert response.api_key is ApiKey.API_VERSIONS
    assert response.unwrap() == API_VERSIONS_BODY
    assert conn.in_flight == 0


def test_pipelined_responses_in_one_chunk_come_out_in_order() -> None:
    conn = BrokerConnection()
    a = conn.send_request(ApiKey.API_VERSIONS, {})
    b = conn.send_request(ApiKey.HEARTBEAT, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    responses = conn.receive_data(
        encode_response(a, API_VERSIONS_BODY) + encode_response(b, HEARTBEAT_BODY)
    )
    assert [(r.correlation_id, r.api_key) for r in responses] == [
        (a, ApiKey.API_VERSIONS),
        (b, ApiKey.HEARTBEAT),
    ]


def test_a_response_out_of_order_breaks_the_connection() -> None:
    conn = BrokerConnection()
    conn.send_request(ApiKey.API_VERSIONS, {})
    second = conn.send_request(ApiKey.API_VERSIONS, {})
    with pytest.raises(ProtocolError, match="expected"):
        conn.receive_data(encode_response(second, API_VERSIONS_BODY))


def test_a_response_with_nothing_in_flight_breaks_the_connection() -> None:
    with pytest.raises(ProtocolError, match="no request in flight"):
        BrokerConnection().receive_data(encode_response(0, API_VERSIONS_BODY))


def test_a_request_level_error_is_a_typed_error_for_that_request_only() -> None:
    conn = BrokerConnection()
    a = conn.send_request(ApiKey.API_VERSIONS, {})
    b = conn.send_request(ApiKey.API_VERSIONS, {})
    first, second = conn.receive_data(
        encode_request_error(a, ErrorCode.UNSUPPORTED_VERSION, "v9")
        + encode_response(b, API_VERSIONS_BODY)
    )
    assert isinstance(first.error, UnsupportedVersionError)
    with pytest.raises(UnsupportedVersionError, match="v9"):
        first.unwrap()
    assert second.unwrap() == API_VERSIONS_BODY


def test_a_body_of_the_wrong_shape_fails_that_request_and_names_the_field() -> None:
    conn = BrokerConnection()
    a = conn.send_request(ApiKey.API_VERSIONS, {})
    b = conn.send_request(ApiKey.API_VERSIONS, {})
    bad, good = conn.receive_data(
        encode_response(a, {"error_code": "zero", "apis": []})
        + encode_response(b, API_VERSIONS_BODY)
    )
    assert isinstance(bad.error, SchemaError)
    assert "error_code" in str(bad.error)
    assert good.error is None


def test_garbage_bytes_raise_protocol_error() -> None:
    conn = BrokerConnection()
    conn.send_request(ApiKey.API_VERSIONS, {})
    with pytest.raises(ProtocolError):
        conn.receive_data(b"\x00\x00\x00\x03\xc1\xc1\xc1")


def test_a_request_without_response_is_not_in_flight() -> None:
    conn = BrokerConnection()
    conn.send_request(
        ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 1, "topics": []}, expect_response=False
    )
    assert conn.in_flight == 0
    assert conn.data_to_send()


def test_correlation_ids_wrap_within_int32() -> None:
    conn = BrokerConnection()
    conn._next_id = (1 << 31) - 1
    assert conn.send_request(ApiKey.API_VERSIONS, {}) == (1 << 31) - 1
    assert conn.send_request(ApiKey.API_VERSIONS, {}) == 0
