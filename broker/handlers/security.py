"""SaslHandshake and SaslAuthenticate (the connection's SASL exchange, broker/security/sasl.py),
and the SCRAM credential store's Describe/AlterUserScramCredentials (Describe / Alter on the
cluster when ``authorizer_enabled``, as Kafka)."""

from __future__ import annotations

import functools
from typing import Any

import structlog

from broker.context import BrokerContext
from broker.security.credentials import Credentials, CredentialStore
from broker.security.sasl import SASL_SESSION
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, InvalidRequestError
from protocol.scram import CredentialFormatError, ScramCredential
from protocol.wire import Request

log = structlog.get_logger(__name__)

_NOT_SASL = "this listener does not use SASL"


def _store(ctx: BrokerContext, api: ApiKey) -> CredentialStore:
    ctx.security.require_cluster(api)
    if ctx.listener_security is None:
        raise InvalidRequestError("this broker keeps no user credentials")
    return ctx.listener_security.credentials


async def sasl_handshake(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    session = SASL_SESSION.get()
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    return session.handshake(request.body["mechanism"])


async def sasl_authenticate(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    session = SASL_SESSION.get()
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": _NOT_SASL,
                "auth_bytes": b"", "session_lifetime_ms": 0}
    return await session.authenticate(request.body["auth_bytes"])


async def describe_user_scram_credentials(ctx: BrokerContext, request: Request
                                          ) -> dict[str, Any]:
    store = _store(ctx, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    wanted: list[str] | None = request.body["users"]
    every = await store.users()
    results = []
    for name in sorted(every) if wanted is None else dict.fromkeys(wanted):
        credentials = every.get(name, {})
        results.append({
            "user": name,
            "error_code": ErrorCode.NONE if credentials else ErrorCode.RESOURCE_NOT_FOUND,
            "error_message": None if credentials else f"user {name!r} has no SCRAM credential",
            "credential_infos": [{"mechanism": m, "iterations": c.iterations}
                                 for m, c in sorted(credentials.items())],
        })
    return {"error_code": ErrorCode.NONE, "error_message": None, "results": results}


async def alter_user_scram_credentials(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    """Each user's changes are applied together; a user whose change is refused keeps what
    they had."""
    store = _store(ctx, ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    changes: dict[str, list[Change]] = {}
    for deletion in request.body["deletions"]:
        changes.setdefault(deletion["name"], []).append((deletion["mechanism"], None))
    for upsertion in request.body["upsertions"]:
        changes.setdefault(upsertion["name"], []).append((upsertion["mechanism"], upsertion))
    results = []
    for name, items in changes.items():
        code, message = _refusal(name, items, await store.user(name))
        if code is ErrorCode.NONE:
            await store.alter(name, functools.partial(_changed, items))
            log.info("users.altered", user=name, mechanisms=sorted(m for m, _ in items))
        results.append({"user": name, "error_code": code, "error_message": message})
    return {"results": results}


Change = tuple[str, dict[str, Any] | None]  # a mechanism, and its upsertion (None: deletion)


def _refusal(name: str, items: list[Change], credentials: Credentials
             ) -> tuple[ErrorCode, str | None]:
    """Why the user's changes are refused as a whole (NONE: they are not)."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "a user name must not be empty"
    for mechanism, upsertion in items:
        if upsertion is None:
            if mechanism not in credentials:
                return ErrorCode.RESOURCE_NOT_FOUND, f"user {name!r} has no {mechanism} credential"
        else:
            try:
                _credential(mechanism, upsertion)
            except CredentialFormatError as exc:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"user {name!r}: {exc}"
    return ErrorCode.NONE, None


def _changed(items: list[Change], credentials: Credentials) -> Credentials:
    """The credentials once the changes are applied, to what the store holds at the time."""
    changed = dict(credentials)
    for mechanism, upsertion in items:
        if upsertion is None:
            changed.pop(mechanism, None)
        else:
            changed[mechanism] = _credential(mechanism, upsertion)
    return changed


def _credential(mechanism: str, upsertion: dict[str, Any]) -> ScramCredential:
    return ScramCredential(mechanism, upsertion["salt"], upsertion["stored_key"],
                           upsertion["server_key"], upsertion["iterations"])
