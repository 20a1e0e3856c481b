"""TLS listeners: the right CA works, another CA is refused, PLAINTEXT bytes are refused
without harm, and a client certificate becomes the principal."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from broker.client_connection import ClientConnection
from broker.security.credentials import FileCredentialStore
from broker.security.listeners import parse_endpoints
from broker.security.setup import BrokerSecurity, HandshakeError
from broker.settings import BrokerSettings
from client.consumer import Consumer
from client.errors import SslHandshakeError
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from client.security import SecurityConfig
from protocol.apis import ApiKey
from tests.broker_process import BrokerProcess
from tests.security.support import TlsFiles, closed_by_broker, make_tls_files, raw_request


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path / "tls")


@pytest.fixture
def ssl_broker(make_broker: Callable[..., BrokerProcess], tls: TlsFiles) -> BrokerProcess:
    broker = make_broker(settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"))
    return broker


def ssl_address(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.listener_ports['SSL']}"


def api_versions(bootstrap: str, security: SecurityConfig) -> dict[str, object]:
    network = NetworkClient(bootstrap, request_timeout_ms=10_000, security=security)
    try:
        return network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
    finally:
        network.close()


def test_a_client_trusting_another_ca_is_refused(ssl_broker: BrokerProcess, tls: TlsFiles):
    security = SecurityConfig(security_protocol="SSL", ssl_cafile=str(tls.other_ca))
    with pytest.raises(SslHandshakeError, match="CERTIFICATE_VERIFY_FAILED"):
        api_versions(ssl_address(ssl_broker), security)
    ssl_broker.wait_for_log("TLS handshake failed")


def test_a_client_trusting_the_right_ca_produces_and_consumes(ssl_broker: BrokerProcess,
                                                              tls: TlsFiles):
    options = {"security_protocol": "SSL", "ssl_cafile": str(tls.ca)}
    bootstrap = ssl_address(ssl_broker)
    with Producer(bootstrap, **options) as producer:  # type: ignore[arg-type]
        for i in range(20):
            producer.send("tls", b"v%d" % i)
        producer.flush(10)
    with Consumer(bootstrap, auto_offset_reset="earliest", **options) as consumer:  # type: ignore[arg-type]
        consumer.assign([TopicPartition("tls", 0)])
        got: list[bytes] = []
        for _ in range(50):
            got += [r.value for r in consumer.poll(200)]
            if len(got) == 20:
                break
    assert got == [b"v%d" % i for i in range(20)]


def test_plaintext_bytes_to_an_ssl_listener_are_refused_and_the_broker_serves_on(
        ssl_broker: BrokerProcess, tls: TlsFiles):
    with socket.create_connection(("127.0.0.1", ssl_broker.listener_ports["SSL"])) as sock:
        sock.settimeout(10)
        raw_request(sock, ApiKey.API_VERSIONS, {})
        assert closed_by_broker(sock)
    ssl_broker.wait_for_log("TLS handshake failed")
    security = SecurityConfig(security_protocol="SSL", ssl_cafile=str(tls.ca))
    assert api_versions(ssl_address(ssl_broker), security)["apis"]
    assert api_versions(ssl_broker.bootstrap, SecurityConfig())["apis"]


def test_required_client_certificates_refuse_a_client_without_one(
        make_broker: Callable[..., BrokerProcess], tls: TlsFiles):
    broker = make_broker(settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", ssl_client_auth="required"))
    without = SecurityConfig(security_protocol="SSL", ssl_cafile=str(tls.ca))
    with pytest.raises(Exception) as refused:
        api_versions(ssl_address(broker), without)
    assert "certificate" in str(refused.value).lower() or "closed" in str(refused.value)
    with_cert = SecurityConfig(security_protocol="SSL", ssl_cafile=str(tls.ca),
                               ssl_certfile=str(tls.client), ssl_keyfile=str(tls.client))
    assert api_versions(ssl_address(broker), with_cert)["apis"]


async def _principal_after_handshake(tls: TlsFiles, tmp_path: Path, *, client_cert: bool
                                     ) -> str:
    """Open one SSL connection through the broker's own security setup; the principal the
    connection ends up with."""
    settings = BrokerSettings(listeners="SSL://127.0.0.1:0", data_dir=str(tmp_path),
                              ssl_client_auth="requested", **tls.broker_settings())
    security = BrokerSecurity(settings, FileCredentialStore(tmp_path))
    endpoint = parse_endpoints(settings.listeners)[0]
    connection = ClientConnection(1, "127.0.0.1")
    client_context = ssl.create_default_context(cafile=str(tls.ca))
    if client_cert:
        client_context.load_cert_chain(str(tls.client))
    server_sock, client_sock = socket.socketpair()
    async with trio.open_nursery() as nursery:
        server_stream = trio.SocketStream(trio.socket.from_stdlib_socket(server_sock))
        client_stream = trio.SSLStream(trio.SocketStream(trio.socket.from_stdlib_socket(
            client_sock)), client_context, server_hostname="127.0.0.1")
        nursery.start_soon(client_stream.do_handshake)
        _, session = await security.open(endpoint, server_stream, connection, 10)
        assert session is None
    assert connection.listener == "SSL"
    return connection.principal


async def test_mutual_tls_gives_the_certificates_principal(tls: TlsFiles, tmp_path: Path):
    principal = await _principal_after_handshake(tls, tmp_path, client_cert=True)
    assert principal == "User:CN=alice,OU=eng,O=example"


async def test_tls_without_a_client_certificate_stays_anonymous(tls: TlsFiles, tmp_path: Path):
    assert await _principal_after_handshake(tls, tmp_path, client_cert=False) == (
        "User:ANONYMOUS")


async def test_a_handshake_that_is_not_tls_is_a_handshake_error(tls: TlsFiles, tmp_path: Path):
    settings = BrokerSettings(listeners="SSL://127.0.0.1:0", data_dir=str(tmp_path),
                              **tls.broker_settings())
    security = BrokerSecurity(settings, FileCredentialStore(tmp_path))
    server_sock, client_sock = socket.socketpair()
    with client_sock:
        client_sock.sendall(b"\x00\x00\x00\x10not a tls hello!")
        with pytest.raises(HandshakeError, match="TLS handshake failed"):
            await security.open(parse_endpoints(settings.listeners)[0],
                                trio.SocketStream(trio.socket.from_stdlib_socket(server_sock)),
                                ClientConnection(1, "127.0.0.1"), 10)
