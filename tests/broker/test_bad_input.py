"""Hostile and broken input against a running broker process.

After each case the broker must still serve a well-behaved client on another connection, and
every message stored before must still be there (``assert_healthy``).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import msgpack
import pytest

from protocol.apis import ApiKey
from protocol.errors import (
    InvalidRequestError,
    UnsupportedApiError,
    UnsupportedVersionError,
)
from protocol.framing import encode_frame
from protocol.messageset import Record, encode_message_set
from protocol.wire import encode_request
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

STORED = [f"stored-{i}".encode() for i in range(25)]


@pytest.fixture
def stocked(make_broker: Callable[..., BrokerProcess]) -> Iterator[Callable[..., BrokerProcess]]:
    """A factory for brokers (settings as for make_broker) holding STORED in topic 'keep'."""

    def start(**kwargs: object) -> BrokerProcess:
        broker = make_broker(**kwargs)
        with RawClient(broker.address) as client:
            client.create_topic("keep", 2)
            client.produce("keep", STORED[:10], partition=0)
            client.produce("keep", STORED[10:], partition=1)
        return broker

    yield start


@pytest.fixture
def broker(stocked: Callable[..., BrokerProcess]) -> BrokerProcess:
    return stocked()


def assert_healthy(broker: BrokerProcess) -> None:
    assert broker.running
    with RawClient(broker.address) as client:
        assert client.request(ApiKey.API_VERSIONS, {})["error_code"] == 0
        assert [m.value for m in client.fetch("keep", 0)] == STORED[:10]
        assert [m.value for m in client.fetch("keep", 1)] == STORED[10:]
        offset = client.produce("healthy", [b"after"])
        assert [m.value for m in client.fetch("healthy", 0, offset)] == [b"after"]


def _raw(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(broker.address, timeout=20)


# --------------------------------------------------------------- streams that cannot be framed


def test_garbage_bytes_close_the_connection(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.sock.sendall(b"GET / HTTP/1.1\r\nHost: odradek\r\n\r\n" + bytes(range(256)))
        assert client.closed_by_broker()
    assert_healthy(broker)


def test_a_2_gib_length_prefix_closes_the_connection(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.sock.sendall(struct.pack(">I", 2**31) + b"x" * 1000)
        assert client.closed_by_broker()
    broker.wait_for_log("exceeds max_frame_bytes")  # read off its stderr by a thread of ours
    assert_healthy(broker)


def test_requests_before_an_oversized_frame_are_answered(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        good = encode_request(ApiKey.API_VERSIONS, 0, 5, "t", {})
        client.sock.sendall(good + struct.pack(">I", 0xFFFFFFFF))
        assert client.receive()[0] == 5
        assert client.closed_by_broker()
    assert_healthy(broker)


def test_a_frame_cut_off_then_closed(broker: BrokerProcess) -> None:
    frame = encode_request(ApiKey.METADATA, 0, 1, "t", {"topics": None,
                                                         "allow_auto_topic_creation": True})
    for cut in (2, 4, len(frame) - 1):
        with _raw(broker) as sock:
            sock.sendall(frame[:cut])
    assert_healthy(broker)


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1",  # never-used msgpack byte
        msgpack.packb({"not": "a request"}),
        msgpack.packb([18, 0, "one", "client", {}]),  # correlation id of the wrong type
        msgpack.packb([18, 0, 1 << 40, "client", {}]),  # correlation id beyond int32
        msgpack.packb([18, 0, 1, "client", {}]) + b"trailing",
    ],
)
def test_frames_without_a_readable_header_close_the_connection(
    broker: BrokerProcess, payload: bytes
) -> None:
    with RawClient(broker.address) as client:
        client.sock.sendall(encode_frame(payload))
        assert client.closed_by_broker()
    assert_healthy(broker)


# ------------------------------------------------------ readable headers: errors, not closures


@pytest.mark.parametrize(
    "body",
    [
        {"topics": "all", "allow_auto_topic_creation": True},
        {"topics": [1, 2], "allow_auto_topic_creation": True},
        {"topics": None},
        {"topics": None, "allow_auto_topic_creation": True, "extra": 1},
        [],
    ],
)
def test_wrong_field_types_get_invalid_request(broker: BrokerProcess, body: object) -> None:
    with RawClient(broker.address) as client:
        with pytest.raises(InvalidRequestError, match="Metadata v0 request: field"):
            client.request(ApiKey.METADATA, body)  # type: ignore[arg-type]
        assert client.request(ApiKey.API_VERSIONS, {})["error_code"] == 0  # same connection
    assert_healthy(broker)


def test_a_produce_with_wrong_types_writes_nothing(broker: BrokerProcess) -> None:
    body = {"acks": 1, "timeout_ms": 1000,
            "topics": [{"name": "keep", "partitions": [{"partition": 0, "records": "text"}]}]}
    with RawClient(broker.address) as client, pytest.raises(InvalidRequestError):
        client.request(ApiKey.PRODUCE, body)
    assert_healthy(broker)


def test_unknown_api_key_and_version(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.sock.sendall(encode_frame(msgpack.packb([99, 0, 7, "t", {}])))
        correlation_id, body = client.receive()
        assert correlation_id == 7
        assert body["error_code"] == UnsupportedApiError.code
        with pytest.raises(UnsupportedVersionError, match="Metadata v5 is not supported"):
            client.request(ApiKey.METADATA, {}, version=5)
        assert client.request(ApiKey.API_VERSIONS, {})["error_code"] == 0
    assert_healthy(broker)


# ------------------------------------------------------------------------- bad produce / fetch


def test_a_corrupted_crc_appends_nothing(broker: BrokerProcess) -> None:
    good = encode_message_set([Record(b"k", b"value", 1), Record(b"k", b"other", 2)])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # the last value byte of the second message: its CRC no longer holds
    with RawClient(broker.address) as client:
        result = client.produce_set("keep", 0, bytes(corrupt))
        assert result["error_code"] == 2  # CORRUPT_MESSAGE
        assert result["base_offset"] == -1
        assert client.list_offset("keep", 0, -1)["offset"] == 10
    assert_healthy(broker)


def test_unknown_topic_with_auto_creation_off(stocked: Callable[..., BrokerProcess]) -> None:
    broker = stocked(settings={"auto_create_topics_enable": False})
    with RawClient(broker.address) as client:
        result = client.produce_set("absent", 0, encode_message_set([Record(None, b"v", 1)]))
        assert result["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert [t["name"] for t in client.metadata(None)["topics"]] == ["keep"]
        client.create_topic("healthy")  # so that assert_healthy can produce
    assert_healthy(broker)


def test_a_message_set_over_max_message_bytes(stocked: Callable[..., BrokerProcess]) -> None:
    broker = stocked(settings={"max_message_bytes": 2048})
    with RawClient(broker.address) as client:
        big = encode_message_set([Record(None, b"x" * 4096, 1)])
        result = client.produce_set("keep", 1, big)
        assert result["error_code"] == 10  # MESSAGE_TOO_LARGE
        assert "max_message_bytes=2048" in result["error_message"]
        assert client.list_offset("keep", 1, -1)["offset"] == 15
    assert_healthy(broker)


def test_a_fetch_beyond_the_log_end(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        for offset in (11, 1 << 40):
            result = client.fetch_partition("keep", 0, offset)
            assert result["error_code"] == 1  # OFFSET_OUT_OF_RANGE
            assert result["records"] == b""
        assert client.fetch_partition("keep", 0, -1)["error_code"] == 1
    assert_healthy(broker)


# ------------------------------------------------------------------------ connection pressure


def test_a_thousand_connections_opened_and_dropped(broker: BrokerProcess) -> None:
    partial = encode_request(ApiKey.API_VERSIONS, 0, 1, "t", {})[:6]
    sockets = []
    try:
        for i in range(1000):
            sock = _raw(broker)
            if i % 3 == 0:
                sock.sendall(partial)
            sockets.append(sock)
        assert_healthy(broker)
    finally:
        for sock in sockets:
            sock.close()
    assert_healthy(broker)


def test_running_out_of_descriptors_backs_off(stocked: Callable[..., BrokerProcess]) -> None:
    broker = stocked(max_open_files=64)
    sockets = [_raw(broker) for _ in range(150)]  # more than the broker can hold open
    try:
        broker.wait_for_log("accept returned EMFILE")
    finally:
        for sock in sockets:
            sock.close()
    assert_healthy(broker)  # the connections queued meanwhile are accepted at last


def test_idle_connections_are_closed(stocked: Callable[..., BrokerProcess]) -> None:
    broker = stocked(settings={"connections_max_idle_ms": 200})
    with RawClient(broker.address) as client:
        assert client.closed_by_broker()
    assert_healthy(broker)
