"""The broker's security, built once from its settings: the TLS context of its SSL listeners,
the SCRAM credential store, and how a new connection on each listener is opened (TLS
handshake, client certificate principal, SASL session)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import trio

from broker.client_connection import ClientConnection
from broker.security.credentials import CredentialStore
from broker.security.listeners import Endpoint
from broker.security.sasl import SaslSession
from broker.settings import BrokerSettings
from broker.streams import ConnectionStream, PlainStream, TlsStream

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
#: RFC 2253's short names, as Java's X500Principal (Kafka's principal) writes them
_RDN_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
              "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
              "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


class HandshakeError(Exception):
    """The TLS handshake failed (not TLS at all, an untrusted certificate, too slow)."""


class TlsFileError(Exception):
    """A TLS file cannot be used; the message names the setting that names it."""


def server_tls_context(settings: BrokerSettings) -> ssl.SSLContext:
    assert settings.ssl_certfile and settings.ssl_keyfile  # checked by load_settings
    context = _tls_context(settings, ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = _CLIENT_AUTH[settings.ssl_client_auth]
    return context


def client_tls_context(settings: BrokerSettings) -> ssl.SSLContext:
    """For the broker connecting to another broker's TLS listener: trust ``ssl_cafile``, show
    its own certificate (the other broker may require one)."""
    return _tls_context(settings, ssl.Purpose.SERVER_AUTH)


def _tls_context(settings: BrokerSettings, purpose: ssl.Purpose) -> ssl.SSLContext:
    """The context with ``ssl_cafile`` and the broker's certificate and key loaded;
    TlsFileError naming the setting whose file is missing or not what it should be (ssl's own
    errors name no file)."""
    named = {name: getattr(settings, name) for name in ("ssl_cafile", "ssl_certfile",
                                                         "ssl_keyfile")}
    for name, path in named.items():
        try:
            if path:
                open(path, "rb").close()  # readable, or why not
        except OSError as exc:
            raise TlsFileError(f"{name}={path}: {exc.strerror}") from None
    try:
        context = ssl.create_default_context(purpose, cafile=settings.ssl_cafile)
    except ssl.SSLError as exc:
        raise TlsFileError(f"ssl_cafile={settings.ssl_cafile}: {exc}") from None
    if settings.ssl_certfile and settings.ssl_keyfile:
        try:
            context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile)
        except ssl.SSLError as exc:
            raise TlsFileError(f"ssl_certfile={settings.ssl_certfile} with ssl_keyfile="
                               f"{settings.ssl_keyfile}: {exc}") from None
    return context


def certificate_principal(certificate: dict[str, Any]) -> str:
    """``User:CN=alice,OU=eng,O=example`` from a peer certificate's subject, in RFC 2253 order
    (last RDN first) as Kafka's default principal builder gives it."""
    rdns = []
    for rdn in reversed(certificate.get("subject", ())):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={v}" for k, v in rdn))
    return "User:" + ",".join(rdns)


@dataclass
class BrokerSecurity:
    settings: BrokerSettings
    credentials: CredentialStore

    def __post_init__(self) -> None:
        uses_tls = any(e.protocol.uses_tls for e in self.settings.all_endpoints)
        self._server_tls = server_tls_context(self.settings) if uses_tls else None
        self._mechanisms = tuple(self.settings.sasl_enabled_mechanisms.split(","))
        self._failure_delay = self.settings.connection_failed_authentication_delay_ms / 1000

    async def open(self, endpoint: Endpoint, stream: trio.SocketStream,
                   connection: ClientConnection, timeout: float
                   ) -> tuple[ConnectionStream, SaslSession | None]:
        """The connection's stream once any TLS handshake is done (the client certificate's
        subject, if any, becomes the principal), and its SASL session on a SASL listener."""
        connection.listener = endpoint.name
        opened: ConnectionStream = PlainStream(stream)
        if endpoint.protocol.uses_tls:
            assert self._server_tls is not None
            tls = trio.SSLStream(stream, self._server_tls, server_side=True)
            try:
                with trio.fail_after(timeout):
                    await tls.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError) as exc:
                cause = exc.__cause__ or exc
                raise HandshakeError(f"TLS handshake failed: {type(cause).__name__}: "
                                     f"{cause}") from None
            certificate = tls.getpeercert()
            if certificate:
                connection.principal = certificate_principal(certificate)
            opened = TlsStream(tls)
        session = None
        if endpoint.protocol.uses_sasl:
            session = SaslSession(connection, self._mechanisms, self.credentials,
                                  failure_delay=self._failure_delay)
        return opened, session
