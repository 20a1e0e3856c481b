"""Request and response headers, and whole requests decoded from one frame's payload.

Every request of the 0.10.2 table uses request header v1 (api key, version, correlation id,
nullable client id); every response header v0 (the correlation id). Clients open with
ApiVersions v2-v4, and v3+ come with the flexible header v2 (client id still an old-style
string, then tagged fields) and a flexible body: the broker cannot parse those, but must answer
them. ``peek_request_header`` reads the three fields every header version starts with, so the
broker can answer UNSUPPORTED_VERSION with the right correlation id whatever the version.

``decode_request`` raises one of three errors, the broker's three different actions:
``UnknownApiKeyError`` (close), ``UnsupportedApiVersionError`` (answer it, for ApiVersions), and
``MalformedMessageError`` (close). Bytes after a request's last field are ignored, as Kafka
ignores them. Frames' 4-byte length prefix is ``protocol.framing``'s, the same as the native one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from protocol.kafka.apis import API_VERSIONS, KAFKA_APIS, KafkaApi
from protocol.kafka.errors import (
    MalformedMessageError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
)
from protocol.kafka.schema import Field, Struct, compile_struct, decode_with
from protocol.kafka.types import (
    COMPACT_STRING,
    INT16_T,
    INT32_T,
    NULLABLE_STRING,
    TAGGED_FIELDS,
)

Buffer = bytes | bytearray | memoryview

_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id: every header's start
_CORRELATION = struct.Struct(">i")  # response header v0

#: request header v1 (v2 adds tagged fields; ApiVersions v3+ send it)
REQUEST_HEADER = Struct(
    Field("api_key", INT16_T),
    Field("api_version", INT16_T),
    Field("correlation_id", INT32_T),
    Field("client_id", NULLABLE_STRING, default=None),
    Field("tagged_fields", TAGGED_FIELDS, since=2, default=None),
)
#: ApiVersions v3+'s flexible body (KIP-511): read to log who is asking, never advertised
FLEXIBLE_API_VERSIONS_REQUEST = Struct(
    Field("client_software_name", COMPACT_STRING),
    Field("client_software_version", COMPACT_STRING),
    Field("tagged_fields", TAGGED_FIELDS, default=None),
)
FIRST_FLEXIBLE_API_VERSIONS = 3

_HEADERS = {v: compile_struct(REQUEST_HEADER, v) for v in (1, 2)}
_FLEXIBLE_API_VERSIONS = compile_struct(FLEXIBLE_API_VERSIONS_REQUEST, 3)


class RequestHeader(NamedTuple):
    """What every request header version starts with."""

    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True)
class KafkaRequest:
    api: KafkaApi
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]


def peek_request_header(frame: Buffer) -> RequestHeader:
    """The api key, version and correlation id of any request, whatever its header version."""
    if len(frame) < _START.size:
        raise MalformedMessageError(
            f"a request of {len(frame)} bytes is shorter than its header's first 8"
        )
    return RequestHeader(*_START.unpack_from(frame, 0))


def request_header_version(api_key: int, api_version: int) -> int:
    """2 (flexible) for ApiVersions v3+, else 1: the table has no other flexible version."""
    if api_key == API_VERSIONS.key and api_version >= FIRST_FLEXIBLE_API_VERSIONS:
        return 2
    return 1


def read_request_header(frame: Buffer) -> tuple[dict[str, Any], int]:
    """The whole header (v1, or v2 for ApiVersions v3+) and where the body begins."""
    start = peek_request_header(frame)
    read = _HEADERS[request_header_version(start.api_key, start.api_version)][0]
    header: tuple[dict[str, Any], int] = decode_with(read, memoryview(frame), 0, "request header")
    return header


def read_flexible_api_versions(frame: Buffer) -> dict[str, Any]:
    """An ApiVersions v3+ request's client software name and version (KIP-511)."""
    _, pos = read_request_header(frame)
    read = _FLEXIBLE_API_VERSIONS[0]
    body: dict[str, Any] = decode_with(read, memoryview(frame), pos, "ApiVersions v3+ request")[0]
    return body


def decode_request(frame: Buffer) -> KafkaRequest:
    """One request frame's payload (header and body): its API, version, ids and body dict."""
    start = peek_request_header(frame)
    api = KAFKA_APIS.get(start.api_key)
    if api is None:
        raise UnknownApiKeyError(*start)
    if not api.supports(start.api_version):
        raise UnsupportedApiVersionError(
            api.name, *start, min_version=api.min_version, max_version=api.max_version
        )
    header, pos = read_request_header(frame)
    body, _ = api.decode_request(start.api_version, memoryview(frame), pos)
    return KafkaRequest(api, start.api_version, start.correlation_id, header["client_id"], body)


def encode_request(
    api: KafkaApi, api_version: int, correlation_id: int, client_id: str | None,
    body: dict[str, Any],
) -> bytes:
    """A request frame's payload, header v1 then the body (as a client sends it)."""
    out = bytearray()
    header = {"api_key": api.key, "api_version": api_version,
              "correlation_id": correlation_id, "client_id": client_id}
    _HEADERS[1][1](out, header)
    api.encode_request(api_version, body, out)
    return bytes(out)


def encode_response(
    api: KafkaApi, api_version: int, correlation_id: int, body: dict[str, Any]
) -> bytes:
    """A response frame's payload: header v0 (the correlation id), then the body."""
    out = bytearray(_CORRELATION.pack(correlation_id))
    api.encode_response(api_version, body, out)
    return bytes(out)


def decode_response(api: KafkaApi, api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]]:
    """A response frame's correlation id and body."""
    if len(frame) < _CORRELATION.size:
        raise MalformedMessageError(f"a response of {len(frame)} bytes has no correlation id")
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    body, _ = api.decode_response(api_version, memoryview(frame), _CORRELATION.size)
    return correlation_id, body
