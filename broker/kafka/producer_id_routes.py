"""InitProducerId from Kafka's clients, onto the native handler: the same request fields, and
the answer without the native error message (Kafka's v0 has none). A refused request is
answered with producer id and epoch -1, as Kafka answers it."""

from __future__ import annotations

from broker.kafka.route import Body, Route, same_body
from protocol.apis import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ApiKey


def _response(reply: Body, body: Body, version: int) -> Body:
    return {"throttle_time_ms": reply["throttle_time_ms"], "error_code": reply["error_code"],
            "producer_id": reply["producer_id"], "producer_epoch": reply["producer_epoch"]}


def _refusal(body: Body, version: int, code: int) -> Body:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": NO_PRODUCER_ID,
            "producer_epoch": NO_PRODUCER_EPOCH}


INIT_PRODUCER_ID = Route(ApiKey.INIT_PRODUCER_ID, 0, same_body, _response, _refusal)
