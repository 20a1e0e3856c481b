"""One client-side conversation with a broker, sans-IO (kafka-python's ``KafkaProtocol`` manner).

Queue a request, get its correlation id, take the bytes to write (``data_to_send``); feed the
bytes the socket gave (``receive_data``), take completed responses out. Responses come back in
request order (the broker handles one request per connection at a time), so each one must match
the oldest id in the in-flight deque; anything else means the stream can no longer be trusted and
raises ``ProtocolError`` -- the caller closes the connection and fails what was in flight.

A response body that fails validation, or that carries a request-level error code, becomes a
``Response`` with ``error`` set: that request failed, the connection is still good.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import OdradekError, ProtocolError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from protocol.wire import decode_response_body, decode_response_envelope, encode_request

_MAX_CORRELATION_ID = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class Response:
    correlation_id: int
    api_key: ApiKey
    api_version: int
    body: dict[str, Any] | None
    error: OdradekError | None

    def unwrap(self) -> dict[str, Any]:
        """The validated body, or raise the request's error."""
        if self.error is not None:
            raise self.error
        assert self.body is not None
        return self.body


@dataclass(frozen=True, slots=True)
class _InFlight:
    correlation_id: int
    api_key: ApiKey
    api_version: int


class BrokerConnection:
    def __init__(
        self, client_id: str = "odradek", *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: deque[_InFlight] = deque()
        self._outgoing: list[bytes] = []
        self._decoder = FrameDecoder(max_frame_bytes)

    @property
    def in_flight(self) -> int:
        """Requests sent that still await a response."""
        return len(self._in_flight)

    def send_request(
        self,
        api_key: ApiKey,
        body: dict[str, Any],
        *,
        api_version: int = 0,
        expect_response: bool = True,
    ) -> int:
        """Queue a request; return its correlation id. ``expect_response=False`` is for the one
        request the broker does not answer (Produce with acks=0)."""
        correlation_id = self._next_id
        self._next_id = 0 if correlation_id == _MAX_CORRELATION_ID else correlation_id + 1
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        self._outgoing.append(frame)
        if expect_response:
            self._in_flight.append(_InFlight(correlation_id, api_key, api_version))
        return correlation_id

    def data_to_send(self) -> bytes:
        """Every byte queued since the last call (empty when there is nothing to write)."""
        if not self._outgoing:
            return b""
        data = self._outgoing[0] if len(self._outgoing) == 1 else b"".join(self._outgoing)
        self._outgoing.clear()
        return data

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Feed received bytes; return the responses they complete, oldest first."""
        self._decoder.receive_data(data)
        responses: list[Response] = []
        while (payload := self._decoder.next_frame()) is not None:
            correlation_id, body = decode_response_envelope(payload)
            if not self._in_flight:
                raise ProtocolError(f"response {correlation_id} arrived with no request in flight")
            expected = self._in_flight[0]
            if correlation_id != expected.correlation_id:
                raise ProtocolError(
                    f"response {correlation_id} arrived while {expected.correlation_id} "
                    f"({expected.api_key.name}) was expected"
                )
            self._in_flight.popleft()
            responses.append(_validated(expected, body))
        return responses


def _validated(request: _InFlight, body: Any) -> Response:
    try:
        checked = decode_response_body(request.api_key, request.api_version, body)
    except OdradekError as error:
        return Response(request.correlation_id, request.api_key, request.api_version, None, error)
    return Response(request.correlation_id, request.api_key, request.api_version, checked, None)
