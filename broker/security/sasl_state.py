"""The SASL exchange of one connection as a table (``SASL_MACHINE``), checked on every move by
broker/security/sasl.py and rendered into docs/state-machines/sasl.md. It imports only
``protocol.statemachine``."""

from __future__ import annotations

from enum import Enum

from protocol.statemachine import Transition, TransitionTable


class SaslState(Enum):
    HANDSHAKE = "Handshake"
    AUTHENTICATE = "Authenticate"
    AUTHENTICATED = "Authenticated"
    FAILED = "Failed"


STATE_DESCRIPTIONS: dict[SaslState, str] = {
    SaslState.HANDSHAKE: "A new connection on a SASL listener: waiting for SaslHandshake. Only "
    "ApiVersions, SaslHandshake and SaslAuthenticate are answered; anything else closes the "
    "connection with nothing done.",
    SaslState.AUTHENTICATE: "The mechanism is chosen; SaslAuthenticate requests carry its "
    "tokens (PLAIN: one; SCRAM: client-first, then client-final).",
    SaslState.AUTHENTICATED: "The principal is User:<name>; every request is admitted.",
    SaslState.FAILED: "The answer has been sent; the connection closes.",
}


class SaslEvent(Enum):
    HANDSHAKE_OK = "handshake accepted"
    HANDSHAKE_UNSUPPORTED = "handshake: mechanism not enabled"
    STEP = "token accepted, more to come"
    DONE = "mechanism completed"
    FAILED = "authentication failed"
    OUT_OF_ORDER = "request out of order"


_S, _E = SaslState, SaslEvent
SASL_MACHINE: TransitionTable[SaslState, SaslEvent] = TransitionTable(
    "sasl", SaslState.HANDSHAKE, SaslState, SaslEvent, [
        Transition(_S.HANDSHAKE, _E.HANDSHAKE_OK, _S.AUTHENTICATE,
                   "SaslHandshake names an enabled mechanism", "NONE, the enabled mechanisms"),
        Transition(_S.HANDSHAKE, _E.HANDSHAKE_UNSUPPORTED, _S.HANDSHAKE,
                   "SaslHandshake names another", "UNSUPPORTED_SASL_MECHANISM, the enabled "
                   "mechanisms; the client may try another"),
        Transition(_S.HANDSHAKE, _E.OUT_OF_ORDER, _S.FAILED, "SaslAuthenticate first",
                   "ILLEGAL_SASL_STATE, then closed"),
        Transition(_S.AUTHENTICATE, _E.STEP, _S.AUTHENTICATE, "SCRAM client-first of a known "
                   "user", "NONE, the server-first message"),
        Transition(_S.AUTHENTICATE, _E.DONE, _S.AUTHENTICATED, "the password or proof is "
                   "right", "NONE (SCRAM: the server-final message); principal User:<name>"),
        Transition(_S.AUTHENTICATE, _E.FAILED, _S.FAILED, "unknown user, wrong password or "
                   "proof, malformed token", "one sasl.failed log line; after "
                   "connection_failed_authentication_delay_ms, SASL_AUTHENTICATION_FAILED (the "
                   "same words for each), then closed"),
        Transition(_S.AUTHENTICATE, _E.OUT_OF_ORDER, _S.FAILED, "a second SaslHandshake",
                   "ILLEGAL_SASL_STATE, then closed"),
        Transition(_S.AUTHENTICATED, _E.OUT_OF_ORDER, _S.AUTHENTICATED, "SaslHandshake or "
                   "SaslAuthenticate again", "ILLEGAL_SASL_STATE; the connection stays"),
    ])
