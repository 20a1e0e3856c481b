"""SCRAM credentials (RFC 5802, 7677) as stored and as sent by AlterUserScramCredentials.

Sans-IO and shared by the broker (which verifies) and the clients (which derive a credential
from a password, so that the password never leaves the client). The cryptography is scramp's;
this module only names the mechanisms, checks the limits and gives the stored text form -- the
one Kafka keeps in ZooKeeper's ``/config/users/<name>``:
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
from dataclasses import dataclass

from scramp import ScramMechanism

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka's bounds on a credential's iteration count
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class CredentialFormatError(ValueError):
    """A stored or sent credential cannot be used; the message says why (never its keys)."""


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a password: enough to verify a SCRAM exchange, not to log in."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __post_init__(self) -> None:
        if self.mechanism not in SCRAM_MECHANISMS:
            raise CredentialFormatError(
                f"mechanism {self.mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        if not MIN_ITERATIONS <= self.iterations <= MAX_ITERATIONS:
            raise CredentialFormatError(
                f"iterations {self.iterations} is outside {MIN_ITERATIONS}-{MAX_ITERATIONS}")
        if not (self.salt and self.stored_key and self.server_key):
            raise CredentialFormatError("salt, stored key and server key must not be empty")

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return f"ScramCredential({self.mechanism}, iterations={self.iterations})"

    @classmethod
    def derive(cls, mechanism: str, password: str, *, iterations: int = MIN_ITERATIONS,
               salt: bytes | None = None) -> ScramCredential:
        """The credential for ``password`` under a fresh (or given) salt."""
        if mechanism not in SCRAM_MECHANISMS:
            raise CredentialFormatError(
                f"mechanism {mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        made_salt, stored_key, server_key, count = ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations, salt=salt)
        return cls(mechanism, made_salt, stored_key, server_key, count)

    def matches(self, password: str) -> bool:
        """Whether ``password`` is the one this credential was derived from (SASL/PLAIN is
        checked this way: one store, no password kept). Costs ``iterations`` hashes."""
        again = ScramCredential.derive(self.mechanism, password, iterations=self.iterations,
                                       salt=self.salt)
        return hmac.compare_digest(again.stored_key, self.stored_key)

    def encode(self) -> str:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def decode(cls, mechanism: str, text: str) -> ScramCredential:
        try:
            fields = dict(item.split("=", 1) for item in text.split(","))
            return cls(mechanism, base64.b64decode(fields["salt"]),
                       base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise CredentialFormatError(
                f"{mechanism} credential is unreadable ({type(exc).__name__})") from None


# ------------------------------------------------------------------------------ stored form

#: the embedded broker's credential file, in its data directory
CREDENTIALS_FILE = "scram-credentials.json"


def encode_user(credentials: dict[str, ScramCredential], existing: bytes | None = None) -> bytes:
    """One user's ZooKeeper node ``/config/users/<name>`` (Kafka's place and form) holding
    ``credentials``. The node also holds the user's quotas (``producer_byte_rate`` ...), so every
    key of ``existing`` that is not a SCRAM mechanism is kept."""
    config: dict[str, str] = {}
    if existing:
        with contextlib.suppress(ValueError, AttributeError):
            kept = json.loads(existing).get("config")
            if isinstance(kept, dict):
                config = {k: v for k, v in kept.items() if k not in SCRAM_MECHANISMS}
    config.update({mech: c.encode() for mech, c in sorted(credentials.items())})
    return json.dumps({"version": 1, "config": config}, sort_keys=True).encode()


def decode_user(data: bytes) -> dict[str, ScramCredential]:
    """A user's node; an empty one (made as the parent of a client-id quota's node) holds no
    credential."""
    if not data:
        return {}
    try:
        config = json.loads(data)["config"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CredentialFormatError(f"unreadable user credentials ({type(exc).__name__})") from None
    return {mech: ScramCredential.decode(mech, text) for mech, text in config.items()
            if mech in SCRAM_MECHANISMS}


def encode_users(users: dict[str, dict[str, ScramCredential]]) -> bytes:
    """Every user's credentials, as the embedded broker's credential file holds them."""
    doc = {name: {mech: c.encode() for mech, c in sorted(creds.items())}
           for name, creds in sorted(users.items()) if creds}
    return json.dumps({"version": 1, "users": doc}, indent=1, sort_keys=True).encode()


def decode_users(data: bytes) -> dict[str, dict[str, ScramCredential]]:
    try:
        users = json.loads(data)["users"]
        return {name: {mech: ScramCredential.decode(mech, text) for mech, text in creds.items()}
                for name, creds in users.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CredentialFormatError(f"unreadable credential file ({type(exc).__name__})") from None
