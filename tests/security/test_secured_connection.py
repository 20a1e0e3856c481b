"""A secured listener's connection from the broker's side (broker/connection.py): a failed login
is answered before the close, and nothing pipelined behind it is handled; a TLS handshake that
never comes is given up at ``request_read_timeout_ms``, and the broker serves on."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from client.admin import Admin
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.security.support import (
    PASSWORD,
    add_user,
    make_tls_files,
    raw_answer,
    raw_request,
)


def test_a_failed_login_is_answered_then_closed_with_what_followed_unhandled(
        make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"})
    add_user(broker.bootstrap, "alice")
    with socket.create_connection(("127.0.0.1", broker.listener_ports[
            "SASL_PLAINTEXT"])) as sock:
        sock.settimeout(10)
        raw_request(sock, ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"})
        assert raw_answer(sock)["error_code"] == ErrorCode.NONE
        # the wrong password, then requests the broker must not handle: sent in one go
        raw_request(sock, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0Zq9-not-it"},
                    correlation_id=2)
        raw_request(sock, ApiKey.SASL_AUTHENTICATE, {
            "auth_bytes": f"\0alice\0{PASSWORD}".encode()}, correlation_id=3)
        raw_request(sock, ApiKey.API_VERSIONS, {}, correlation_id=4)
        refused = raw_answer(sock)
        assert refused is not None
        assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw_answer(sock) is None  # closed: the second login was not tried
    with Admin(broker.bootstrap) as admin:  # the broker serves on
        assert admin.list_topics() == []


def test_a_tls_handshake_that_never_comes_is_given_up_and_the_broker_serves_on(
        make_broker: Callable[..., BrokerProcess], tmp_path: Path):
    tls = make_tls_files(tmp_path / "tls")
    broker = make_broker(settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", request_read_timeout_ms=300))
    with socket.create_connection(("127.0.0.1", broker.listener_ports["SSL"])) as sock:
        sock.settimeout(30)
        assert sock.recv(1) == b""  # the broker closed it, without a word in the clear
    broker.wait_for_log("TLS handshake failed: TooSlowError")
    with Admin(broker.bootstrap) as admin:
        assert admin.list_topics() == []
