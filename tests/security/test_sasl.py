"""SASL listeners: right and wrong passwords for each mechanism, the handshake's errors, no
request before authentication, and a flood of failed logins that costs others nothing."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client.admin import Admin
from client.errors import BrokerConnectionError, ConfigError
from client.network import NetworkClient
from client.producer import Producer
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.security.support import (
    PASSWORD,
    add_user,
    closed_by_broker,
    make_tls_files,
    raw_answer,
    raw_request,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture
def sasl_broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"})
    add_user(broker.bootstrap, "alice")
    return broker


def sasl_address(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}"


def login(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, object]:
    """ApiVersions after logging in: the login's error if it fails."""
    security = SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                              sasl_plain_username=user, sasl_plain_password=password)
    network = NetworkClient(bootstrap, request_timeout_ms=10_000, security=security)
    try:
        return network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
    finally:
        network.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_right_password_logs_in(sasl_broker: BrokerProcess, mechanism: str):
    assert login(sasl_address(sasl_broker), mechanism, "alice", PASSWORD)["apis"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user, password", [("alice", "Zq9-not-it"), ("mallory", PASSWORD)])
def test_a_wrong_password_or_user_is_refused_and_the_connection_closed(
        sasl_broker: BrokerProcess, mechanism: str, user: str, password: str):
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials") as refused:
        login(sasl_address(sasl_broker), mechanism, user, password)
    assert password not in str(refused.value)
    sasl_broker.wait_for_log("sasl.failed")
    assert password not in sasl_broker.log_text()


def test_a_disabled_mechanism_is_refused_naming_the_enabled_ones(
        make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl_enabled_mechanisms": "SCRAM-SHA-512"})
    add_user(broker.bootstrap, "alice")
    with pytest.raises(UnsupportedSaslMechanismError, match=r"enabled: SCRAM-SHA-512"):
        login(sasl_address(broker), "PLAIN", "alice", PASSWORD)
    assert login(sasl_address(broker), "SCRAM-SHA-512", "alice", PASSWORD)["apis"]


def test_a_request_before_authentication_closes_the_connection_with_nothing_done(
        sasl_broker: BrokerProcess):
    with socket.create_connection(("127.0.0.1", sasl_broker.listener_ports[
            "SASL_PLAINTEXT"])) as sock:
        sock.settimeout(10)
        raw_request(sock, ApiKey.API_VERSIONS, {})  # allowed before authentication
        assert raw_answer(sock)["error_code"] == 0
        raw_request(sock, ApiKey.CREATE_TOPICS, {
            "topics": [{"name": "sneaky", "num_partitions": 1, "replication_factor": 1,
                        "configs": {}}],
            "timeout_ms": 1000, "validate_only": False}, correlation_id=2)
        assert raw_answer(sock) is None
    sasl_broker.wait_for_log("CreateTopics before SASL authentication")
    with Admin(sasl_broker.bootstrap) as admin:
        assert "sneaky" not in admin.list_topics()


def test_a_malformed_request_before_authentication_closes_the_connection_too(
        sasl_broker: BrokerProcess):
    with socket.create_connection(("127.0.0.1", sasl_broker.listener_ports[
            "SASL_PLAINTEXT"])) as sock:
        sock.settimeout(10)
        raw_request(sock, ApiKey.DELETE_TOPICS, {"not": "a DeleteTopics body"})
        assert raw_answer(sock) is None
    sasl_broker.wait_for_log("API 20 before SASL authentication")


def test_authenticate_before_the_handshake_is_an_illegal_state(sasl_broker: BrokerProcess):
    with socket.create_connection(("127.0.0.1", sasl_broker.listener_ports[
            "SASL_PLAINTEXT"])) as sock:
        sock.settimeout(10)
        raw_request(sock, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0x"})
        answer = raw_answer(sock)
        assert answer is not None
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert closed_by_broker(sock)


def test_the_password_is_in_no_repr_or_config_error():
    security = SecurityConfig(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                              sasl_plain_username="alice", sasl_plain_password="hunter2")
    assert "hunter2" not in repr(security)
    with pytest.raises(ConfigError) as bad:
        SecurityConfig(security_protocol="SASL_SSL", sasl_mechanism="NOPE",
                       sasl_plain_username="alice", sasl_plain_password="hunter2")
    assert "hunter2" not in str(bad.value)


# ---------------------------------------------------------------- a flood of failed logins

_ATTACKER = """
import socket, sys
from protocol.apis import ApiKey
from protocol.wire import encode_request
port, count = int(sys.argv[1]), int(sys.argv[2])
failed = 0
for i in range(count):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 0, 1, "attacker",
                                    {"mechanism": "PLAIN"}))
        sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 0, 2, "attacker",
                                    {"auth_bytes": b"\\0alice\\0guess%d" % i}))
        while sock.recv(65536):
            pass
        failed += 1
print(failed, flush=True)
"""


def _failed_logins(port: int, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-c", _ATTACKER, str(port), str(count)],
                            stdout=subprocess.PIPE, text=True, env=env)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _produce_rounds(producer: Producer, rounds: int) -> list[float]:
    """Seconds each round of 200 acknowledged 100-byte messages took."""
    spent = []
    for _ in range(rounds):
        start = time.monotonic()
        futures = [producer.send("flood", b"x" * 100) for _ in range(200)]
        producer.flush(30)
        assert all(f.done() for f in futures)
        spent.append(time.monotonic() - start)
    return spent


def test_a_thousand_failed_logins_neither_slow_an_authenticated_producer_nor_grow_memory(
        sasl_broker: BrokerProcess):
    """Issue 14 asks for this measured: produce during 1,000 failed PLAIN logins in a row
    (each a PBKDF2 on the broker) is at most 2x slower than without; a second 1,000 leave
    the broker's memory where the first left it."""
    port = sasl_broker.listener_ports["SASL_PLAINTEXT"]
    producer = Producer(sasl_address(sasl_broker), acks=1, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                        sasl_plain_password=PASSWORD)
    with producer:
        _produce_rounds(producer, 3)  # connected, topic created, warmed up
        baseline = statistics.median(_produce_rounds(producer, 15))
        attacker = _failed_logins(port, 1000)
        during: list[float] = []
        while attacker.poll() is None:
            during += _produce_rounds(producer, 1)
        assert attacker.communicate(timeout=60)[0].strip() == "1000"
        assert len(during) >= 3, "the failed logins ended before produce could be measured"
        # medians: a round that the scheduler happens to stall on either side is not the broker
        under_attack = statistics.median(during)
        print(f"produce round (median): {baseline * 1000:.1f} ms alone, "
              f"{under_attack * 1000:.1f} ms during 1,000 failed logins ({len(during)} rounds)")
        assert under_attack <= 2 * baseline
    rss_after_first = _rss_kib(sasl_broker.pid)
    second = _failed_logins(port, 1000)
    assert second.communicate(timeout=120)[0].strip() == "1000"
    rss_after_second = _rss_kib(sasl_broker.pid)
    print(f"broker RSS: {rss_after_first} KiB after 1,000 failed logins, "
          f"{rss_after_second} KiB after 2,000")
    assert rss_after_second - rss_after_first < 4 * 1024
    assert login(sasl_address(sasl_broker), "SCRAM-SHA-256", "alice", PASSWORD)["apis"]


def test_logging_in_where_the_listener_has_no_sasl_is_an_illegal_state(
        sasl_broker: BrokerProcess):
    with pytest.raises(IllegalSaslStateError):
        login(sasl_broker.bootstrap, "SCRAM-SHA-256", "alice", PASSWORD)


def test_a_broker_closing_the_connection_mid_login_fails_the_request_not_the_client(
        make_broker: Callable[..., BrokerProcess], tmp_path: Path):
    tls = make_tls_files(tmp_path / "tls")
    broker = make_broker(settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"))
    security = SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_plain_username="alice", sasl_plain_password=PASSWORD)
    network = NetworkClient(f"127.0.0.1:{broker.listener_ports['SSL']}",
                            request_timeout_ms=5_000, reconnect_backoff_ms=10,
                            security=security)
    try:
        for _ in range(2):  # the connection fails cleanly, and again on the next try
            with pytest.raises(BrokerConnectionError, match="closed the connection"):
                network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
            time.sleep(0.05)  # past the reconnect backoff
    finally:
        network.close()
