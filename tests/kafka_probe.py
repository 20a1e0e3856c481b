"""Is a Kafka-protocol listener there? One ApiVersions v0 request on a plain socket, encoded and
decoded with odradek's Kafka codec, for the tests of the local tooling (``scripts/run``, ``odradek
demo``, ``odradek cluster up``) that print where Kafka's clients connect."""

from __future__ import annotations

import socket
from typing import Any

from protocol.framing import FRAME_HEADER, encode_frame
from protocol.kafka.apis import API_VERSIONS
from protocol.kafka.header import decode_response, encode_request

_CORRELATION_ID = 7


def api_versions(address: str, timeout: float = 10.0) -> dict[str, Any]:
    """The ApiVersions v0 answer of the Kafka listener at ``HOST:PORT``; asserts it answers the
    request sent (its correlation id)."""
    host, _, port = address.rpartition(":")
    request = encode_request(API_VERSIONS, 0, _CORRELATION_ID, "odradek-tests", {})
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(encode_frame(request))
        (length,) = FRAME_HEADER.unpack(_read_exactly(conn, FRAME_HEADER.size))
        correlation_id, body = decode_response(API_VERSIONS, 0, _read_exactly(conn, length))
    assert correlation_id == _CORRELATION_ID
    return body


def assert_kafka_listener(address: str) -> None:
    """ApiVersions at ``address`` answers without error and lists APIs."""
    body = api_versions(address)
    assert body["error_code"] == 0, body
    assert body["api_keys"], body


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = conn.recv(size - len(chunks))
        assert chunk, f"the listener closed the connection after {len(chunks)} of {size} bytes"
        chunks += chunk
    return bytes(chunks)
