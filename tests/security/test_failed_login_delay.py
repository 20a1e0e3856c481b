"""A failed SASL login is answered only after ``connection_failed_authentication_delay_ms``
(Kafka's connection.failed.authentication.delay.ms, KIP-306), and only that connection waits."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable

import pytest
import trio

from broker.client_connection import ClientConnection
from broker.security.sasl import SaslSession
from broker.settings import BrokerSettings, SettingsError, load_settings
from client.producer import Producer
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.sasl import SaslClientMechanism
from tests.broker_process import BrokerProcess
from tests.security.support import PASSWORD, add_user, raw_answer, raw_request
from tests.security.test_sasl_session import PASSWORD as SESSION_PASSWORD
from tests.security.test_sasl_session import Store


async def _scram_login(session: SaslSession, user: str, password: str) -> int:
    client = SaslClientMechanism("SCRAM-SHA-256", user, password)
    assert session.handshake("SCRAM-SHA-256")["error_code"] == ErrorCode.NONE
    token: bytes | None = client.first()
    while token is not None:
        answer = await session.authenticate(token)
        if answer["error_code"]:
            return int(answer["error_code"])
        token = client.respond(answer["auth_bytes"])
    return 0


@pytest.mark.parametrize(("user", "password"), [("alice", "Zq9-not-it"), ("mallory", "x")])
async def test_a_failed_login_is_answered_after_the_delay(
        autojump_clock: trio.testing.MockClock, user: str, password: str) -> None:
    session = SaslSession(ClientConnection(1, "127.0.0.1"), ("SCRAM-SHA-256",), Store(),
                          failure_delay=2.0)
    started = trio.current_time()
    assert await _scram_login(session, user, password) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert trio.current_time() - started >= 2.0  # the broker's clock: a fake one here


async def test_a_good_login_is_not_delayed(autojump_clock: trio.testing.MockClock) -> None:
    session = SaslSession(ClientConnection(1, "127.0.0.1"), ("SCRAM-SHA-256",), Store(),
                          failure_delay=2.0)
    started = trio.current_time()
    assert await _scram_login(session, "alice", SESSION_PASSWORD) == 0
    assert trio.current_time() == started


def test_the_setting_has_kafkas_default_and_refuses_a_negative_delay() -> None:
    assert BrokerSettings().connection_failed_authentication_delay_ms == 100
    settings = load_settings(env={"ODRADEK_CONNECTION_FAILED_AUTHENTICATION_DELAY_MS": "0"})
    assert settings.connection_failed_authentication_delay_ms == 0
    with pytest.raises(SettingsError, match="connection_failed_authentication_delay_ms"):
        load_settings(env={}, overrides={"connection_failed_authentication_delay_ms": "-1"})


@pytest.mark.integration
def test_only_the_failing_connection_waits_for_its_answer(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "connection_failed_authentication_delay_ms": 5_000})
    add_user(broker.bootstrap, "alice")
    port = broker.listener_ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port)) as failing:
        failing.settimeout(30)
        raw_request(failing, ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"})
        assert raw_answer(failing)["error_code"] == ErrorCode.NONE
        raw_request(failing, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0Zq9-not-it"},
                    correlation_id=2)
        broker.wait_for_log("sasl.failed")  # refused; its answer now waits 5 s
        # meanwhile another connection logs in and produces (a matter of milliseconds)
        with Producer(f"127.0.0.1:{port}", acks=1, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                      sasl_plain_password=PASSWORD) as producer:
            assert producer.send("orders", b"during").result(30).offset == 0
        readable, _, _ = select.select([failing], [], [], 0)
        assert readable == [], "the failed login was answered before its delay"
        refused = raw_answer(failing)
        assert refused is not None
        assert refused["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw_answer(failing) is None  # then closed
