"""InitProducerId: a new producer id, with epoch 0, for an idempotent producer (KIP-98).

Transactions are not supported, so a request naming a transactional id is refused
(INVALID_REQUEST, naming it) instead of being given an id it would take for a transaction's.
The principal needs what Kafka 2.8+ asks (KIP-679): IdempotentWrite on the cluster, or Write on
any topic -- a producer that may write somewhere may be idempotent there; otherwise
CLUSTER_AUTHORIZATION_FAILED. Every refusal is an answer of the API's own shape, so a client
reads one body whatever happened.
"""

from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.security.policy import current_connection
from protocol.acls import CLUSTER_NAME, ResourceType
from protocol.apis import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.wire import Request


def _answer(error: ErrorCode, message: str | None, producer_id: int = NO_PRODUCER_ID,
            producer_epoch: int = NO_PRODUCER_EPOCH) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message,
            "producer_id": producer_id, "producer_epoch": producer_epoch}


def may_write_idempotently(ctx: BrokerContext) -> bool:
    """IdempotentWrite on the cluster, or Write on at least one topic (KIP-679)."""
    api = ApiKey.INIT_PRODUCER_ID
    return (ctx.security.allowed(api, ResourceType.CLUSTER, CLUSTER_NAME)
            or ctx.security.allowed_on_any(api, ResourceType.TOPIC))


async def init_producer_id(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    transactional_id = request.body["transactional_id"]
    if transactional_id is not None:
        return _answer(ErrorCode.INVALID_REQUEST,
                       f"transactional_id {transactional_id!r}: transactions are not supported; "
                       "an idempotent producer sends a null transactional_id")
    if not may_write_idempotently(ctx):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       "InitProducerId needs IdempotentWrite on the cluster or Write on a topic, "
                       f"and {current_connection().principal} has neither (super_users or an "
                       "ACL)")
    try:
        producer_id = await ctx.cluster.new_producer_id()
    except BrokerError as exc:
        return _answer(exc.code, str(exc))
    return _answer(ErrorCode.NONE, None, producer_id, 0)
