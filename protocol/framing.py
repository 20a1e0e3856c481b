"""Frames: a 4-byte big-endian length, then that many bytes (one msgpack value).

``FrameDecoder`` is sans-IO in h11's manner: feed it whatever chunks the socket gave
(``receive_data``), take whole frames out (``next_frame`` returns ``None`` when it needs more).
A length above ``max_frame_bytes`` raises ``FrameTooLargeError`` as soon as the 4-byte prefix is
seen, before any of the body is kept.
"""

from __future__ import annotations

import struct

from protocol.errors import FrameTooLargeError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
FRAME_HEADER = struct.Struct(">I")


def encode_frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


def frame_header(length: int) -> bytes:
    """The length prefix alone, for senders that write the payload in pieces (zero copy)."""
    return FRAME_HEADER.pack(length)


class FrameDecoder:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0  # consumed prefix of _buf, compacted lazily

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf) - self._start

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data
        self._check_header()

    def _check_header(self) -> None:
        if len(self._buf) - self._start >= 4:
            (length,) = FRAME_HEADER.unpack_from(self._buf, self._start)
            if length > self.max_frame_bytes:
                del self._buf[:]
                self._start = 0
                raise FrameTooLargeError(length, self.max_frame_bytes)

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more data arrives."""
        start = self._start
        buf = self._buf
        if len(buf) - start < 4:
            return None
        (length,) = FRAME_HEADER.unpack_from(buf, start)
        if length > self.max_frame_bytes:
            raise FrameTooLargeError(length, self.max_frame_bytes)
        end = start + 4 + length
        if len(buf) < end:
            return None
        payload = bytes(buf[start + 4 : end])
        if end == len(buf):
            del buf[:]
            self._start = 0
        else:
            self._start = end
            if end > 1 << 20:  # compact once the consumed prefix is large
                del buf[:end]
                self._start = 0
            self._check_header()
        return payload
