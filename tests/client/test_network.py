"""The socket layer: connection failures, broken streams and timeouts stay per connection.

The "broker" here is a listening socket the test serves by hand, in the test's own thread: the
client connects without blocking, so the test can accept and answer between client polls."""

from __future__ import annotations

import socket
import time

import pytest

from client.errors import BrokerConnectionError, ClientTimeoutError
from client.network import NetworkClient, parse_bootstrap
from protocol.apis import ApiKey
from protocol.wire import encode_response
from tests.client.served_by_hand import drive, read_request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("h:1", [("h", 1)]),
        ("a:9092, b:9093", [("a", 9092), ("b", 9093)]),
        (["[::1]:9092"], [("::1", 9092)]),
    ],
)
def test_parse_bootstrap(text, expected) -> None:
    assert parse_bootstrap(text) == expected


@pytest.mark.parametrize("text", ["", "host", "host:", ":9092", "h:0", "h:99999", "h:x"])
def test_parse_bootstrap_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bootstrap(text)


def test_a_refused_connection_fails_the_request_with_the_address() -> None:
    port = free_port()
    client = NetworkClient(f"127.0.0.1:{port}")
    try:
        future = client.send(-1, ApiKey.API_VERSIONS, {})
        drive(client, future)
        error = future.exception()
        assert isinstance(error, BrokerConnectionError)
        assert f"cannot connect to 127.0.0.1:{port}" in str(error)
        assert error.retriable
    finally:
        client.close()


def test_a_garbled_stream_fails_its_requests_and_the_node_reconnects(
    listener: socket.socket,
) -> None:
    # a connection that ended before any answer backs off before the next; none here, so the
    # test can accept the new connection right after the send
    client = NetworkClient(f"127.0.0.1:{listener.getsockname()[1]}", reconnect_backoff_ms=0)
    try:
        future = client.send(-1, ApiKey.API_VERSIONS, {})
        client.poll(0)
        conn, _ = listener.accept()
        with conn:
            read_request(conn)
            conn.sendall(b"\x00\x00\x00\x02\xc1\xc1")  # a frame that is not msgpack
            drive(client, future)
        assert isinstance(future.exception(), BrokerConnectionError)
        again = client.send(-1, ApiKey.API_VERSIONS, {})
        client.poll(0)
        conn, _ = listener.accept()
        with conn:
            cid = read_request(conn)
            conn.sendall(encode_response(cid, {"error_code": 0, "apis": []}))
            drive(client, again)
        assert again.result() == {"error_code": 0, "apis": []}
    finally:
        client.close()


def test_a_request_past_its_deadline_times_out_and_closes_the_connections_to_its_broker(
    listener: socket.socket,
) -> None:
    """Its own connection, and the bootstrap connection to the same address: a broker cut off
    leaves that one idle and looking alive, and metadata would be asked of it next, to wait
    out a timeout of its own."""
    host, port = listener.getsockname()[:2]
    client = NetworkClient(f"{host}:{port}")
    try:
        future = client.send(-1, ApiKey.API_VERSIONS, {})
        client.poll(0)
        bootstrap, _ = listener.accept()
        with bootstrap:
            bootstrap.settimeout(5)
            cid = read_request(bootstrap)
            bootstrap.sendall(encode_response(cid, {"error_code": 0, "apis": []}))
            drive(client, future)
            client.set_brokers({7: (host, port)})  # the broker behind the bootstrap address
            lost = client.send(7, ApiKey.API_VERSIONS, {}, timeout=0.1)
            client.poll(0)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                read_request(conn)
                drive(client, lost)
                assert isinstance(lost.exception(), ClientTimeoutError)
                assert conn.recv(10) == b""  # the client closed its end
            assert bootstrap.recv(10) == b""  # and the bootstrap connection
    finally:
        client.close()


def test_a_request_without_response_completes_once_written(listener: socket.socket) -> None:
    client = NetworkClient(f"127.0.0.1:{listener.getsockname()[1]}")
    try:
        body = {"acks": 0, "timeout_ms": 1, "topics": []}
        future = client.send(-1, ApiKey.PRODUCE, body, expect_response=False)
        conn, _ = listener.accept()
        with conn:
            drive(client, future)
            assert future.result() == {}
            read_request(conn)
            assert client.in_flight(-1) == 0
    finally:
        client.close()


def test_closing_fails_what_is_pending(listener: socket.socket) -> None:
    client = NetworkClient(f"127.0.0.1:{listener.getsockname()[1]}")
    future = client.send(-1, ApiKey.API_VERSIONS, {})
    client.close()
    assert isinstance(future.exception(), BrokerConnectionError)


def test_an_idle_coordinator_connection_closing_is_reported_at_once(
    listener: socket.socket,
) -> None:
    """Seed 001: the consumer rediscovers the coordinator "when it finds the socket channel to
    the coordinator to be closed" -- not only when its next heartbeat fails."""
    from client.coordinator_lookup import COORDINATOR_NODE_BASE, CoordinatorLookup

    host, port = listener.getsockname()[:2]
    client = NetworkClient(f"{host}:{port}")
    lookup = CoordinatorLookup(client, "g")
    lost: list[str] = []
    lookup.on_lost = lost.append
    try:
        lookup.node, lookup.broker_id = COORDINATOR_NODE_BASE - 3, 3
        client.set_dedicated_node(lookup.node, host, port)
        future = client.send(lookup.node, ApiKey.API_VERSIONS, {})
        client.poll(0)
        conn, _ = listener.accept()
        conn.settimeout(5)
        correlation_id = read_request(conn)
        conn.sendall(encode_response(correlation_id, {"error_code": 0, "apis": []}))
        drive(client, future)
        assert lost == []  # an answered request, an idle connection
        conn.close()  # the coordinator's broker dies
        deadline = time.monotonic() + 5
        while not lost:
            assert time.monotonic() < deadline, "the closed connection was not reported"
            client.poll(0.05)
        assert lost == ["the connection to the coordinator (broker 3) closed"]
        other = socket.create_server(("127.0.0.1", 0))  # another node closing: not reported
        try:
            client.set_brokers({7: other.getsockname()[:2]})
            other.settimeout(5)
            f = client.send(7, ApiKey.API_VERSIONS, {})
            client.poll(0)
            c, _ = other.accept()
            c.close()
            with pytest.raises(BrokerConnectionError):
                drive(client, f)
                f.result(0)
        finally:
            other.close()
        assert len(lost) == 1
    finally:
        client.close()
