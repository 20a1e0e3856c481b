"""A connection's writer task: it sends the responses ready at the same moment in one go.

The connection's reader still handles one request at a time, in order (seed 001; Kafka mutes a
channel the same way), but it no longer sends each response itself: it queues the response here
and goes on to the next request it has already read. The writer wakes when the reader yields --
at the latest when it waits for bytes or for a held request (a JoinGroup waiting for its round,
a parked Fetch) -- and sends everything queued by then with as few system calls as the pieces
allow (``send_pieces``: one ``writev`` per run of packed bytes). So a client that pipelines N
heartbeats gets N answers in one write instead of N writes, while nothing waits to be coalesced:
a response queued before a held request leaves as soon as the reader blocks on that request.

A response with no request read behind it (``put(..., last=True)``: the reader goes back to
waiting for bytes) is written by the reader itself, with the responses queued before it, unless
the writer is in the middle of a send: a non-blocking ``write`` of what the socket takes at once
(``write_now``), the rest, if any, queued here. A client sending one request at a time -- a
member's heartbeat every few seconds, paced over thousands of connections -- then costs one
scheduling of its connection per request instead of three (reader, writer, the writer's
checkpoint after its send), and no deadline per send; the answers to requests read together
still leave in one write.

Responses stay in request order: one queue, one writer. Other connections never wait on this
one, as before. Memory: while more than ``PENDING_RESPONSE_BYTES`` of packed responses wait
unsent (a peer not reading), ``put`` waits, which stops the reader taking further requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from broker.frames import Piece

PENDING_RESPONSE_BYTES = 1 << 20

SendPieces = Callable[[Sequence[Piece]], Awaitable[None]]
#: write what the socket takes now, without waiting: the bytes written (0 if none, or if the
#: stream cannot write outside its writer, as TLS)
WriteNow = Callable[[bytes], int]


class ResponseTimeoutError(Exception):
    """The peer did not take its responses within the connection's idle time."""


class ResponseWriter:
    """Run ``run`` as a task beside the reader; ``put`` each response's pieces in request order;
    ``close`` once no more will come (``run`` then sends what is queued and returns)."""

    def __init__(self, send: SendPieces, *, timeout: float,
                 on_failure: Callable[[], None] = lambda: None,
                 write_now: WriteNow | None = None) -> None:
        self._send = send
        self._write_now = write_now
        self._sending = False  # ``run`` has pieces taken from the queue not yet sent
        self._timeout = timeout
        self._on_failure = on_failure
        self._queue: list[Piece] = []
        self._pending = 0  # packed bytes queued or being sent
        self._closed = False
        self._wake = trio.Event()
        self._drained = trio.Event()
        self.failure: Exception | None = None  # why the writer stopped early

    async def put(self, pieces: Sequence[Piece], *, last: bool = False) -> None:
        """Queue one response; wait while too much is unsent. Raises the writer's failure.
        ``last``: no other request is read yet, so nothing would coalesce with this response:
        it is written at once if nothing is ahead of it."""
        if self.failure is not None:
            raise self.failure
        if last and self._write_now is not None and not self._sending:
            # the answers queued before it, not taken by the writer yet, go with it
            queued, self._queue = self._queue, []
            self._pending -= _packed_bytes(queued)
            left = self._write_at_once([*queued, *pieces])
            if left is None:
                return
            pieces = left
        self._queue.extend(pieces)
        self._pending += _packed_bytes(pieces)
        self._wake.set()
        while self._pending > PENDING_RESPONSE_BYTES and self.failure is None:
            await self._drained.wait()
        if self.failure is not None:
            raise self.failure

    def _write_at_once(self, pieces: Sequence[Piece]) -> list[Piece] | None:
        """Write packed pieces now, as far as the socket takes them; what is left to queue
        (None: all sent). File slices are left to the writer (``sendfile``)."""
        assert self._write_now is not None
        packed = [p for p in pieces if isinstance(p, bytes)]
        if len(packed) < len(pieces):
            return list(pieces)
        data = packed[0] if len(packed) == 1 else b"".join(packed)
        try:
            sent = self._write_now(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.failure = exc
            self._drained.set()
            self._on_failure()
            raise
        if sent == len(data):
            return None
        return [data[sent:]]

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        """Send until closed and drained, or until a send fails (``failure`` says why)."""
        try:
            while self._queue or not self._closed:
                if not self._queue:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    continue
                pieces, self._queue = self._queue, []
                self._sending = True
                with trio.move_on_after(self._timeout) as timeout:
                    await self._send(pieces)
                self._sending = False
                if timeout.cancelled_caught:
                    idle_ms = round(self._timeout * 1000)
                    raise ResponseTimeoutError(
                        f"the peer did not take its response within connections_max_idle_ms="
                        f"{idle_ms}"
                    )
                self._pending -= _packed_bytes(pieces)
                self._drained.set()
                self._drained = trio.Event()
        except (ResponseTimeoutError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.failure = exc
            self._drained.set()
            self._on_failure()


def _packed_bytes(pieces: Sequence[Piece]) -> int:
    """The bytes held in memory (file slices are sent from the page cache)."""
    return sum(len(p) for p in pieces if isinstance(p, bytes))
