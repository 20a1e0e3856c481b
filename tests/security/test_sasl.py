"""SASL listeners: right and wrong passwords for each mechanism, the handshake's errors, no
request before authentication, and a flood of failed logins that costs others nothing."""

from __future__ import annotations

import json
import os
import select
import socket
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

FAILED_LOGINS = 1000
#: failed logins in flight at once: the broker may hold each failure's answer back for
#: connection_failed_authentication_delay_ms (Kafka: 100 ms), so 1,000 one after another
#: could take over 100 s
ATTACKERS = 25
#: a round of 200 acknowledged sends takes milliseconds; this only bounds a hang
ROUND_DEADLINE_S = 30.0
REFUSED = "handshake NONE, authenticate SASL_AUTHENTICATION_FAILED, then closed"

#: ``python -c _ATTACKER PORT COUNT ATTACKERS EXPECTED``: logs in as alice over PLAIN with a
#: wrong password COUNT times, ATTACKERS at once, and stops early once an attempt does not end
#: as EXPECTED. Prints "attacking" when the first attempt has ended, then how each attempt
#: ended, counted, as JSON.
_ATTACKER = """
import json, socket, struct, sys, threading
from collections import Counter
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.wire import decode_response_envelope, encode_request
port, count, attackers, expected = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
guesses = iter(range(count))
outcomes = Counter()
lock = threading.Lock()

def read(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data

def answer(sock):
    head = read(sock, 4)
    payload = head and read(sock, struct.unpack(">i", head)[0])
    return None if payload is None else decode_response_envelope(payload)[1]

def code(body):
    return "closed" if body is None else ErrorCode(body["error_code"]).name

def attempt(guess):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 0, 1, "attacker",
                                    {"mechanism": "PLAIN"}))
        handshake = code(answer(sock))
        sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 0, 2, "attacker",
                                    {"auth_bytes": b"\\0alice\\0guess%d" % guess}))
        refused = code(answer(sock))
        try:
            after = "then closed" if answer(sock) is None else "then answered again"
        except TimeoutError:
            after = "then still open"
        return f"handshake {handshake}, authenticate {refused}, {after}"

def attack():
    while True:
        with lock:
            guess = None if set(outcomes) - {expected} else next(guesses, None)
        if guess is None:
            return
        try:
            outcome = attempt(guess)
        except OSError as exc:
            outcome = type(exc).__name__
        with lock:
            if not outcomes:
                print("attacking", flush=True)
            outcomes[outcome] += 1

threads = [threading.Thread(target=attack) for _ in range(attackers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(outcomes), flush=True)
"""


class FailedLogins:
    """FAILED_LOGINS wrong-password PLAIN logins from a process of their own (a client
    elsewhere: the test process's GIL is the producer's), ATTACKERS at a time."""

    def __init__(self, port: int, count: int = FAILED_LOGINS) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ATTACKER, str(port), str(count), str(ATTACKERS), REFUSED],
            stdout=subprocess.PIPE, text=True, env=env)

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_until_started(self, timeout: float = 60.0) -> None:
        """Until the broker has answered the first of them: the flood is on."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no failed login answered within {timeout:g} s"
        said = self.proc.stdout.readline().strip()
        assert said == "attacking", f"the failed logins did not start: {said!r}"

    def outcomes(self, timeout: float = 120.0) -> dict[str, int]:
        """How each attempt ended, once all have."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            if self.running():
                self.proc.kill()
                self.proc.wait(10)
        assert self.proc.returncode == 0, out
        outcomes: dict[str, int] = json.loads(out.splitlines()[-1])
        return outcomes


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _produce_round(producer: Producer) -> None:
    """200 acknowledged 100-byte messages; a round the broker stopped answering fails at
    ROUND_DEADLINE_S."""
    futures = [producer.send("flood", b"x" * 100) for _ in range(200)]
    producer.flush(ROUND_DEADLINE_S)
    for future in futures:
        future.result(0)  # acknowledged, not failed


def test_a_thousand_failed_logins_neither_stall_an_authenticated_producer_nor_grow_memory(
        sasl_broker: BrokerProcess):
    """A flood of failed PLAIN logins (each a PBKDF2 on the broker): every one is refused,
    an authenticated producer keeps having its sends acknowledged while they go on, and a
    second flood leaves the broker's memory where the first left it. How much slower the
    producer gets meanwhile is measured by benchmarks/security.py (``failed_logins``)."""
    port = sasl_broker.listener_ports["SASL_PLAINTEXT"]
    producer = Producer(sasl_address(sasl_broker), acks=1, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                        sasl_plain_password=PASSWORD)
    with producer:
        _produce_round(producer)  # logged in, topic created
        attack = FailedLogins(port)
        attack.wait_until_started()
        rounds_during = 0
        while attack.running():
            _produce_round(producer)
            if attack.running():  # ended while failed logins were still coming in
                rounds_during += 1
        assert attack.outcomes() == {REFUSED: FAILED_LOGINS}
        print(f"{rounds_during} rounds of 200 sends acknowledged during "
              f"{FAILED_LOGINS} failed logins")
        assert rounds_during > 0, "the producer had nothing acknowledged during the flood"
    rss_after_first = _rss_kib(sasl_broker.pid)
    assert FailedLogins(port).outcomes() == {REFUSED: FAILED_LOGINS}
    rss_after_second = _rss_kib(sasl_broker.pid)
    print(f"broker RSS: {rss_after_first} KiB after {FAILED_LOGINS} failed logins, "
          f"{rss_after_second} KiB after {2 * FAILED_LOGINS}")
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
