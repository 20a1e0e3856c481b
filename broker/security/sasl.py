"""One connection's SASL exchange on a SASL listener (Kafka's v1 flow, KIP-152).

SaslHandshake names the mechanism; SaslAuthenticate requests carry the mechanism's tokens
until it succeeds. Until then only ApiVersions, SaslHandshake and SaslAuthenticate are
admitted: anything else closes the connection with nothing done. A failed login is answered
SASL_AUTHENTICATION_FAILED and the connection closed; a request out of order ILLEGAL_SASL_STATE
(closed too, unless already authenticated).

The failure's answer waits ``connection_failed_authentication_delay_ms`` first (Kafka's
connection.failed.authentication.delay.ms, KIP-306), so a password guesser gets a few answers a
second per connection instead of thousands. Only the failing connection's own task sleeps: the
broker serves every other connection meanwhile.

PLAIN is checked against the user's SCRAM credential (derived again from the password with the
stored salt and iterations, in a worker thread so a flood of PLAIN logins does not stall the
broker's requests): one store, no password kept anywhere. SCRAM is scramp's server.

The state machine is the table ``SASL_MACHINE`` (broker/security/sasl_state.py,
docs/state-machines/sasl.md): a move it does not list is a bug, raised naming the state and the
event.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import structlog
import trio
from scramp import ScramException, ScramMechanism

from broker.client_connection import ClientConnection
from broker.security.credentials import CredentialStore
from broker.security.sasl_state import SASL_MACHINE, SaslEvent, SaslState
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.scram import SCRAM_MECHANISMS, CredentialFormatError, ScramCredential

log = structlog.get_logger(__name__)

#: what a SASL listener answers before authentication (Kafka's list)
ADMITTED_BEFORE_AUTHENTICATION = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


#: Kafka's words: the same for an unknown user and a wrong password
FAILED_MESSAGE = "Authentication failed: invalid credentials with SASL mechanism {}"


class SaslSession:
    def __init__(self, connection: ClientConnection, enabled: tuple[str, ...],
                 store: CredentialStore, *, failure_delay: float = 0.0) -> None:
        self._connection = connection
        self._enabled = enabled
        self._store = store
        self._failure_delay = failure_delay  # seconds before a failed login is answered
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self._scram: Any = None  # scramp's server, between the two SCRAM steps
        self._user: str | None = None

    def admits(self, api: int) -> bool:
        return self.state is SaslState.AUTHENTICATED or api in ADMITTED_BEFORE_AUTHENTICATION

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def _move(self, event: SaslEvent) -> None:
        self.state = SASL_MACHINE.next_state(self.state, event)

    def handshake(self, mechanism: str) -> dict[str, Any]:
        enabled = list(self._enabled)
        if self.state is not SaslState.HANDSHAKE:
            self._move(SaslEvent.OUT_OF_ORDER)
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
        if mechanism not in self._enabled:
            self._move(SaslEvent.HANDSHAKE_UNSUPPORTED)
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
        self.mechanism = mechanism
        self._move(SaslEvent.HANDSHAKE_OK)
        return {"error_code": ErrorCode.NONE, "mechanisms": enabled}

    async def authenticate(self, token: bytes) -> dict[str, Any]:
        if self.state is not SaslState.AUTHENTICATE:
            self._move(SaslEvent.OUT_OF_ORDER)
            return _answer(ErrorCode.ILLEGAL_SASL_STATE,
                           f"SaslAuthenticate while {self.state.value}: send SaslHandshake first"
                           if self.state is SaslState.HANDSHAKE else
                           f"SaslAuthenticate while {self.state.value}")
        assert self.mechanism is not None
        try:
            if self.mechanism == "PLAIN":
                reply = await self._plain(token)
            else:
                reply = await self._scram_step(token)
        except CredentialFormatError as exc:  # the store is damaged: an operator must know
            log.warning("sasl.credentials_unreadable", mechanism=self.mechanism, reason=str(exc))
            reply = None
        except (ScramException, UnicodeDecodeError, ValueError):
            reply = None
        if reply is None:
            self._move(SaslEvent.FAILED)
            log.info("sasl.failed", conn=self._connection.id, host=self._connection.host,
                     mechanism=self.mechanism)
            await trio.sleep(self._failure_delay)  # this connection's task only (KIP-306)
            return _answer(ErrorCode.SASL_AUTHENTICATION_FAILED,
                           FAILED_MESSAGE.format(self.mechanism))
        if self._user is not None and not self._scram:
            log.debug("sasl.authenticated", conn=self._connection.id, user=self._user,
                      mechanism=self.mechanism)
        return _answer(ErrorCode.NONE, None, reply)

    def _succeed(self, user: str) -> None:
        self._user = user
        self._connection.principal = f"User:{user}"
        self._move(SaslEvent.DONE)

    async def _plain(self, token: bytes) -> bytes | None:
        authzid, user, password = token.decode("utf-8").split("\0")
        if not user or authzid not in ("", user):
            return None
        credentials = await self._store.user(user)
        for mechanism in SCRAM_MECHANISMS:
            credential = credentials.get(mechanism)
            if credential is not None:
                if not await trio.to_thread.run_sync(credential.matches, password):
                    return None
                self._succeed(user)
                return b""
        return None

    async def _scram_step(self, token: bytes) -> bytes | None:
        text = token.decode("utf-8")
        if self._scram is None:  # client-first
            user = _scram_username(text)
            credential: ScramCredential | None = (await self._store.user(user)).get(
                self.mechanism or "")
            if credential is None:
                return None
            found = credential

            def auth_fn(_: str) -> tuple[bytes, bytes, bytes, int]:
                return found.salt, found.stored_key, found.server_key, found.iterations

            server = ScramMechanism(found.mechanism).make_server(auth_fn)
            server.set_client_first(text)
            self._scram, self._user = server, user
            self._move(SaslEvent.STEP)
            return str(server.get_server_first()).encode()
        server, self._scram = self._scram, None
        server.set_client_final(text)
        final = str(server.get_server_final()).encode()
        assert self._user is not None
        self._succeed(self._user)
        return final


def _scram_username(client_first: str) -> str:
    """The user a SCRAM client-first message names (``n,,n=user,r=nonce``; RFC 5802 escapes
    ``,`` and ``=`` as ``=2C`` and ``=3D``)."""
    parts = client_first.split(",")
    for part in parts[2:]:
        if part.startswith("n="):
            return part[2:].replace("=2C", ",").replace("=3D", "=")
    raise ValueError("client-first message names no user")


def _answer(code: ErrorCode, message: str | None, token: bytes = b"") -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": token,
            "session_lifetime_ms": 0}


#: the SASL exchange of the connection a request came on; None off SASL listeners
SASL_SESSION: ContextVar[SaslSession | None] = ContextVar("sasl_session", default=None)
