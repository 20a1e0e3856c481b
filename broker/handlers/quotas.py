"""DescribeClientQuotas and AlterClientQuotas: produce and fetch byte-rate quotas of users and
client ids (Kafka's kafka-configs --entity-type users/clients). Reading them needs
DescribeConfigs on the cluster, changing them AlterConfigs (when ``authorizer_enabled``)."""

from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.security.quotas import QUOTA_KEYS, QuotaEntity, canonical, describe
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, InvalidRequestError
from protocol.wire import Request

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def _entity(parts: list[dict[str, Any]]) -> QuotaEntity:
    named = {p["entity_type"]: p["entity_name"] for p in parts}
    if len(named) < len(parts):
        raise InvalidRequestError("an entity names the same entity type twice")
    try:
        return canonical(named)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None


def _entity_wire(entity: QuotaEntity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


async def describe_client_quotas(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    ctx.security.require_cluster(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    components = request.body["components"]
    for c in components:
        if c["match_type"] not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise InvalidRequestError(f"unknown match_type {c['match_type']} (0 exact, "
                                      "1 default, 2 any)")

    def selected(entity: QuotaEntity) -> bool:
        names = dict(entity)
        for c in components:
            if c["entity_type"] not in names:
                return False
            name = names[c["entity_type"]]
            if c["match_type"] == MATCH_EXACT and name != c["match"]:
                return False
            if c["match_type"] == MATCH_DEFAULT and name is not None:
                return False
        return not request.body["strict"] or len(names) == len(components)

    entries = [
        {"entity": _entity_wire(entity),
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in sorted(ctx.security.quotas.quotas.items(), key=lambda e: str(e[0]))
        if selected(entity)
    ]
    return {"error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


async def alter_client_quotas(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    ctx.security.require_cluster(ApiKey.ALTER_CLIENT_QUOTAS)
    results = []
    for entry in request.body["entries"]:
        result = {"error_code": ErrorCode.NONE, "error_message": None, "entity": entry["entity"]}
        results.append(result)
        try:
            entity = _entity(entry["entity"])
            set_: dict[str, int] = {}
            remove: list[str] = []
            for op in entry["ops"]:
                if op["key"] not in QUOTA_KEYS:
                    raise InvalidRequestError(
                        f"{describe(entity)}: unknown quota {op['key']!r} (one of "
                        f"{', '.join(QUOTA_KEYS)})")
                if op["remove"]:
                    remove.append(op["key"])
                elif op["value"] < 1:
                    raise InvalidRequestError(
                        f"{describe(entity)}: {op['key']} must be at least 1 byte/s, got "
                        f"{op['value']}")
                else:
                    set_[op["key"]] = op["value"]
            if not request.body["validate_only"]:
                await ctx.security.alter_quota(entity, set_, remove)
        except InvalidRequestError as exc:
            result.update(error_code=exc.code, error_message=str(exc))
    return {"entries": results}
