"""Fetch frames built around file slices decode exactly like normally packed ones, and reach
the peer intact through sendfile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.frames import encode_with_file_slices, send_pieces
from broker.log import LogConfig, PartitionLog, ReadResult
from protocol.apis import ApiKey
from protocol.framing import FrameDecoder
from protocol.messageset import decode_messages, encode_message_set
from protocol.wire import decode_response_body, decode_response_envelope

EMPTY = ReadResult(None, 0, 0, 0)


def _log(tmp_path: Path, count: int, size: int) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    for i in range(count):
        log.append(encode_message_set([(None, bytes([i % 256]) * size, i)]))
    return log


def _body(slices: list[ReadResult]) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition": i, "error_code": 0, "high_watermark": 7,
                     "log_start_offset": 0, "records": s}
                    for i, s in enumerate(slices)
                ],
            }
        ]
    }


def _materialised(body: Any) -> Any:
    if isinstance(body, ReadResult):
        return body.bytes()
    if isinstance(body, dict):
        return {k: _materialised(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_materialised(v) for v in body]
    return body


def _joined(pieces: list[bytes | ReadResult]) -> bytes:
    return b"".join(p.bytes() if isinstance(p, ReadResult) else p for p in pieces)


def test_pieces_decode_to_the_body_with_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path, 50, 300)
    slices = [log.read(0, 5000), EMPTY, log.read(20, 1 << 20), log.read(3, 17)]
    body = _body(slices)
    pieces = encode_with_file_slices(41, body)
    assert sum(isinstance(p, ReadResult) for p in pieces) == 3  # the empty slice is inline
    decoder = FrameDecoder()
    decoder.receive_data(_joined(pieces))
    payload = decoder.next_frame()
    assert payload is not None and decoder.buffered == 0
    correlation_id, answer = decode_response_envelope(payload)
    assert correlation_id == 41
    expected = _materialised(body)
    assert decode_response_body(ApiKey.FETCH, 0, answer) == expected
    messages, _ = decode_messages(expected["topics"][0]["partitions"][2]["records"])
    assert [m.offset for m in messages] == list(range(20, 50))
    log.close()


def test_a_body_without_slices_is_one_piece() -> None:
    pieces = encode_with_file_slices(1, _body([EMPTY]))
    assert len(pieces) == 1 and isinstance(pieces[0], bytes)


async def test_send_pieces_delivers_the_frame_through_a_socket(tmp_path: Path) -> None:
    log = _log(tmp_path, 400, 1000)  # ~400 kB: more than a socket buffer takes at once
    pieces = encode_with_file_slices(7, _body([log.read(0, 1 << 20), log.read(100, 1000)]))
    expected = _joined(pieces)
    a, b = trio.socket.socketpair()
    sender, receiver = trio.SocketStream(a), trio.SocketStream(b)
    received = bytearray()

    async def receive() -> None:
        while len(received) < len(expected):
            chunk = await receiver.receive_some(65536)
            assert chunk
            received.extend(chunk)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            await send_pieces(sender, pieces)
    assert bytes(received) == expected
    await sender.aclose()
    await receiver.aclose()
    log.close()
