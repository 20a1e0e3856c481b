"""Which security protocol a listener speaks, asked of the listener itself.

A broker closes a connection that does not speak its listener's protocol without a word: a
PLAINTEXT client's first request on a SASL listener, or any plain bytes on a TLS one, end in a
closed connection, exactly as a broker that is stopping would. Kafka's clients cannot tell the
two apart and retry until their timeout. When a new connection closes before it got any answer
(or the first bytes that came are a TLS alert), the client asks the listener instead:

1. a SaslHandshake in the clear: answered NONE or UNSUPPORTED_SASL_MECHANISM by a SASL_PLAINTEXT
   listener (with its mechanisms), ILLEGAL_SASL_STATE by a PLAINTEXT one;
2. else a TLS handshake that trusts any certificate -- only to learn that the listener speaks
   TLS, nothing is sent that matters -- then the same SaslHandshake: SASL_SSL or SSL.

No answer to either (a broker stopping, something that is not a broker) tells nothing: the
caller keeps its retriable connection error. Each step is bounded by ``timeout``.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from client.connection import BrokerConnection
from client.errors import SecurityProtocolMismatchError
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    ProtocolError,
    UnsupportedSaslMechanismError,
)

#: the first bytes of a TLS alert record (content type 21, version 3.x): a TLS listener's
#: answer to bytes that are not a TLS handshake, where a frame's length was expected
TLS_ALERT_PREFIX = b"\x15\x03"
_RECV_BYTES = 65536


@dataclass(frozen=True)
class ListenerKind:
    """What a listener was found to speak. ``sasl`` is None when a TLS listener would not say
    (it wants a client certificate the probe does not have)."""

    tls: bool
    sasl: bool | None
    mechanisms: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        """Kafka's name for it: PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL -- or "SSL or
        SASL_SSL" when only the TLS is known."""
        if self.sasl is None:
            return "SSL or SASL_SSL"
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")


def probe_listener(host: str, port: int, timeout: float, *, client_id: str = "odradek",
                   certificate: tuple[str, str] | None = None) -> ListenerKind | None:
    """What the listener at ``host:port`` speaks, or None if it would not say. ``certificate``
    (certfile, keyfile): the client's own, shown where a listener requires one."""
    try:
        sasl = _sasl_answer(socket.create_connection((host, port), timeout), client_id)
    except (OSError, ProtocolError):
        sasl = None
    if sasl is not None:
        return ListenerKind(tls=False, sasl=sasl[0], mechanisms=sasl[1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only "does it speak TLS" is asked
    try:
        if certificate is not None:
            context.load_cert_chain(*certificate)
        sock = context.wrap_socket(socket.create_connection((host, port), timeout),
                                   server_hostname=host)
    except OSError:
        return None  # neither plain nor TLS answered
    try:
        sasl = _sasl_answer(sock, client_id)
    except ssl.SSLError:
        return ListenerKind(tls=True, sasl=None)  # TLS, but it refused what came next
    except (OSError, ProtocolError):
        sasl = None
    if sasl is None:
        return ListenerKind(tls=True, sasl=None)
    return ListenerKind(tls=True, sasl=sasl[0], mechanisms=sasl[1])


def _sasl_answer(sock: socket.socket, client_id: str) -> tuple[bool, tuple[str, ...]] | None:
    """Send SaslHandshake on ``sock`` (closed after): (whether the listener does SASL, its
    mechanisms), or None if it closed without an answer."""
    with sock:
        protocol = BrokerConnection(client_id)
        protocol.send_request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"})
        sock.sendall(protocol.data_to_send())
        while True:
            data = sock.recv(_RECV_BYTES)
            if not data:
                return None
            for response in protocol.receive_data(data):
                if isinstance(response.error, IllegalSaslStateError):
                    return False, ()
                if isinstance(response.error, UnsupportedSaslMechanismError):
                    return True, ()
                if response.body is None:
                    return None
                code = response.body["error_code"]
                mechanisms = tuple(response.body["mechanisms"])
                if code == ErrorCode.ILLEGAL_SASL_STATE:
                    return False, ()
                if code in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_SASL_MECHANISM):
                    return True, mechanisms
                return None


def mismatch_error(address: str, kind: ListenerKind, security: SecurityConfig
                   ) -> SecurityProtocolMismatchError | None:
    """The error for a client of ``security`` on a listener that speaks ``kind``, saying what
    the listener expects and which settings give it; None when the two agree (or the listener
    would not say enough to tell)."""
    if kind.sasl is None and kind.tls == security.uses_tls:
        return None
    if kind.protocol == security.security_protocol:
        return None
    needs = []
    if kind.tls != security.uses_tls:
        needs.append("expects TLS" if kind.tls else "does not speak TLS")
    if kind.sasl is not None and kind.sasl != security.uses_sasl:
        needs.append("requires SASL" if kind.sasl else "does not use SASL")
    settings = f"security_protocol={kind.protocol}"
    if kind.sasl and not security.uses_sasl:
        settings += " with sasl_mechanism, sasl_plain_username and sasl_plain_password"
    article = "an" if kind.protocol.startswith("SSL") else "a"
    mechanisms = f", SASL mechanisms {', '.join(kind.mechanisms)}" if kind.mechanisms else ""
    return SecurityProtocolMismatchError(
        f"{address} closed the connection: the listener {' and '.join(needs)} ({article} "
        f"{kind.protocol} listener{mechanisms}), and this client's security_protocol is "
        f"{security.security_protocol}: set {settings}")
