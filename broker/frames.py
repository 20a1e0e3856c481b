"""Response frames, and sending them with stored bytes going from file to socket directly.

A Fetch response carries record data as msgpack ``bin`` values holding the segment bytes exactly
as stored (DESIGN.md, "Wire protocol"). Instead of reading those bytes into Python and packing
them, ``encode_with_file_slices`` packs everything around them and leaves each ``ReadResult`` in
place behind a ``bin 32`` header; ``send_pieces`` writes the packed parts with ``write`` and the
slices with ``os.sendfile`` (seed 002: the page cache goes to the socket without a copy through
the process). benchmarks/fetch_send.py measures this against reading and packing: it pays for
large reads only, so smaller ones are read and packed (``SENDFILE_MIN_BYTES``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import trio

from broker.log import ReadResult
from protocol.framing import frame_header

Piece = bytes | ReadResult
# Below this size a slice is read and packed: sendfile's extra system calls cost more than the
# copy saves (benchmarks/fetch_send.py: reading and packing wins at 4 KiB by about a third, the
# two meet between 128 and 256 KiB, and at 1 MiB sendfile is several times faster).
SENDFILE_MIN_BYTES = 128 * 1024
_BIN32 = struct.Struct(">BI")
_BIN32_TYPE = 0xC6
_IOV_MAX = os.sysconf("SC_IOV_MAX")  # buffers one writev takes


def sendable(result: ReadResult) -> bytes | ReadResult:
    """What to put in a response body for ``result``: the slice itself when large enough to be
    worth sendfile, else its bytes."""
    return result if result.length >= SENDFILE_MIN_BYTES else result.bytes()


@dataclass(frozen=True)
class WithFileSlices:
    """A response body in which some values are ``ReadResult``s, sent as msgpack bin."""

    body: dict[str, Any]


def encode_with_file_slices(correlation_id: int, body: dict[str, Any]) -> list[Piece]:
    """The frame ``[correlation_id, body]`` as packed bytes and file slices, in order."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=True)
    pieces: list[Piece] = []
    buffered: list[bytes] = [packer.pack_array_header(2), packer.pack(correlation_id)]

    def walk(value: Any) -> None:
        if isinstance(value, ReadResult):
            buffered.append(_BIN32.pack(_BIN32_TYPE, value.length))
            if value.length:
                pieces.append(b"".join(buffered))
                buffered.clear()
                pieces.append(value)
        elif isinstance(value, dict):
            buffered.append(packer.pack_map_header(len(value)))
            for key, item in value.items():
                buffered.append(packer.pack(key))
                walk(item)
        elif isinstance(value, list):
            buffered.append(packer.pack_array_header(len(value)))
            for item in value:
                walk(item)
        else:
            buffered.append(packer.pack(value))

    walk(body)
    pieces.append(b"".join(buffered))
    length = sum(p.length if isinstance(p, ReadResult) else len(p) for p in pieces)
    head = pieces[0]
    assert isinstance(head, bytes)  # the array header always comes first
    pieces[0] = frame_header(length) + head
    return pieces


async def send_pieces(stream: trio.SocketStream, pieces: Sequence[Piece]) -> None:
    """Write the pieces of one or more frames in order: each run of packed bytes with one
    ``writev`` (so responses queued together leave in one system call), slices with
    ``sendfile``, straight on the non-blocking socket, waiting only when its buffer is full."""
    sock = stream.socket
    fd = sock.fileno()
    run: list[bytes] = []
    for piece in pieces:
        if isinstance(piece, ReadResult):
            if run:
                await _write_all(sock, fd, run)
                run = []
            in_fd, position, remaining = piece.fileno(), piece.position, piece.length
            while remaining:
                sent = await _retry(sock, os.sendfile, fd, in_fd, position, remaining)
                if sent == 0:  # the frame promised bytes the file no longer has
                    raise trio.BrokenResourceError(f"file slice ended {remaining} bytes early")
                position += sent
                remaining -= sent
        elif piece:
            run.append(piece)
    if run:
        await _write_all(sock, fd, run)
    await trio.lowlevel.checkpoint()


async def _write_all(sock: trio.socket.SocketType, fd: int, buffers: list[bytes]) -> None:
    """Write every buffer, in order: ``write`` for one, ``writev`` (at most ``IOV_MAX`` at a
    time) for several, going on after a partial write."""
    if len(buffers) == 1:
        view = memoryview(buffers[0])
        while view:
            view = view[await _retry(sock, os.write, fd, view) :]
        return
    views = [memoryview(b) for b in buffers]
    first = 0
    while first < len(views):
        sent = await _retry(sock, os.writev, fd, views[first : first + _IOV_MAX])
        while sent:
            size = len(views[first])
            if sent < size:
                views[first] = views[first][sent:]
                break
            sent -= size
            first += 1


def write_now(fd: int, buffers: list[bytes]) -> list[bytes]:
    """Write what the socket takes now, without waiting; what is left (none if all went).
    Raises ``trio.BrokenResourceError`` if the write fails."""
    try:
        sent = os.write(fd, buffers[0]) if len(buffers) == 1 else os.writev(fd, buffers[:_IOV_MAX])
    except BlockingIOError:
        return buffers
    except OSError as exc:
        raise trio.BrokenResourceError(f"write failed: {exc}") from exc
    for index, buffer in enumerate(buffers):
        if sent < len(buffer):
            return [buffer[sent:], *buffers[index + 1 :]]
        sent -= len(buffer)
    return []


async def _retry(sock: trio.socket.SocketType, call: Callable[..., int], *args: Any) -> int:
    """``call(*args)`` on the socket, waiting while it would block."""
    while True:
        try:
            return call(*args)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
        except OSError as exc:
            raise trio.BrokenResourceError(f"{call.__name__} failed: {exc}") from exc
