"""The SASL state machine, row by row of its table, without sockets."""

from __future__ import annotations

from broker.client_connection import ANONYMOUS, ClientConnection
from broker.security.sasl import SaslSession
from broker.security.sasl_state import SASL_MACHINE, SaslState
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.sasl import SaslClientMechanism
from protocol.scram import ScramCredential

PASSWORD = "Zq9-pass"


class Store:
    def __init__(self) -> None:
        self.users = {"alice": {m: ScramCredential.derive(m, PASSWORD)
                                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}}

    async def user(self, name: str) -> dict[str, ScramCredential]:
        return dict(self.users.get(name, {}))

    async def users(self) -> dict[str, dict[str, ScramCredential]]:
        return self.users

    async def put(self, name: str, credentials: dict[str, ScramCredential]) -> None:
        self.users[name] = credentials


def session(enabled: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            ) -> tuple[SaslSession, ClientConnection]:
    connection = ClientConnection(1, "127.0.0.1")
    return SaslSession(connection, enabled, Store()), connection


async def log_in(s: SaslSession, mechanism: str, password: str) -> int:
    client = SaslClientMechanism(mechanism, "alice", password)
    assert s.handshake(mechanism)["error_code"] == ErrorCode.NONE
    token: bytes | None = client.first()
    while token is not None:
        answer = await s.authenticate(token)
        if answer["error_code"]:
            return int(answer["error_code"])
        token = client.respond(answer["auth_bytes"])
    return 0


async def test_every_mechanism_logs_in_and_sets_the_principal():
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        s, connection = session()
        assert not s.admits(ApiKey.PRODUCE) and s.admits(ApiKey.API_VERSIONS)
        assert await log_in(s, mechanism, PASSWORD) == 0
        assert s.state is SaslState.AUTHENTICATED and s.admits(ApiKey.PRODUCE)
        assert connection.principal == "User:alice"


async def test_a_wrong_password_fails_and_leaves_the_principal_anonymous():
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        s, connection = session()
        assert await log_in(s, mechanism, "wrong") == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert s.failed and connection.principal == ANONYMOUS


async def test_every_row_of_the_table_is_reachable():
    seen: set[tuple[SaslState, str]] = set()
    s, _ = session(("SCRAM-SHA-512",))
    assert s.handshake("PLAIN")["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert s.handshake("PLAIN")["mechanisms"] == ["SCRAM-SHA-512"]
    seen.add((SaslState.HANDSHAKE, "HANDSHAKE_UNSUPPORTED"))
    assert s.state is SaslState.HANDSHAKE
    answer = await s.authenticate(b"x")  # before the handshake
    assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and s.failed
    seen.add((SaslState.HANDSHAKE, "OUT_OF_ORDER"))
    s, _ = session()
    s.handshake("SCRAM-SHA-256")
    seen.add((SaslState.HANDSHAKE, "HANDSHAKE_OK"))
    assert s.handshake("PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and s.failed
    seen.add((SaslState.AUTHENTICATE, "OUT_OF_ORDER"))
    s, _ = session()
    client = SaslClientMechanism("SCRAM-SHA-256", "alice", PASSWORD)
    s.handshake("SCRAM-SHA-256")
    answer = await s.authenticate(client.first())
    assert answer["error_code"] == ErrorCode.NONE and s.state is SaslState.AUTHENTICATE
    seen.add((SaslState.AUTHENTICATE, "STEP"))
    token = client.respond(answer["auth_bytes"])
    assert token is not None
    assert (await s.authenticate(token))["error_code"] == ErrorCode.NONE
    seen.add((SaslState.AUTHENTICATE, "DONE"))
    assert s.handshake("PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    assert s.state is SaslState.AUTHENTICATED  # a logged-in connection stays open
    seen.add((SaslState.AUTHENTICATED, "OUT_OF_ORDER"))
    s, _ = session()
    s.handshake("PLAIN")
    assert (await s.authenticate(b"\0alice\0nope"))["error_code"] == (
        ErrorCode.SASL_AUTHENTICATION_FAILED)
    seen.add((SaslState.AUTHENTICATE, "FAILED"))
    assert seen == {(row.source, row.event.name) for row in SASL_MACHINE.rows}


async def test_an_unknown_scram_user_fails_like_a_wrong_password():
    s, _ = session()
    client = SaslClientMechanism("SCRAM-SHA-256", "mallory", PASSWORD)
    s.handshake("SCRAM-SHA-256")
    answer = await s.authenticate(client.first())
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "mallory" not in str(answer["error_message"])
