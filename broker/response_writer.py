"""A connection's writer task: it sends the responses ready at the same moment in one go.

The connection's reader still handles one request at a time, in order (seed 001; Kafka mutes a
channel the same way), but it no longer sends each response itself: it queues the response here
and goes on to the next request it has already read. The writer wakes when the reader yields --
at the latest when it waits for bytes or for a held request (a JoinGroup waiting for its round,
a parked Fetch) -- and sends everything queued by then with as few system calls as the pieces
allow (``send_pieces``: one ``writev`` per run of packed bytes). So a client that pipelines N
heartbeats gets N answers in one write instead of N writes, while nothing waits to be coalesced:
a response queued before a held request leaves as soon as the reader blocks on that request.

A reader about to wait in the idle lane (broker/idle_lane.py) first writes what is queued
itself (``flush_now``), so a connection answered one request at a time needs no writer wake-up;
what the socket does not take stays queued for ``run``, and the reader then does not park.

Responses stay in request order: one queue, one writer. Other connections never wait on this
one, as before. Memory: while more than ``PENDING_RESPONSE_BYTES`` of packed responses wait
unsent (a peer not reading), ``put`` waits, which stops the reader taking further requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from broker.frames import Piece, write_now

PENDING_RESPONSE_BYTES = 1 << 20

SendPieces = Callable[[Sequence[Piece]], Awaitable[None]]


class ResponseTimeoutError(Exception):
    """The peer did not take its responses within the connection's idle time."""


class ResponseWriter:
    """Run ``run`` as a task beside the reader; ``put`` each response's pieces in request order;
    ``close`` once no more will come (``run`` then sends what is queued and returns)."""

    def __init__(self, send: SendPieces, *, timeout: float,
                 on_failure: Callable[[], None] = lambda: None) -> None:
        self._send = send
        self._timeout = timeout
        self._on_failure = on_failure
        self._queue: list[Piece] = []
        self._pending = 0  # packed bytes queued or being sent
        self._closed = False
        self._sending = False
        self._wake = trio.Event()
        self._drained = trio.Event()
        self.failure: Exception | None = None  # why the writer stopped early

    async def put(self, pieces: Sequence[Piece]) -> None:
        """Queue one response; wait while too much is unsent. Raises the writer's failure."""
        if self.failure is not None:
            raise self.failure
        self.put_nowait(pieces)
        while self._pending > PENDING_RESPONSE_BYTES and self.failure is None:
            await self._drained.wait()
        if self.failure is not None:
            raise self.failure

    def flush_now(self, fd: int) -> bool:
        """Write what is queued straight to the socket ``fd``, without waiting (a reader about
        to wait in the idle lane, broker/idle_lane.py); whether nothing is left to send. What
        the socket does not take, or a file slice, stays for ``run``."""
        if self._sending or self.failure is not None:
            return False
        queue = self._queue
        if not queue:
            return True
        if not all(isinstance(piece, bytes) for piece in queue):
            return False
        try:
            left = write_now(fd, queue)  # type: ignore[arg-type]  # all bytes, checked above
        except trio.BrokenResourceError as exc:
            self.failure = exc
            self._on_failure()
            return False
        self._pending -= _packed_bytes(queue) - _packed_bytes(left)
        self._queue = list(left)
        return not left

    def put_nowait(self, pieces: Sequence[Piece]) -> None:
        """Queue a response without waiting, whatever is pending (what a direct write left)."""
        self._queue.extend(pieces)
        self._pending += _packed_bytes(pieces)
        self._wake.set()

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
