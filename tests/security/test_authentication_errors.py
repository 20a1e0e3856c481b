"""A client that cannot open a connection on a listener's terms -- a wrong password, an unknown
user, no SASL settings on a SASL listener, an untrusted or misnamed certificate, the wrong
security protocol -- gets a typed error that is not retriable, naming the listener, long before
its timeout; the ``odradek`` command prints it as one line."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from client.admin import Admin
from client.consumer import Consumer
from client.errors import SecurityProtocolMismatchError, SslHandshakeError
from client.producer import Producer
from client.records import TopicPartition
from client.security import SecurityConfig
from protocol.errors import OdradekError, SaslAuthenticationFailedError
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.security.support import PASSWORD, add_user, properties_file

pytestmark = pytest.mark.integration

#: every client's timeout here; the errors must come well before it
TIMEOUT_MS = 60_000
#: "well before": the deadline each error must beat
DEADLINE_S = 20.0
WRONG = "Zq9-not-it"


class Listeners:
    """One broker with a PLAINTEXT, a SASL_PLAINTEXT and an SSL listener. Its certificate names
    broker.example only, so a client that trusts its CA and connects to 127.0.0.1 sees a name
    mismatch."""

    def __init__(self, broker: BrokerProcess, ca: Path, other_ca: Path) -> None:
        self.broker = broker
        self.ca = ca
        self.other_ca = other_ca

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.listener_ports[listener]}"


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    directory = tmp_path_factory.mktemp("authentication-errors")
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    server = directory / "server.pem"
    ca.issue_cert("broker.example").private_key_and_cert_chain_pem.write_to_path(str(server))
    broker = BrokerProcess(directory / "data", settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl_certfile": str(server), "ssl_keyfile": str(server),
        "sasl_enabled_mechanisms": "PLAIN,SCRAM-SHA-256"})
    broker.start()
    try:
        add_user(broker.bootstrap, "alice")
        yield Listeners(broker, directory / "ca.pem", directory / "other-ca.pem")
    finally:
        broker.stop()
        print(f"===== broker log =====\n{broker.log_text()}")


def sasl(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}


#: (case, listener, client options, error type, what its message says besides the listener)
CASES: list[tuple[str, str, Callable[[Listeners], dict[str, Any]], type[OdradekError],
                  list[str]]] = [
    ("wrong password", "SASL_PLAINTEXT", lambda _: sasl("SCRAM-SHA-256", "alice", WRONG),
     SaslAuthenticationFailedError, ["user 'alice'", "mechanism SCRAM-SHA-256"]),
    ("unknown user", "SASL_PLAINTEXT", lambda _: sasl("PLAIN", "mallory", WRONG),
     SaslAuthenticationFailedError, ["user 'mallory'", "mechanism PLAIN"]),
    ("no SASL settings", "SASL_PLAINTEXT", lambda _: {},
     SecurityProtocolMismatchError, ["the listener requires SASL", "SASL_PLAINTEXT listener",
                                     "security_protocol is PLAINTEXT"]),
    ("untrusted CA", "SSL",
     lambda ls: {"security_protocol": "SSL", "ssl_cafile": str(ls.other_ca)},
     SslHandshakeError, ["CERTIFICATE_VERIFY_FAILED", "does not trust its certificate"]),
    ("name mismatch", "SSL", lambda ls: {"security_protocol": "SSL", "ssl_cafile": str(ls.ca)},
     SslHandshakeError, ["CERTIFICATE_VERIFY_FAILED", "does not name '127.0.0.1'"]),
    ("PLAINTEXT on TLS", "SSL", lambda _: {},
     SecurityProtocolMismatchError, ["the listener expects TLS", "an SSL listener"]),
    ("TLS on PLAINTEXT", "PLAINTEXT",
     lambda ls: {"security_protocol": "SSL", "ssl_cafile": str(ls.ca)},
     SecurityProtocolMismatchError, ["the listener does not speak TLS", "PLAINTEXT listener"]),
]


def produce(address: str, options: dict[str, Any]) -> None:
    with Producer(address, max_block_ms=TIMEOUT_MS, request_timeout_ms=TIMEOUT_MS,
                  **options) as producer:
        producer.send("orders", b"v").result(TIMEOUT_MS / 1000)


def list_topics(address: str, options: dict[str, Any]) -> None:
    with Admin(address, timeout_ms=TIMEOUT_MS, request_timeout_ms=TIMEOUT_MS,
               **options) as admin:
        admin.list_topics()


def consume(address: str, options: dict[str, Any]) -> None:
    with Consumer(address, request_timeout_ms=TIMEOUT_MS, default_api_timeout_ms=TIMEOUT_MS,
                  **options) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.poll(TIMEOUT_MS)


@pytest.mark.parametrize("use", [produce, list_topics, consume],
                         ids=["producer", "admin", "consumer"])
@pytest.mark.parametrize(("listener", "options", "error", "says"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_client_raises_a_typed_error_naming_the_listener_at_once(
        listeners: Listeners, use: Callable[[str, dict[str, Any]], None], listener: str,
        options: Callable[[Listeners], dict[str, Any]], error: type[OdradekError],
        says: list[str]):
    address = listeners.address(listener)
    started = time.monotonic()
    with pytest.raises(error) as raised:
        use(address, options(listeners))
    took = time.monotonic() - started
    assert took < DEADLINE_S, f"raised after {took:.1f} s, not long before the timeout"
    assert not raised.value.retriable
    message = str(raised.value)
    assert address in message
    for words in says:
        assert words in message
    assert WRONG not in message and PASSWORD not in message


def odradek(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tooling.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT)


@pytest.mark.parametrize(("command", "listener", "security", "says"), [
    (["topics", "list"], "SASL_PLAINTEXT",
     SecurityConfig(**sasl("SCRAM-SHA-256", "alice", WRONG)),
     "invalid credentials with SASL mechanism SCRAM-SHA-256 (user 'alice', mechanism "
     "SCRAM-SHA-256, listener {address})"),
    (["consume", "orders", "--max-messages", "1"], "SASL_PLAINTEXT", None,
     "{address} closed the connection: the listener requires SASL"),
    (["topics", "list"], "SSL", None, "{address} closed the connection: the listener expects "
     "TLS (an SSL listener)"),
], ids=["wrong password", "no SASL settings", "PLAINTEXT on TLS"])
def test_the_command_prints_one_line_and_exits_1(
        listeners: Listeners, tmp_path: Path, command: list[str], listener: str,
        security: SecurityConfig | None, says: str):
    address = listeners.address(listener)
    config = []
    if security is not None:
        config = ["--command-config", str(properties_file(tmp_path / "client.properties",
                                                          security))]
    # the deadline: the command must end well within its own --api-timeout-ms
    done = odradek(*command, "--bootstrap", address, "--api-timeout-ms", str(TIMEOUT_MS),
                   *config, timeout=DEADLINE_S)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("odradek: error: ")
    assert says.format(address=address) in lines[0]
    assert WRONG not in done.stderr
