"""Requests and responses as msgpack frames.

Request:  ``[api_key, api_version, correlation_id, client_id, body]``
Response: ``[correlation_id, body]``

Decoding checks the envelope and validates the body against the API registry, so a handler or a
client only ever sees well-formed values. Every failure is a ``ProtocolError`` subclass whose
message names the API, version and field; the msgpack library's own exceptions never escape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol import speedups
from protocol.apis import HEARTBEAT as HEARTBEAT_API
from protocol.apis import REGISTRY, REQUEST_ERROR, Api, ApiKey
from protocol.errors import BrokerError, ErrorCode, ProtocolError, SchemaError, error_for
from protocol.framing import FRAME_HEADER, encode_frame
from protocol.schema import validate

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)


def pack(value: Any) -> bytes:
    return _packer.pack(value)  # type: ignore[no-any-return]


def unpack(payload: bytes, what: str) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # ExtraData, FormatError, StackError, UnicodeDecodeError, ...
        raise ProtocolError(f"{what} is not valid msgpack: {type(exc).__name__}: {exc}") from None


# not frozen: a frozen dataclass's __init__ costs three times as much, once per request
@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None  # null is allowed, as in Kafka


@dataclass(slots=True)
class Request:
    header: RequestHeader
    api: Api
    body: dict[str, Any]


class RequestDecodeError(ProtocolError):
    """A request could not be decoded. ``header`` is set when the correlation id was readable,
    so the broker can answer with ``error_code`` instead of closing the connection."""

    def __init__(
        self, message: str, header: RequestHeader | None, error_code: ErrorCode
    ) -> None:
        super().__init__(message)
        self.header = header
        self.error_code = error_code


class RequestSchemaError(RequestDecodeError, SchemaError):
    """A request's body does not match its API schema; answered with INVALID_REQUEST."""


def encode_request(
    api_key: ApiKey,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: dict[str, Any],
) -> bytes:
    """A whole frame. The body is not validated here; tests build malformed ones on purpose."""
    return encode_frame(pack([int(api_key), api_version, correlation_id, client_id, body]))


_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _header(value: Any) -> RequestHeader | None:
    if not isinstance(value, list) or len(value) != 5:
        return None
    key, version, corr, client_id, _ = value
    if type(key) is not int or type(version) is not int or type(corr) is not int:
        return None
    if client_id is not None and type(client_id) is not str:
        return None
    if not _INT32_MIN <= corr <= _INT32_MAX:
        return None
    return RequestHeader(key, version, corr, client_id)


def request_prefix(api_key: ApiKey) -> bytes:
    """The bytes every request of the API starts with as our encoder writes it (a reader can
    pick out a request's API without decoding it; another encoder's may differ)."""
    return pack([int(api_key), 0, 0, None, {}])[:2]  # the array's type byte, the API key


def decode_request(payload: bytes) -> Request:
    value = unpack(payload, "request frame")
    header = _header(value)
    if header is None:
        raise RequestDecodeError(
            "request must be [api_key:int, api_version:int, correlation_id:int32, "
            "client_id:str or nil, body:map]",
            None,
            ErrorCode.INVALID_REQUEST,
        )
    api = REGISTRY.get(header.api_key)  # type: ignore[call-overload]  # an int finds its ApiKey
    if api is None:
        raise RequestDecodeError(
            f"unknown api key {header.api_key}", header, ErrorCode.UNSUPPORTED_API
        )
    if not api.supports(header.api_version):
        raise RequestDecodeError(
            f"{api.name} v{header.api_version} is not supported "
            f"(versions {api.min_version}-{api.max_version})",
            header,
            ErrorCode.UNSUPPORTED_VERSION,
        )
    try:
        body = validate(api.name, "request", header.api_version, api.request, value[4])
    except SchemaError as exc:
        raise RequestSchemaError(str(exc), header, ErrorCode.INVALID_REQUEST) from None
    return Request(header, api, body if type(body) is dict else dict(body))


_HEARTBEAT = int(ApiKey.HEARTBEAT)
_HEARTBEAT_VERSIONS = range(HEARTBEAT_API.min_version, HEARTBEAT_API.max_version + 1)
_HEARTBEAT_FIELDS = 3  # group_id, generation_id, member_id: its request at every version


def decode_heartbeat(payload: bytes) -> tuple[RequestHeader, str, str, int] | None:
    """A Heartbeat request's header, group id, member id and generation id if ``payload`` is
    one that ``decode_request`` accepts; None for anything else, which ``decode_request`` then
    decodes or refuses. The same checks without the schema walk: the broker answers 33,000
    Heartbeats a second at full size (benchmarks/scale.py), and the walk was most of decoding
    one."""
    try:
        value = unpack(payload, "request frame")
    except ProtocolError:
        return None
    header = _header(value)
    if header is None or header.api_key != _HEARTBEAT or (
        header.api_version not in _HEARTBEAT_VERSIONS
    ):
        return None
    body = value[4]
    if type(body) is not dict or len(body) != _HEARTBEAT_FIELDS:
        return None
    group_id, member_id = body.get("group_id"), body.get("member_id")
    generation = body.get("generation_id")
    if (
        type(group_id) is not str or type(member_id) is not str
        or type(generation) is not int or not _INT32_MIN <= generation <= _INT32_MAX
    ):
        return None
    return header, group_id, member_id, generation


