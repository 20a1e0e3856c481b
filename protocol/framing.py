"""Frames: a 4-byte big-endian length, then that many bytes (one msgpack value).

``FrameDecoder`` is sans-IO in h11's manner: feed it whatever chunks the socket gave
(``receive_data``), take whole frames out (``next_frame`` returns ``None`` when it needs more).
Every length prefix is checked the moment its 4 bytes arrive, before the chunk carrying it is
kept, so a hostile length can never make the decoder buffer its body. A prefix above
``max_frame_bytes`` raises ``FrameTooLargeError`` -- from ``receive_data`` when it opens the next
frame, else from ``next_frame`` once the whole frames before it have been taken out, so requests
sent before the bad one are still answered in order. After that the decoder is spent: every
further call raises the same error (the peer's byte stream can no longer be trusted).
"""

from __future__ import annotations

import struct

from protocol import speedups
from protocol.errors import FrameTooLargeError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
FRAME_HEADER = struct.Struct(">I")
_COMPACT_AFTER = 1 << 20  # drop the consumed prefix of the buffer once it is this large

Chunk = bytes | bytearray | memoryview


def _py_frame_prefixes(data: Chunk, at: int, max_frame_bytes: int) -> tuple[int, bool]:
    """From ``at``, the length prefixes of the frames that follow one another in ``data``, up to
    the first not whole in it: ``(at, oversized)``, where that prefix begins (past the end of
    ``data`` if a frame's body runs on), or where the first above ``max_frame_bytes`` begins."""
    if at < 0:
        raise ValueError("frame_prefixes: at is negative")
    view = memoryview(data).cast("B")
    while at + 4 <= len(view):
        (length,) = FRAME_HEADER.unpack_from(view, at)
        if length > max_frame_bytes:
            return at, True
        at += 4 + length
    return at, False


#: the C one when the accelerator is built: 100 pipelined Heartbeats read at once took the
#: Python loop 27 us
frame_prefixes = _py_frame_prefixes if speedups.native is None else speedups.native.frame_prefixes


def encode_frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


def frame_header(length: int) -> bytes:
    """The length prefix alone, for senders that write the payload in pieces (zero copy)."""
    return FRAME_HEADER.pack(length)


class FrameDecoder:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0  # where the next frame begins in _buf (the prefix before is consumed)
        self._unchecked = 0  # where in _buf the next length prefix not yet checked begins
        self._error: FrameTooLargeError | None = None  # an oversized prefix was seen
        self._error_at: int | None = None  # where in _buf its frame begins; None once raised

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf) - self._start

    @property
    def next_frame_bytes(self) -> int | None:
        """Size of the next frame, length prefix included, once its prefix has arrived (None
        before): a reader can reserve memory for the whole frame before reading its body."""
        start = self._start
        if len(self._buf) - start < 4:
            return None
        (length,) = FRAME_HEADER.unpack_from(self._buf, start)
        return 4 + int(length)

    def whole_frame_starts_with(self, prefix: bytes) -> bool:
        """Whether the next frame is buffered whole and its payload starts with ``prefix`` (a
        reader can tell a request's API from its first bytes before taking the frame)."""
        start = self._start
        buf = self._buf
        if len(buf) - start < 4 or self._error_at == start:
            return False
        (length,) = FRAME_HEADER.unpack_from(buf, start)
        return (
            length >= len(prefix)
            and len(buf) >= start + 4 + length
            and buf.startswith(prefix, start + 4)
        )

    @property
    def failing(self) -> bool:
        """Whether ``next_frame`` raises: an oversized frame is next."""
        return self._error is not None and self._error_at in (None, self._start)

    def receive_data(self, data: Chunk) -> None:
        if self._error is not None:
            self._raise_if_reached()
            return  # bytes after an oversized frame can never be framed
        keep = self._check_prefixes(data)
        self._buf += data if keep is None else memoryview(data)[:keep]
        self._raise_if_reached()

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more data arrives."""
        self._raise_if_reached()
        start = self._start
        buf = self._buf
        if len(buf) - start < 4:
            return None
        (length,) = FRAME_HEADER.unpack_from(buf, start)
        end = start + 4 + length
        if len(buf) < end:
            return None
        payload = bytes(memoryview(buf)[start + 4 : end])  # one copy, not two
        self._take_to(end)
        return payload

    def front(self) -> tuple[bytearray, int, int]:
        """``(buffer, start, stop)``: the frames not yet taken are ``buffer[start:stop]``, for a
        parser that reads whole frames in place (``skip_to`` then takes them out). Valid until
        the decoder is next called."""
        return self._buf, self._start, self._stop()

    def skip_to(self, end: int) -> None:
        """Take out the frames before ``end``, the end of a whole frame of ``front()``'s."""
        stop = self._stop()
        if not self._start <= end <= stop:
            raise ValueError(f"skip_to({end}) outside the frames buffered [{self._start}, {stop}]")
        self._take_to(end)

    def _stop(self) -> int:
        """Where the frames that may be taken end: before an oversized one."""
        return len(self._buf) if self._error_at is None else self._error_at

    def _take_to(self, end: int) -> None:
        self._start = end
        if end == len(self._buf) or end > _COMPACT_AFTER:
            del self._buf[:end]
            self._start = 0
            self._unchecked -= end
            if self._error_at is not None:
                self._error_at -= end

    def _check_prefixes(self, data: Chunk) -> int | None:
        """Check every length prefix that ``data`` completes. Return how many bytes of ``data``
        to keep: ``None`` for all, or the count before an oversized frame (whose error is then
        recorded)."""
        have = len(self._buf)
        at = self._unchecked
        if at < have and at + 4 <= have + len(data):  # a prefix begun in the buffer
            prefix = bytes(self._buf[at:]) + bytes(data[: at + 4 - have])
            (length,) = FRAME_HEADER.unpack(prefix)
            if length > self.max_frame_bytes:
                return self._oversized(length, at, have)
            at += 4 + length
        if at >= have:
            end, oversized = frame_prefixes(data, at - have, self.max_frame_bytes)
            at = have + end
            if oversized:
                (length,) = FRAME_HEADER.unpack_from(data, end)
                return self._oversized(length, at, have)
        self._unchecked = at
        return None

    def _oversized(self, length: int, at: int, have: int) -> int:
        """Record the error of the frame at ``at`` (of ``length`` bytes); how many bytes of the
        chunk being received to keep: those before it."""
        self._error = FrameTooLargeError(length, self.max_frame_bytes)
        self._error_at = at
        self._unchecked = at
        return max(0, at - have)

    def _raise_if_reached(self) -> None:
        """Raise the recorded error once the frames before the oversized one are taken out, and
        on every call after that."""
        if self._error is None or self._error_at not in (None, self._start):
            return
        del self._buf[:]
        self._start = self._unchecked = 0
        self._error_at = None
        raise self._error
