"""AlterUserScramCredentials applies a user's changes together or not at all: a refused one
(a credential to delete that is not there, an unacceptable one, no name) leaves the user as
they were, and says why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.scram import ScramCredential
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

SHA256 = ScramCredential.derive("SCRAM-SHA-256", "s3cret")


def upsertion(name: str, credential: ScramCredential = SHA256, **more: Any) -> dict[str, Any]:
    return {"name": name, "mechanism": credential.mechanism, "iterations": credential.iterations,
            "salt": credential.salt, "stored_key": credential.stored_key,
            "server_key": credential.server_key, **more}


def test_a_refused_change_leaves_the_user_as_they_were(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker()
    with RawClient(broker.address) as raw:
        def alter(deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]
                  ) -> list[tuple[str, int, str | None]]:
            answer = raw.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                 {"deletions": deletions, "upsertions": upsertions})
            return [(r["user"], r["error_code"], r["error_message"]) for r in answer["results"]]

        def mechanisms() -> dict[str, list[str]]:
            answer = raw.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
            return {r["user"]: [c["mechanism"] for c in r["credential_infos"]]
                    for r in answer["results"]}

        assert alter([], [upsertion("alice")]) == [("alice", ErrorCode.NONE, None)]
        refused = alter([{"name": "alice", "mechanism": "SCRAM-SHA-512"}],
                        [upsertion("alice", ScramCredential.derive("SCRAM-SHA-512", "x"))])
        assert refused == [("alice", ErrorCode.RESOURCE_NOT_FOUND,
                            "user 'alice' has no SCRAM-SHA-512 credential")]
        [(_, code, message)] = alter([], [upsertion("bob", iterations=10)])
        assert code == ErrorCode.UNACCEPTABLE_CREDENTIAL and "'bob'" in (message or "")
        [(_, code, _)] = alter([], [upsertion("")])
        assert code == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert mechanisms() == {"alice": ["SCRAM-SHA-256"]}
        assert alter([{"name": "alice", "mechanism": "SCRAM-SHA-256"}], []) == [
            ("alice", ErrorCode.NONE, None)]
        assert mechanisms() == {}