#: a Heartbeat frame as ``parse_heartbeats`` gives it: where it ends in the buffer, its
#: correlation id and client id, and its group id, member id and generation id
HeartbeatFrame = tuple[int, int, str | None, str, str, int]
#: how every Heartbeat our encoder writes begins (``request_prefix``)
_HEARTBEAT_PREFIX = request_prefix(ApiKey.HEARTBEAT)


def _py_parse_heartbeats(
    buf: bytes | bytearray, start: int, stop: int, limit: int
) -> tuple[list[HeartbeatFrame], int]:
    """The Heartbeats that ``decode_heartbeat`` takes among the whole frames of
    ``buf[start:stop]``, up to ``limit``, that begin as our encoder begins one; and where the
    frames taken end. It stops at the first frame it does not take."""
    if not 0 <= start <= stop <= len(buf):
        raise ValueError("parse_heartbeats: start and stop out of the buffer")
    frames: list[HeartbeatFrame] = []
    while len(frames) < limit and stop - start >= 4:
        (length,) = FRAME_HEADER.unpack_from(buf, start)
        end = start + 4 + length
        if end > stop or not buf.startswith(_HEARTBEAT_PREFIX, start + 4):
            break
        heartbeat = decode_heartbeat(bytes(memoryview(buf)[start + 4 : end]))
        if heartbeat is None:
            break
        header, group_id, member_id, generation = heartbeat
        frames.append((end, header.correlation_id, header.client_id, group_id, member_id,
                       generation))
        start = end
    return frames, start


def _parse_heartbeats_in_c(
    parse: Callable[..., tuple[list[HeartbeatFrame], int]],
    buf: bytes | bytearray, start: int, stop: int, limit: int,
) -> tuple[list[HeartbeatFrame], int]:
    """``_py_parse_heartbeats`` with the C parser ``parse``, which takes the canonical msgpack
    form only: a frame it stops at is decoded in Python, and the C parser goes on after it."""
    low, high = _HEARTBEAT_VERSIONS.start, _HEARTBEAT_VERSIONS.stop - 1
    frames, end = parse(buf, start, stop, limit, _HEARTBEAT, low, high)
    while len(frames) < limit and end < stop:  # a frame there that C did not take
        one, after = _py_parse_heartbeats(buf, end, stop, 1)
        if not one:
            break
        frames += one
        more, end = parse(buf, after, stop, limit - len(frames), _HEARTBEAT, low, high)
        frames += more
    return frames, end


def _py_error_code_response(correlation_id: int, body: bytes) -> bytes:
    payload = b"".join((_ENVELOPE, pack(correlation_id), body))
    return FRAME_HEADER.pack(len(payload)) + payload


def encode_response(correlation_id: int, body: dict[str, Any]) -> bytes:
    return encode_frame(pack([correlation_id, body]))


#: a msgpack array of two: the response envelope's first byte
_ENVELOPE = pack([0, 0])[:1]


@functools.cache
def _packed_error_body(code: int) -> bytes:
    return pack({"error_code": code, "error_message": None})


def encode_error_code_response(correlation_id: int, code: int) -> bytes:
    """``encode_response(correlation_id, {"error_code": code, "error_message": None})`` byte
    for byte, the body packed once per code: a Heartbeat's answer, 33,000 a second at full
    size (benchmarks/scale.py)."""
    return _error_code_response(correlation_id, _packed_error_body(code))


if speedups.native is None:
    parse_heartbeats = _py_parse_heartbeats
    _error_code_response = _py_error_code_response
else:
    parse_heartbeats = functools.partial(_parse_heartbeats_in_c, speedups.native.parse_heartbeats)
    _error_code_response = speedups.native.error_code_response


def encode_request_error(correlation_id: int, code: ErrorCode, message: str) -> bytes:
    return encode_response(correlation_id, {"error_code": int(code), "error_message": message})


def decode_response_envelope(payload: bytes) -> tuple[int, Any]:
    """``(correlation_id, body)`` of a response frame, body not yet validated."""
    value = unpack(payload, "response frame")
    if (
        not isinstance(value, list)
        or len(value) != 2
        or type(value[0]) is not int
        or not isinstance(value[1], dict)
    ):
        raise ProtocolError("response must be [correlation_id:int, body:map]")
    return value[0], value[1]


def decode_response_body(api_key: ApiKey, api_version: int, body: Any) -> dict[str, Any]:
    """Validate a response body; a request-level error body raises its typed ``BrokerError``."""
    api = REGISTRY[api_key]
    if isinstance(body, dict) and body.keys() == {"error_code", "error_message"}:
        names = {f.name for f in api.response.fields_for(api_version)}
        if names != {"error_code", "error_message"}:
            validate(api.name, "request error", api_version, REQUEST_ERROR, body)
            raise _broker_error(body["error_code"], body["error_message"], api)
    return dict(validate(api.name, "response", api_version, api.response, body))


def _broker_error(code: int, message: str | None, api: Api) -> BrokerError:
    return error_for(code, f"{api.name}: {message}" if message else "")
