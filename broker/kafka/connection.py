"""One connection on a Kafka-protocol listener: the native connection's reading, memory
bounds, ordering, idle and read deadlines and TLS, with Kafka's codec in place of msgpack.

What the peer sends decides what happens, as in Kafka:

- ApiVersions above version 1 (clients open with v2-v4) is answered with the v0-shaped
  UNSUPPORTED_VERSION answer and the full table, and the connection stays open;
- an unknown API key, an unsupported version of any other API, or a request that does not
  parse closes the connection with nothing written -- Kafka's clients treat that as the
  broker's refusal and log it;
- on a SASL listener the exchange is 0.10.2's: SaslHandshake v0, then the mechanism's tokens as
  bare length-prefixed frames with no request header, each answered the same way (PLAIN's
  answer is empty). A failed login closes the connection with no answer: that framing has no
  room for an error (docs/kafka-compatibility.md, "SASL").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.client_connection import CLIENT_CONNECTION
from broker.connection import CloseConnection, Connection
from broker.frames import Piece
from broker.kafka.dispatch import answer
from broker.security.sasl_state import SaslState
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.kafka.api_versions import answer_api_versions, unsupported_version_answer
from protocol.kafka.apis import API_VERSIONS
from protocol.kafka.errors import KafkaCodecError, UnsupportedApiVersionError
from protocol.kafka.header import decode_request, peek_request_header


class KafkaConnection(Connection):
    LANE_PREFIX = None  # its Heartbeats take the handler's path

    async def _respond(self, payload: bytes) -> Sequence[Piece]:
        sasl = self._sasl
        if sasl is not None and sasl.state is SaslState.AUTHENTICATE:
            return await self._sasl_token(payload)
        try:
            request = decode_request(payload)
        except UnsupportedApiVersionError as exc:
            if exc.api_key != API_VERSIONS.key:
                raise CloseConnection(str(exc), level=logging.INFO) from None
            return [encode_frame(unsupported_version_answer(exc.correlation_id))]
        except KafkaCodecError as exc:
            raise CloseConnection(str(exc), level=logging.INFO) from None
        self._admit(request.api.key, request.api.name)
        client = CLIENT_CONNECTION.get()
        if client is not None:  # quotas are per client id
            client.client_id = request.client_id
        if request.api is API_VERSIONS:
            return [encode_frame(answer_api_versions(peek_request_header(payload)))]
        return await answer(self._ctx, request)

    async def _sasl_token(self, payload: bytes) -> Sequence[Piece]:
        """One token of the mechanism after SaslHandshake v0, answered with the server's token
        (or nothing, and the connection closed, if the login failed)."""
        assert self._sasl is not None
        reply = await self._sasl.authenticate(bytes(payload))
        if reply["error_code"] != ErrorCode.NONE:
            return []  # sasl.failed is set: the connection closes once this returns
        return [encode_frame(bytes(reply["auth_bytes"]))]
