"""How a connection moves bytes, chosen once per connection by its listener.

``PlainStream`` keeps the fast paths of a PLAINTEXT socket: ``os.read`` of what is already
there, and ``send_pieces`` (``os.sendfile`` for large file slices). ``TlsStream`` goes through
trio's ``SSLStream``: file slices are read into memory and encrypted; "what is already there"
is a byte taken from the TLS stream once it has one (the rest of the request follows with
``receive_some``), so an idle TLS connection holds no request memory either.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import trio

from broker.frames import Piece, send_pieces
from broker.log import ReadResult


class ConnectionStream(Protocol):
    def read_now(self, size: int) -> bytes | None:
        """Up to ``size`` bytes already received (b"" at end of stream); None if none yet."""

    async def wait_readable(self) -> None: ...

    async def receive_some(self, size: int) -> bytes: ...

    async def send(self, pieces: Sequence[Piece]) -> None: ...

    async def aclose(self) -> None: ...


class PlainStream:
    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._fd = stream.socket.fileno()

    def read_now(self, size: int) -> bytes | None:
        try:
            # os.read, as send_pieces writes: receive_some yields after a read that succeeds at
            # once, a scheduling round per request.
            return os.read(self._fd, size)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise trio.BrokenResourceError(f"read failed: {exc}") from exc

    async def wait_readable(self) -> None:
        await trio.lowlevel.wait_readable(self._fd)

    async def receive_some(self, size: int) -> bytes:
        return await self._stream.receive_some(size)

    async def send(self, pieces: Sequence[Piece]) -> None:
        await send_pieces(self._stream, pieces)

    async def aclose(self) -> None:
        await self._stream.aclose()


class TlsStream:
    def __init__(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self._stream = stream
        self._early: bytes | None = None  # taken by wait_readable, not handed out yet

    def read_now(self, size: int) -> bytes | None:
        early, self._early = self._early, None
        return early

    async def wait_readable(self) -> None:
        if self._early is None:
            self._early = bytes(await self._stream.receive_some(1))

    async def receive_some(self, size: int) -> bytes:
        early = self.read_now(size)
        if early is not None:
            return early
        return bytes(await self._stream.receive_some(size))

    async def send(self, pieces: Sequence[Piece]) -> None:
        await self._stream.send_all(b"".join(
            p.bytes() if isinstance(p, ReadResult) else p for p in pieces))

    async def aclose(self) -> None:
        with trio.move_on_after(1):  # close_notify, unless the peer takes nothing
            await self._stream.aclose()
        await self._stream.transport_stream.aclose()
