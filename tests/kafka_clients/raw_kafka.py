"""Raw sockets to a Kafka-protocol listener: frames built byte by byte, whatever their key or
version, and answers read with a timeout, so a broker that neither answers nor closes fails the
test instead of stalling it."""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

import pytest

from protocol.framing import encode_frame
from protocol.kafka.api_versions import advertised_versions
from protocol.kafka.apis import API_VERSIONS, KafkaApi
from protocol.kafka.header import decode_response, encode_request

#: how long a raw socket waits for an answer or the close: far above any answer's time here,
#: so reaching it means the broker left the connection hanging
SOCKET_TIMEOUT_S = 20.0
UNSUPPORTED_VERSION = 35


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)


def send(sock: socket.socket, data: bytes) -> None:
    """Send what the broker takes; a broker that closed first is no failure here (the read
    that follows sees the close)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def read_frame(sock: socket.socket) -> bytes | None:
    """The next frame's payload, or None once the broker has closed the connection. Neither
    within the socket's timeout fails the test: the broker left the connection hanging."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    return _read_exactly(sock, struct.unpack(">I", head)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except ConnectionResetError:
            return None
        except TimeoutError:
            pytest.fail(f"the broker neither answered nor closed within {SOCKET_TIMEOUT_S} s")
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def closed_with_nothing_written(sock: socket.socket) -> bool:
    return read_frame(sock) is None


def raw_request(api_key: int, api_version: int, correlation_id: int, body: bytes,
                client_id: bytes = b"hostile") -> bytes:
    """A frame: request header v1 (key, version, correlation id, client id) and ``body`` as
    given, whatever the key or version -- what a peer may send, not what the codec would."""
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id))
    return encode_frame(header + client_id + body)


def api_versions_v0(correlation_id: int) -> bytes:
    return encode_frame(encode_request(API_VERSIONS, 0, correlation_id, "probe", {}))


def assert_api_versions_answer(sock: socket.socket, correlation_id: int, *,
                               version: int = 0, error_code: int = 0) -> None:
    frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection instead of answering"
    answered, body = decode_response(API_VERSIONS, version, frame)
    assert answered == correlation_id
    assert body["error_code"] == error_code
    assert [dict(row) for row in body["api_keys"]] == advertised_versions()


def call(sock: socket.socket, api: KafkaApi, version: int, body: dict[str, Any]) -> Any:
    """One request of ``api`` at ``version`` and its decoded answer (the connection must
    answer it, with the correlation id it was sent with)."""
    sock.sendall(encode_frame(encode_request(api, version, 5, "raw", body)))
    frame = read_frame(sock)
    assert frame is not None, "the listener closed the connection"
    correlation_id, answer = decode_response(api, version, frame)
    assert correlation_id == 5
    return answer
