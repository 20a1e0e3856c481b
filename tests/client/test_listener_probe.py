"""A connection closed before its first answer: a listener of another security protocol (asked of
the listener, client/listener_probe.py) or a broker going away. The "brokers" here are loopback
sockets served by a thread of the test; the real listeners are in tests/security."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from client.errors import BrokerConnectionError, SecurityProtocolMismatchError
from client.listener_probe import ListenerKind, mismatch_error
from client.network import NetworkClient
from client.security import SecurityConfig
from protocol.apis import ApiKey

#: a TLS "handshake failure" alert record, what a TLS listener may answer to plain bytes
TLS_ALERT = b"\x15\x03\x03\x00\x02\x02\x28"


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """``serve(handle)``: a listener whose every connection is given to ``handle`` (then
    closed), in a thread; its address."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(handle: Callable[[socket.socket], None]) -> str:
        server = socket.create_server(("127.0.0.1", 0))

        def loop() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return  # the listener was closed: the test is over
                with conn:
                    conn.settimeout(5)
                    with contextlib.suppress(OSError):
                        handle(conn)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"127.0.0.1:{server.getsockname()[1]}"

    yield start
    for server, thread in servers:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)


def close_at_once(conn: socket.socket) -> None:
    conn.recv(65536)


def answer_with_a_tls_alert(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(TLS_ALERT)


def test_a_listener_that_closes_every_connection_is_a_retriable_connection_error(serve):
    """A broker going away closes connections too: nothing says it is a mismatch."""
    client = NetworkClient(serve(close_at_once), request_timeout_ms=10_000)
    try:
        future = client.send(-1, ApiKey.API_VERSIONS, {})
        with pytest.raises(BrokerConnectionError, match="closed the connection") as closed:
            future.result(10)
        assert closed.type is BrokerConnectionError and closed.value.retriable
    finally:
        client.close()


def test_a_tls_alert_where_a_frame_was_expected_is_a_mismatch_naming_tls(serve):
    address = serve(answer_with_a_tls_alert)
    client = NetworkClient(address, request_timeout_ms=10_000)
    try:
        future = client.send(-1, ApiKey.METADATA, {"topics": None,
                                                   "allow_auto_topic_creation": False})
        with pytest.raises(SecurityProtocolMismatchError) as mismatch:
            future.result(10)
        assert not mismatch.value.retriable
        assert str(mismatch.value) == (
            f"{address} answered with a TLS alert: the listener expects TLS (SSL or SASL_SSL), "
            "and this client's security_protocol is PLAINTEXT")
    finally:
        client.close()


PLAIN = SecurityConfig()
SASL_PLAIN = SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_plain_username="alice",
                            sasl_plain_password="x")
SSL = SecurityConfig(security_protocol="SSL")


@pytest.mark.parametrize(("kind", "client", "says"), [
    (ListenerKind(tls=False, sasl=True, mechanisms=("PLAIN",)), PLAIN,
     "the listener requires SASL (a SASL_PLAINTEXT listener, SASL mechanisms PLAIN), and this "
     "client's security_protocol is PLAINTEXT: set security_protocol=SASL_PLAINTEXT with "
     "sasl_mechanism, sasl_plain_username and sasl_plain_password"),
    (ListenerKind(tls=True, sasl=False), PLAIN,
     "the listener expects TLS (an SSL listener), and this client's security_protocol is "
     "PLAINTEXT: set security_protocol=SSL"),
    (ListenerKind(tls=True, sasl=None), SASL_PLAIN,
     "the listener expects TLS (an SSL or SASL_SSL listener), and this client's "
     "security_protocol is SASL_PLAINTEXT: set security_protocol=SSL or SASL_SSL"),
    (ListenerKind(tls=False, sasl=False), SSL,
     "the listener does not speak TLS (a PLAINTEXT listener), and this client's "
     "security_protocol is SSL: set security_protocol=PLAINTEXT"),
    (ListenerKind(tls=True, sasl=True), SSL,
     "the listener requires SASL (a SASL_SSL listener), and this client's security_protocol "
     "is SSL: set security_protocol=SASL_SSL with sasl_mechanism, sasl_plain_username and "
     "sasl_plain_password"),
])
def test_a_mismatch_says_what_the_listener_expects(kind: ListenerKind, client: SecurityConfig,
                                                   says: str):
    error = mismatch_error("b1:9093", kind, client)
    assert error is not None and str(error) == f"b1:9093 closed the connection: {says}"


@pytest.mark.parametrize(("kind", "client"), [
    (ListenerKind(tls=False, sasl=False), PLAIN),
    (ListenerKind(tls=False, sasl=True), SASL_PLAIN),
    (ListenerKind(tls=True, sasl=None), SSL),  # it would not say whether it wants SASL
])
def test_a_listener_of_the_clients_own_protocol_is_no_mismatch(kind: ListenerKind,
                                                               client: SecurityConfig):
    assert mismatch_error("b1:9093", kind, client) is None
