"""A decoded Kafka request to its answer: every API of the table through its ``Route`` to the
native handler, and the answer back in Kafka's shape and version.

ApiVersions is answered from the codec's own table; the rest go to ``broker.handlers`` (timed
and counted like native requests when metrics are on). A handler that refuses the whole
request (``BrokerError``) is answered as Kafka answers it: that error in every entry.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from broker.context import BrokerContext
from broker.frames import Piece, WithFileSlices
from broker.handlers import HANDLERS
from broker.handlers.fetch import READER_MAGIC
from broker.kafka import admin_routes, group_routes, producer_id_routes, records_routes
from broker.kafka.fetch_encoding import encode_fetch_response
from broker.kafka.route import Route
from protocol.apis import REGISTRY
from protocol.errors import BrokerError, ErrorCode
from protocol.framing import encode_frame
from protocol.kafka.apis import KafkaApiKey
from protocol.kafka.header import KafkaRequest, encode_response
from protocol.wire import Request, RequestHeader

log = structlog.get_logger(__name__)

K = KafkaApiKey
#: every API of the table but ApiVersions, with the native API that serves it
ROUTES: dict[KafkaApiKey, Route] = {
    K.PRODUCE: records_routes.PRODUCE,
    K.FETCH: records_routes.FETCH,
    K.LIST_OFFSETS: records_routes.LIST_OFFSETS,
    K.METADATA: admin_routes.METADATA,
    K.CREATE_TOPICS: admin_routes.CREATE_TOPICS,
    K.DELETE_TOPICS: admin_routes.DELETE_TOPICS,
    K.SASL_HANDSHAKE: admin_routes.SASL_HANDSHAKE,
    K.FIND_COORDINATOR: group_routes.FIND_COORDINATOR,
    K.JOIN_GROUP: group_routes.JOIN_GROUP,
    K.SYNC_GROUP: group_routes.SYNC_GROUP,
    K.HEARTBEAT: group_routes.HEARTBEAT,
    K.LEAVE_GROUP: group_routes.LEAVE_GROUP,
    K.OFFSET_COMMIT: group_routes.OFFSET_COMMIT,
    K.OFFSET_FETCH: group_routes.OFFSET_FETCH,
    K.LIST_GROUPS: group_routes.LIST_GROUPS,
    K.DESCRIBE_GROUPS: group_routes.DESCRIBE_GROUPS,
    K.INIT_PRODUCER_ID: producer_id_routes.INIT_PRODUCER_ID,
}
assert set(ROUTES) == set(KafkaApiKey) - {K.API_VERSIONS}, "every Kafka API needs a route"


async def answer(ctx: BrokerContext, request: KafkaRequest) -> Sequence[Piece]:
    """The response frame's pieces; none for Produce with acks=0."""
    route = ROUTES[KafkaApiKey(request.api.key)]
    version = request.api_version
    header = RequestHeader(route.native, route.native_version_for(version),
                           request.correlation_id, request.client_id)
    handler = (HANDLERS if ctx.metrics is None else ctx.metrics.handlers)[route.native]
    magic = None
    if route is records_routes.FETCH:  # its readers take converted batches in their magic
        magic = READER_MAGIC.set(records_routes.fetch_reader_magic(version))
    try:
        native = Request(header, REGISTRY[route.native], route.request(request.body, version))
        reply = await handler(ctx, native)
        if reply is None:
            return []
        if isinstance(reply, WithFileSlices):
            reply = reply.body
        body = route.response(reply, request.body, version)
    except BrokerError as exc:
        body = route.refusal(request.body, version, exc.code)
    except Exception as exc:
        log.error("kafka.request_failed", api=request.api.name, exc_info=exc)
        body = route.refusal(request.body, version, ErrorCode.UNKNOWN_SERVER_ERROR)
    finally:
        if magic is not None:
            READER_MAGIC.reset(magic)
    if route is records_routes.FETCH:
        return encode_fetch_response(version, request.correlation_id, body)
    return [encode_frame(encode_response(request.api, version, request.correlation_id, body))]
