"""The client's side of a SASL mechanism, sans-IO: the tokens SaslAuthenticate requests carry.

``SaslClientMechanism(mechanism, username, password)``: ``first()`` is the first token;
``respond(server_token)`` the next one, or None once the exchange is complete (the server's
final SCRAM message is checked: a broker that does not know the credential is refused too).
Used by the clients and by brokers logging in to other brokers. The password stays in this
object; it is in no repr or exception.
"""

from __future__ import annotations

from scramp import ScramClient, ScramException

from protocol.scram import SCRAM_MECHANISMS

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslMechanismError(ValueError):
    """The mechanism is unknown, or the server's answer does not verify."""


class SaslClientMechanism:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in MECHANISMS:
            raise SaslMechanismError(
                f"sasl_mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._scram: ScramClient | None = None
        self._step = 0

    def __repr__(self) -> str:
        return f"SaslClientMechanism({self.mechanism}, username={self.username!r})"

    def first(self) -> bytes:
        self._step = 1
        if self.mechanism == "PLAIN":
            return f"\0{self.username}\0{self._password}".encode()
        self._scram = ScramClient([self.mechanism], self.username, self._password)
        return str(self._scram.get_client_first()).encode()

    def respond(self, server_token: bytes) -> bytes | None:
        """The next token, or None when the exchange is complete."""
        step, self._step = self._step, self._step + 1
        if self._scram is None or step == 0:
            if step == 0:
                raise SaslMechanismError("first() must come before respond()")
            return None  # PLAIN: one token
        try:
            if step == 1:
                self._scram.set_server_first(server_token.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(server_token.decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise SaslMechanismError(
                f"{self.mechanism}: the broker's answer does not verify "
                f"({type(exc).__name__})") from None
        return None
