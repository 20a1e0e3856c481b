"""Certificates (trustme) and brokers with secured listeners, for the security tests."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from client.admin import Admin
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.scram import CREDENTIALS_FILE, ScramCredential, encode_users
from protocol.wire import decode_response_envelope, encode_request

PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA that signed the broker's certificate
    other_ca: Path  # a CA nobody uses
    server: Path  # the broker's key and certificate chain, one PEM file
    client: Path  # a client certificate signed by ``ca``: CN=alice,OU=eng,O=example

    def broker_settings(self, **more: Any) -> dict[str, Any]:
        return {"ssl_certfile": str(self.server), "ssl_keyfile": str(self.server),
                "ssl_cafile": str(self.ca), **more}


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    files = TlsFiles(directory / "ca.pem", directory / "other-ca.pem",
                     directory / "server.pem", directory / "client.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.other_ca))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(files.server))
    ca.issue_cert("alice@example.org", common_name="alice", organization_name="example",
                  organization_unit_name="eng").private_key_and_cert_chain_pem.write_to_path(
        str(files.client))
    return files


def add_user(bootstrap: str, name: str, password: str = PASSWORD,
             mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")) -> None:
    with Admin(bootstrap) as admin:
        for mechanism in mechanisms:
            admin.upsert_user_scram_credential(name, mechanism, password)


def write_users(data_dir: Path, *names: str, password: str = PASSWORD,
                mechanism: str = "SCRAM-SHA-256") -> None:
    """SCRAM credentials in an embedded broker's data directory before it starts (what
    ``odradek users add --data-dir`` writes)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / CREDENTIALS_FILE).write_bytes(encode_users(
        {name: {mechanism: ScramCredential.derive(mechanism, password)} for name in names}))


def sasl_ssl(tls: TlsFiles, user: str, password: str = PASSWORD,
             mechanism: str = "SCRAM-SHA-256") -> SecurityConfig:
    """A client logging in as ``user`` over SASL_SSL, trusting the test CA."""
    return SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                          sasl_mechanism=mechanism, sasl_plain_username=user,
                          sasl_plain_password=password)


def properties_file(path: Path, config: SecurityConfig) -> Path:
    """``config`` as Kafka client properties (``--command-config``), the login in
    ``sasl.jaas.config`` as Kafka writes it."""
    lines = [f"security.protocol={config.security_protocol}"]
    if config.ssl_cafile:
        lines.append(f"ssl.truststore.location={config.ssl_cafile}")
    if config.uses_sasl:
        lines += [f"sasl.mechanism={config.sasl_mechanism}",
                  "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                  f'required username="{config.sasl_plain_username}" '
                  f'password="{config.sasl_plain_password}";']
    path.write_text("\n".join(lines) + "\n")
    return path


def raw_request(sock: socket.socket, api: ApiKey, body: dict[str, Any],
                correlation_id: int = 1) -> None:
    sock.sendall(encode_request(api, 0, correlation_id, "raw", body))


def raw_answer(sock: socket.socket) -> Any | None:
    """The next response's body, or None if the broker closed the connection instead."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    payload = _read_exactly(sock, struct.unpack(">i", head)[0])
    if payload is None:
        return None
    return decode_response_envelope(payload)[1]


def closed_by_broker(sock: socket.socket) -> bool:
    """Whether the broker closed the connection (reads to the end; times out per the socket)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data
